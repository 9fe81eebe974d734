package broker

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/broker/group"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Queue locks for orderly consumers (spec 3.10).

// handleLock and handleUnlock serve LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ
// (42) for orderly consumers (spec 3.10).
func (b *Broker) handleLock(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var body protocol.LockBatchRequest
	if err := decodeBody(req, &body); err != nil {
		reply(w, req, protocol.SystemError, "bad lock body: "+err.Error())
		return
	}
	held := b.groups.Lock(body.ConsumerGroup, body.ClientID, toQueues(body.MQSet), time.Now())
	out := make([]protocol.MessageQueue, len(held))
	for i, q := range held {
		out[i] = protocol.MessageQueue(q)
	}
	b.replyBody(w, req, protocol.LockBatchResponse{LockOKMQSet: out})
}

func (b *Broker) handleUnlock(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var body protocol.LockBatchRequest
	if err := decodeBody(req, &body); err != nil {
		reply(w, req, protocol.SystemError, "bad unlock body: "+err.Error())
		return
	}
	b.groups.Unlock(body.ConsumerGroup, body.ClientID, toQueues(body.MQSet))
	reply(w, req, protocol.Success, "")
}

func toQueues(mqs []protocol.MessageQueue) []group.Queue {
	out := make([]group.Queue, len(mqs))
	for i, q := range mqs {
		out[i] = group.Queue(q)
	}
	return out
}
