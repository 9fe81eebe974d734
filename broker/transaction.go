package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Transactions (spec 3.9): a half message waits in RMQ_SYS_TRANS_HALF_TOPIC
// until END_TRANSACTION commits it (stored again under its real topic) or
// rolls it back. Either way an "op" record with the half queue offset goes
// to RMQ_SYS_TRANS_OP_HALF_TOPIC, so the decision survives restarts. The
// checker asks a producer of the group (CHECK_TRANSACTION_STATE) about half
// messages left undecided past the transaction timeout, at most
// transactionCheckMax times, after which they are given up.
const (
	transOpTopic        = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	transCheckGroup     = "%TRANS_CHECK%"
	transactionCheckMax = 15
)

type transactions struct {
	b *Broker

	mu sync.Mutex
	// guarded by mu:
	done     map[int64]bool      // half queue offsets decided (op written)
	checks   map[int64]int       // check requests sent per half queue offset
	deciding map[int64]*decision // half queue offsets being decided; see lockDecision
	loaded   bool
	opsNext  int64 // op queue offset read so far
}

// decision serializes the decisions about one half message.
type decision struct {
	mu   sync.Mutex
	refs int // guarded by transactions.mu: holders and waiters
}

func newTransactions(b *Broker) *transactions {
	return &transactions{b: b, done: map[int64]bool{}, checks: map[int64]int{}, deciding: map[int64]*decision{}}
}

// lockDecision locks the decision about the half message at halfOffset and
// returns its unlock. Whoever commits, rolls back or gives up a half message
// holds it from the decided check through markDone, so that END_TRANSACTIONs
// arriving together (a producer's answer to each of several checks, say)
// commit it at most once.
func (tx *transactions) lockDecision(halfOffset int64) (unlock func()) {
	tx.mu.Lock()
	d := tx.deciding[halfOffset]
	if d == nil {
		d = &decision{}
		tx.deciding[halfOffset] = d
	}
	d.refs++
	tx.mu.Unlock()
	d.mu.Lock()
	return func() {
		d.mu.Unlock()
		tx.mu.Lock()
		if d.refs--; d.refs == 0 {
			delete(tx.deciding, halfOffset)
		}
		tx.mu.Unlock()
	}
}

// refreshLocked reads new op records into the done set. REQUIRES: mu held.
func (tx *transactions) refreshLocked() {
	st := tx.b.store
	for {
		res, err := st.Get(context.Background(), store.GetRequest{Topic: transOpTopic, QueueID: 0, Offset: tx.opsNext, MaxMsgs: 32})
		if err != nil || (res.Status != store.GetFound && res.Status != store.GetOffsetTooSmall) {
			return
		}
		if res.Status == store.GetOffsetTooSmall {
			tx.opsNext = res.NextOffset
			continue
		}
		for body := res.Body; len(body) > 0; {
			r, err := message.Decode(body)
			if err != nil {
				return
			}
			body = body[r.TotalSize:]
			if off, err := strconv.ParseInt(string(r.Body), 10, 64); err == nil {
				tx.done[off] = true
			}
		}
		tx.opsNext = res.NextOffset
	}
}

