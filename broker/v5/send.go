package v5

import (
	"context"
	"hash/fnv"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/sluicemq/sluice/internal/acl"
)

// maxSendMessages bounds the messages of one SendMessage.
const maxSendMessages = 1024

// QueueFor is the queue a FIFO message group goes to among n write
// queues: a hash of the group, so one group stays on one queue while the
// count does not change.
func QueueFor(group string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(group))
	return int32(h.Sum32() % uint32(n))
}

// SendMessage stores messages through the broker's send path; each gets
// its own status (the response's is theirs when they agree, else
// MULTIPLE_RESULTS).
func (s *Server) SendMessage(ctx context.Context, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
	msgs := req.GetMessages()
	if len(msgs) == 0 {
		return &v2.SendMessageResponse{Status: status(v2.Code_BAD_REQUEST, "SendMessage carries no message")}, nil
	}
	if len(msgs) > maxSendMessages {
		return &v2.SendMessageResponse{Status: status(v2.Code_BAD_REQUEST, "SendMessage carries more than 1024 messages")}, nil
	}
	var res []acl.Resource
	seen := map[string]bool{}
	for _, m := range msgs {
		if t := m.GetTopic().GetName(); !seen[t] {
			seen[t] = true
			res = append(res, acl.Resource{Name: t, Need: acl.Pub})
		}
	}
	c, st := s.check(ctx, "SendMessage", res...)
	if st != nil {
		return &v2.SendMessageResponse{Status: st}, nil
	}
	entries := make([]*v2.SendResultEntry, len(msgs))
	var reqs []SendRequest
	var at []int // the entry of each request
	now := s.opts.Now()
	for i, pm := range msgs {
		cv, b := toMessage(pm, c.remote, s.backend.MaxBodySize(), now)
		entries[i] = &v2.SendResultEntry{MessageId: pm.GetSystemProperties().GetMessageId()}
		if b != nil {
			entries[i].Status = status(b.code, b.msg)
			continue
		}
		if st := s.refuseType(pm); st != nil {
			entries[i].Status = st
			continue
		}
		if cv.tx {
			s.clients.producesFor(c.clientID, cv.msg.Topic)
		}
		reqs = append(reqs, SendRequest{Msg: cv.msg, ShardingKey: cv.group})
		at = append(at, i)
	}
	if len(reqs) > 0 {
		results := s.backend.Send(ctx, reqs)
		for j, r := range results {
			e := entries[at[j]]
			e.Status, e.Offset, e.TransactionId = r.Status, r.QueueOffset, r.TransactionID
		}
	}
	top := entries[0].Status
	for _, e := range entries[1:] {
		if e.Status.GetCode() != top.GetCode() {
			top = status(v2.Code_MULTIPLE_RESULTS, "the messages had different results: see each entry")
			break
		}
	}
	return &v2.SendMessageResponse{Status: top, Entries: entries}, nil
}
