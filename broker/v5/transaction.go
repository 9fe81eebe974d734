package v5

import (
	"context"
	"fmt"
	"strconv"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/message"
)

// Transactions: a TRANSACTION message is stored as a 4.x half message
// (toMessage marks it; the broker's send path moves it to the half
// topic), and its SendResultEntry carries a transaction id naming it. The
// producer's EndTransaction commits or rolls it back through the broker's
// END_TRANSACTION code (a Transactor). A half message left undecided is
// checked: the broker's checker hands it to RecoverOrphaned, which sends
// it to a live producer of its group on that producer's Telemetry stream
// (recover_orphaned_transaction_command); the producer answers with
// EndTransaction. A v5 producer's group is its topic.

// txIDVersion starts every transaction id this server makes.
const txIDVersion = "01"

// TransactionID names a half message for EndTransaction: its commit-log
// offset and its queue offset in the half topic (4.x's commitLogOffset
// and tranStateTableOffset), as "01" and 16 hex digits each.
func TransactionID(pos, halfOffset int64) string {
	return fmt.Sprintf("%s%016X%016X", txIDVersion, uint64(pos), uint64(halfOffset))
}

// ParseTransactionID reads what TransactionID made; ok is false for
// anything else.
func ParseTransactionID(id string) (pos, halfOffset int64, ok bool) {
	if len(id) != len(txIDVersion)+32 || id[:len(txIDVersion)] != txIDVersion {
		return 0, 0, false
	}
	for _, c := range id[len(txIDVersion):] {
		if (c < '0' || c > '9') && (c < 'A' || c > 'F') {
			return 0, 0, false // NB: one spelling per id: no sign, no lower case
		}
	}
	p, err1 := strconv.ParseInt(id[2:18], 16, 64)
	h, err2 := strconv.ParseInt(id[18:], 16, 64)
	if err1 != nil || err2 != nil || p < 0 || h < 0 {
		return 0, 0, false
	}
	return p, h, true
}

// EndRequest is a producer's decision about one half message.
type EndRequest struct {
	Topic      string // the message's topic, which is also its group
	MessageID  string // its UNIQ_KEY
	Pos        int64  // from the transaction id: the half message's commit-log offset
	HalfOffset int64  // and its queue offset in the half topic
	Commit     bool   // else roll back
	FromCheck  bool   // the answer to a recover_orphaned_transaction_command
}

// Transactor is the transaction side of a Backend.
type Transactor interface {
	// EndTransaction commits or rolls back r's half message: OK when it
	// is (or was already) decided; INVALID_TRANSACTION_ID when no half
	// message of r's topic and message id is where r says.
	EndTransaction(ctx context.Context, r EndRequest) *v2.Status
}

// EndTransaction commits or rolls back a half message a SendMessage
// stored. A resolution left unspecified (the producer does not know yet)
// decides nothing: the broker's checker asks again later.
func (s *Server) EndTransaction(ctx context.Context, req *v2.EndTransactionRequest) (*v2.EndTransactionResponse, error) {
	answer := func(st *v2.Status) (*v2.EndTransactionResponse, error) {
		return &v2.EndTransactionResponse{Status: st}, nil
	}
	name := req.GetTopic().GetName()
	if err := topic.ValidateName(name); err != nil {
		return answer(status(v2.Code_ILLEGAL_TOPIC, "topic: "+err.Error()))
	}
	c, st := s.check(ctx, "EndTransaction", acl.Resource{Name: name, Need: acl.Pub})
	if st != nil {
		return answer(st)
	}
	tx, ok := s.backend.(Transactor)
	if !ok {
		return answer(status(v2.Code_NOT_IMPLEMENTED, "this server stores no transactional messages"))
	}
	id := req.GetMessageId()
	if !plainText(id) {
		return answer(status(v2.Code_ILLEGAL_MESSAGE_ID, fmt.Sprintf("message_id %q: want 1 to %d printable characters", clip(id), maxIDLen)))
	}
	pos, half, ok := ParseTransactionID(req.GetTransactionId())
	if !ok {
		return answer(status(v2.Code_INVALID_TRANSACTION_ID, fmt.Sprintf(
			"transaction_id %q is not one this broker gave: use the transaction_id of the message's SendResultEntry", clip(req.GetTransactionId()))))
	}
	var commit bool
	switch req.GetResolution() {
	case v2.TransactionResolution_COMMIT:
		commit = true
	case v2.TransactionResolution_ROLLBACK:
	case v2.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED:
		return answer(status(v2.Code_OK, "no resolution: the transaction stays open and the broker asks the producer again later"))
	default:
		return answer(status(v2.Code_BAD_REQUEST, fmt.Sprintf("resolution %d is not COMMIT or ROLLBACK", req.GetResolution())))
	}
	s.clients.producesFor(c.clientID, name)
	return answer(tx.EndTransaction(ctx, EndRequest{Topic: name, MessageID: id, Pos: pos, HalfOffset: half, Commit: commit,
		FromCheck: req.GetSource() == v2.TransactionSource_SOURCE_SERVER_CHECK}))
}

// RecoverOrphaned asks a live producer of group about the undecided half
// message rec (its Topic and QueueID already the real ones): one of the
// group's open Telemetry streams gets a recover_orphaned_transaction_command
// with the message and txID. It reports whether a stream took it; it never
// waits for one.
func (s *Server) RecoverOrphaned(group string, rec *message.Record, txID string) bool {
	select {
	case <-s.quit:
		return false
	default:
	}
	m := toV5(Popped{Rec: *rec}, 0)
	sp := m.GetSystemProperties()
	sp.MessageType = v2.MessageType_TRANSACTION
	sp.ReceiptHandle, sp.InvisibleDuration, sp.DeliveryAttempt = nil, nil, nil
	cmd := &v2.TelemetryCommand{Status: okStatus(), Command: &v2.TelemetryCommand_RecoverOrphanedTransactionCommand{
		RecoverOrphanedTransactionCommand: &v2.RecoverOrphanedTransactionCommand{Message: m, TransactionId: txID}}}
	return s.clients.tellLiveProducer(group, cmd, s.opts.Now())
}