// decided reports whether a half message was committed or rolled back:
// every one below the checker's committed offset was (the checker moves
// past decided ones only), and done holds those above it.
func (tx *transactions) decided(halfOffset int64) bool {
	if checked, ok := tx.b.sched.offsets.Query(transCheckGroup, transHalfTopic, 0); ok && halfOffset < checked {
		return true
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.refreshLocked()
	return tx.done[halfOffset]
}

// pruneLocked forgets the decisions below the checker's committed offset,
// which decided answers from that offset: the bookkeeping stays as large as
// the undecided window, not every transaction ever made.
// REQUIRES: mu held.
func (tx *transactions) pruneLocked(checked int64) {
	for off := range tx.done {
		if off < checked {
			delete(tx.done, off)
		}
	}
	for off := range tx.checks {
		if off < checked {
			delete(tx.checks, off)
		}
	}
}

// markDone stores the op record of a decision.
func (tx *transactions) markDone(ctx context.Context, halfOffset int64) error {
	b := tx.b
	if _, err := b.ensureTopic(transOpTopic, 1); err != nil {
		return err
	}
	m := &message.Message{Topic: transOpTopic, BornTimestamp: time.Now().UnixMilli(), BornHost: b.storeHost, StoreHost: b.storeHost,
		Body: []byte(strconv.FormatInt(halfOffset, 10)), Properties: string(message.AppendProperties(nil, map[string]string{message.PropTags: "d"}))}
	if res := b.store.Put(ctx, m); !res.Stored() {
		return &putError{res}
	}
	tx.mu.Lock()
	tx.done[halfOffset] = true
	delete(tx.checks, halfOffset) // NB: never checked again
	tx.mu.Unlock()
	return nil
}

type putError struct{ res store.PutResult }

func (e *putError) Error() string { return e.res.Status.String() + ": " + e.res.Remark }

// check asks producers about undecided half messages older than timeout.
func (tx *transactions) check(now time.Time, timeout time.Duration) {
	b := tx.b
	next, _ := b.sched.offsets.Query(transCheckGroup, transHalfTopic, 0)
	next = max(next, b.store.MinOffset(transHalfTopic, 0))
	tx.mu.Lock()
	tx.refreshLocked()
	tx.mu.Unlock()
	advancing := true
	for off := next; ; {
		res, err := b.store.Get(context.Background(), store.GetRequest{Topic: transHalfTopic, QueueID: 0, Offset: off, MaxMsgs: 32})
		if err != nil || res.Status != store.GetFound {
			break
		}
		for body := res.Body; len(body) > 0; {
			r, err := message.Decode(body)
			if err != nil {
				return
			}
			rec := body[:r.TotalSize]
			body = body[r.TotalSize:]
			tx.mu.Lock()
			done, n := tx.done[r.QueueOffset], tx.checks[r.QueueOffset]
			tx.mu.Unlock()
			switch {
			case done:
			case now.Sub(time.UnixMilli(r.StoreTimestamp)) < checkAfter(&r, timeout):
				advancing = false
			case n >= transactionCheckMax:
				tx.giveUp(&r, n)
			default:
				// NB: only a check a producer got counts: with no producer
				// of the group online, the message waits for one.
				if tx.askProducer(&r, rec) {
					tx.mu.Lock()
					tx.checks[r.QueueOffset] = n + 1
					tx.mu.Unlock()
				}
				advancing = false
			}
			if advancing {
				b.sched.offsets.Commit(transCheckGroup, transHalfTopic, 0, r.QueueOffset+1)
			}
		}
		off = res.NextOffset
	}
	if checked, ok := b.sched.offsets.Query(transCheckGroup, transHalfTopic, 0); ok {
		tx.mu.Lock()
		tx.pruneLocked(checked)
		tx.mu.Unlock()
	}
}

// transCheckMaxTopic keeps the half messages given up after
// transactionCheckMax checks, as Java's broker does, for an operator to
// look at (mqadmin consumeMessage) and resend by hand.
const transCheckMaxTopic = "TRANS_CHECK_MAX_TIME_TOPIC"

// checkAfter is how old the half message r must be before it is checked:
// timeout, or its CHECK_IMMUNITY_TIME_IN_SECONDS when the producer set a
// longer one (spec 3.9).
func checkAfter(r *message.Record, timeout time.Duration) time.Duration {
	if v := propOf(r.Properties, message.PropCheckImmunityTime); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 32); err == nil && secs > 0 {
			return max(timeout, time.Duration(secs)*time.Second)
		}
	}
	return timeout
}

// giveUp abandons the half message r after n checks, unless an
// END_TRANSACTION decided it meanwhile: it is stored, as it was, in
// TRANS_CHECK_MAX_TIME_TOPIC, then recorded as done.
func (tx *transactions) giveUp(r *message.Record, n int) {
	halfOffset := r.QueueOffset
	unlock := tx.lockDecision(halfOffset)
	defer unlock()
	if tx.decided(halfOffset) {
		return
	}
	b := tx.b
	b.logger.Warn("broker: transaction given up after max checks; kept in "+transCheckMaxTopic,
		"half_offset", halfOffset, "checks", n, "msg_id", propOf(r.Properties, message.PropUniqKey))
	if _, err := b.ensureTopic(transCheckMaxTopic, 1); err != nil {
		b.logger.Error("broker: create "+transCheckMaxTopic, "err", err)
		return // NB: not marked done: given up again at the next check
	}
	m := r.Message()
	m.Topic, m.QueueID = transCheckMaxTopic, 0
	m.SysFlag &^= message.TxMask | message.FlagBornHostV6 | message.FlagStoreHostV6
	if res := b.store.Put(context.Background(), &m); !res.Stored() {
		b.logger.Error("broker: keep a given-up half message", "half_offset", halfOffset, "status", res.Status, "remark", res.Remark)
		return
	}
	_ = tx.markDone(context.Background(), halfOffset)
}

// askProducer sends CHECK_TRANSACTION_STATE to one live producer of the
// half message's group, with the message as stored but its real topic, and
// reports whether one got it. With no 4.x producer of the group online, a
// RocketMQ 5 producer's Telemetry stream gets the check.
func (tx *transactions) askProducer(r *message.Record, rec []byte) bool {
	b := tx.b
	grp := propOf(r.Properties, message.PropProducerGroup)
	var conn *remoting.Conn
	for _, id := range b.groups.ProducerConnIDs(grp) {
		if conn = b.conn(id); conn != nil {
			break
		}
	}
	if conn == nil {
		// NB: then a RocketMQ 5 producer's (grpc.go); none online: try
		// again at the next check.
		return b.askV5Producer(grp, r)
	}
	m := r.Message()
	m.Topic = propOf(r.Properties, message.PropRealTopic)
	qid, _ := strconv.Atoi(propOf(r.Properties, message.PropRealQueueID))
	m.QueueID = int32(qid)
	m.SysFlag = (m.SysFlag &^ (message.TxMask | message.FlagBornHostV6 | message.FlagStoreHostV6)) | message.TxPrepared
	body := make([]byte, m.EncodedSize())
	if err := m.Encode(body, r.QueueOffset, r.PhysicalOffset); err != nil {
		body = rec
	}
	uniq := propOf(r.Properties, message.PropUniqKey)
	h := protocol.CheckTransactionStateRequestHeader{TranStateTableOffset: r.QueueOffset, CommitLogOffset: r.PhysicalOffset,
		MsgID: uniq, TransactionID: uniq, OffsetMsgID: message.OffsetMsgID(b.storeHost, r.PhysicalOffset)}
	if err := tellClient(conn, protocol.CheckTransactionState, protocol.Ext(&h), body); err != nil {
		b.logger.Debug("broker: transaction check", "group", grp, "err", err)
		return false
	}
	return true
}

// checkLoop runs the checker every interval.
func (tx *transactions) checkLoop(interval, timeout time.Duration) {
	defer tx.b.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-tx.b.quit:
			return
		case now := <-t.C:
			if !tx.b.isSlave() { // NB: the master checks its producers
				tx.check(now, timeout)
			}
		}
	}
}

// handleEndTransaction serves END_TRANSACTION (37): a commit stores the half
// message under its real topic and queue; a rollback drops it (spec 3.9).
func (b *Broker) handleEndTransaction(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.EndTransactionRequestHeader
	if !decodeHeader(w, req, &h, "bad end-transaction header") {
		return
	}
	if h.CommitOrRollback != message.TxCommit && h.CommitOrRollback != message.TxRollback {
		reply(w, req, protocol.Success, "") // no decision yet
		return
	}
	res := b.endTransaction(ctx, txEnd{pos: h.CommitLogOffset, halfOffset: h.TranStateTableOffset,
		commit: h.CommitOrRollback == message.TxCommit, group: h.ProducerGroup, checkGroup: true})
	switch res.fault {
	case endNoHalf:
		code := int16(protocol.SystemError)
		if res.readErr != nil {
			code = storeErrCode(res.readErr)
		}
		reply(w, req, code, res.remark)
	case endNotStored:
		replyPut(w, req, res.put, putInternal)
	case endNotRecorded:
		reply(w, req, protocol.SystemError, res.remark)
	default:
		reply(w, req, protocol.Success, "")
	}
}

// txEnd is a producer's decision about a half message: END_TRANSACTION's,
// or a RocketMQ 5 EndTransaction's (grpc.go).
type txEnd struct {
	pos        int64 // the half message's commit-log offset
	halfOffset int64 // its queue offset in the half topic
	commit     bool  // else roll back
	// What the half message must carry; "" checks nothing, but for
	// group with checkGroup (END_TRANSACTION: an empty group is checked).
	group      string // its producer group (PGROUP)
	checkGroup bool
	topic      string // its real topic
	msgID      string // its UNIQ_KEY
}

// endFault says why a decision was not made.
type endFault int

const (
	endDone        endFault = iota // decided now, or before
	endNoHalf                      // no such half message: remark (and readErr) say why
	endNotStored                   // the commit's put failed: put
	endNotRecorded                 // the rollback's op record failed: remark
)

// endResult is the outcome of endTransaction.
type endResult struct {
	fault   endFault
	remark  string
	readErr error // endNoHalf: the read of pos failed
	put     store.PutResult
}

// endTransaction commits (stores the half message under its real topic
// and queue) or rolls back the half message e names, once: a half message
// already decided is left as it is (endDone). A decision that names no
// half message is refused even when the half queue offset it names was
// decided, unless the log no longer holds the offset it names.
func (b *Broker) endTransaction(ctx context.Context, e txEnd) endResult {
	// NB: held through markDone, so that concurrent decisions about one half
	// message store it under its real topic at most once.
	unlock := b.tx.lockDecision(e.halfOffset)
	defer unlock()
	rec, err := b.store.ReadMessage(e.pos)
	if err != nil {
		// NB: only an offset retention removed may be a decided half
		// message's; one the log holds (inside a record, past its end)
		// names none.
		if e.pos < int64(b.store.Log().Min()) && b.tx.decided(e.halfOffset) {
			return endResult{} // decided, and since deleted from the log
		}
		return endResult{fault: endNoHalf, readErr: err, remark: fmt.Sprintf("no half message at offset %d: %v", e.pos, err)}
	}
	r, err := message.Decode(rec)
	if err != nil || string(r.Topic) != transHalfTopic {
		return endResult{fault: endNoHalf, remark: fmt.Sprintf("offset %d is not a half message", e.pos)}
	}
	props := string(r.Properties)
	if g, _ := message.PropertyValue(props, message.PropProducerGroup); (e.group != "" || e.checkGroup) && g != e.group {
		return endResult{fault: endNoHalf, remark: fmt.Sprintf("half message at %d belongs to producer group %q, not %q", e.pos, g, e.group)}
	}
	if r.QueueOffset != e.halfOffset {
		return endResult{fault: endNoHalf, remark: fmt.Sprintf("half message at %d has queue offset %d, not %d", e.pos, r.QueueOffset, e.halfOffset)}
	}
	realTopic, _ := message.PropertyValue(props, message.PropRealTopic)
	if e.topic != "" && realTopic != e.topic {
		return endResult{fault: endNoHalf, remark: fmt.Sprintf("half message at %d is for topic %q, not %q", e.pos, realTopic, e.topic)}
	}
	if id, _ := message.PropertyValue(props, message.PropUniqKey); e.msgID != "" && id != e.msgID {
		return endResult{fault: endNoHalf, remark: fmt.Sprintf("half message at %d has message id %q, not %q", e.pos, id, e.msgID)}
	}
	if b.tx.decided(e.halfOffset) {
		return endResult{} // already committed or rolled back
	}
	if !e.commit {
		if err := b.tx.markDone(ctx, r.QueueOffset); err != nil {
			return endResult{fault: endNotRecorded, remark: "broker: record rollback: " + err.Error()}
		}
		return endResult{}
	}
	realQID, _ := message.PropertyValue(props, message.PropRealQueueID)
	qid, _ := strconv.Atoi(realQID)
	// NB: delivered as a plain message, as Java's EndTransactionProcessor
	// does: a consumer that sends it on must not make a half message of it.
	props = message.DeleteProperty(message.DeleteProperty(message.DeleteProperty(props, message.PropRealTopic),
		message.PropRealQueueID), message.PropTranMsg)
	m := &message.Message{Topic: realTopic, QueueID: int32(qid), Flag: r.Flag,
		SysFlag:       (r.SysFlag &^ (message.TxMask | message.FlagBornHostV6 | message.FlagStoreHostV6)) | message.TxCommit,
		BornTimestamp: r.BornTimestamp, BornHost: r.BornHost, StoreHost: b.storeHost,
		ReconsumeTimes: r.ReconsumeTimes, Body: r.Body, Properties: props}
	res := b.store.Put(ctx, m)
	if !res.Stored() {
		return endResult{fault: endNotStored, put: res}
	}
	if err := b.tx.markDone(ctx, r.QueueOffset); err != nil {
		b.logger.Error("broker: record commit", "half_offset", r.QueueOffset, "err", err)
	}
	return endResult{}
}
