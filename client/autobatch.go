package client

import (
	"context"
	"strings"
	"sync"

	"github.com/sluicemq/sluice/internal/message"
)

// batcher combines SendAsync messages bound for the same queue into
// SEND_BATCH_MESSAGE requests (WithAutoBatch), as a Kafka producer does,
// but with no linger: a queue's message goes out at once when the queue
// has no batch in flight; the messages that arrive meanwhile wait for that
// answer and then go together, or go as soon as they fill a batch. Under
// light load every message is sent alone, with no delay; under heavy load
// batches grow with the load, and the per-request costs (header, syscall,
// store call, answer) are paid once a batch.
//
// The queue is chosen per message, by the producer's selector, before the
// message joins a batch, so a selector's placement (per-key order with
// HashSelector) is kept.
type batcher struct {
	maxMessages int
	maxBytes    int

	mu     sync.Mutex
	queues map[MessageQueue]*queueBatch // guarded by mu
}

// queueBatch is one queue's messages waiting to be sent.
type queueBatch struct {
	inflight int // batches of this queue sent and not yet answered
	waiting  []batchMember
	bytes    int // encoded size of waiting
}

// batchMember is a message waiting in a batch.
type batchMember struct {
	ctx  context.Context
	o    *outgoing
	done func(SendResult, error)
}

func newBatcher(maxMessages, maxBytes int) *batcher {
	return &batcher{maxMessages: maxMessages, maxBytes: maxBytes, queues: make(map[MessageQueue]*queueBatch)}
}

// batchable reports whether o may travel in a batch: batches carry no
// delay or delivery time, no compressed body and nothing for a retry topic (the broker
// refuses those), and a member must leave room for others.
func (b *batcher) batchable(o *outgoing) bool {
	return !o.batch && o.sysFlag == 0 && o.m.DelayLevel == 0 && o.m.DeliverAt.IsZero() && o.reconsum == 0 &&
		!strings.HasPrefix(o.topic, retryPrefix) && batchItemSize(o) <= b.maxBytes/2
}

func batchItemSize(o *outgoing) int {
	return message.BatchItemSize(message.BatchItem{Flag: o.flag, Body: o.body, Properties: o.props})
}

// add queues o for q. It returns the members to send now, or nil.
func (b *batcher) add(q MessageQueue, mem batchMember) []batchMember {
	size := batchItemSize(mem.o)
	b.mu.Lock()
	defer b.mu.Unlock()
	qb := b.queues[q]
	if qb == nil {
		qb = &queueBatch{}
		b.queues[q] = qb
	}
	if qb.bytes+size > b.maxBytes && len(qb.waiting) > 0 {
		// NB: o would overflow the waiting batch: that one leaves now, o
		// starts the next.
		out := qb.take()
		qb.waiting, qb.bytes = append(qb.waiting, mem), size
		return out
	}
	qb.waiting = append(qb.waiting, mem)
	qb.bytes += size
	if qb.inflight == 0 || len(qb.waiting) >= b.maxMessages {
		return qb.take()
	}
	return nil
}

// take empties the waiting batch, counted as in flight.
func (qb *queueBatch) take() []batchMember {
	out := qb.waiting
	qb.waiting, qb.bytes = nil, 0
	qb.inflight++
	return out
}

// answered records that a batch of q was answered. It returns the members
// that waited for it, to send now, or nil.
func (b *batcher) answered(q MessageQueue) []batchMember {
	b.mu.Lock()
	defer b.mu.Unlock()
	qb := b.queues[q]
	qb.inflight--
	if len(qb.waiting) > 0 && qb.inflight == 0 {
		return qb.take()
	}
	if qb.inflight == 0 {
		delete(b.queues, q)
	}
	return nil
}

// sendAutoBatched sends o through the batcher when the route of its topic
// is known; it returns false when it did not (o then takes the plain
// path). done has the contract of sendAsync's.
func (p *Producer) sendAutoBatched(ctx context.Context, o *outgoing, done func(SendResult, error)) bool {
	q, _, ok := p.pickCached(o)
	if !ok {
		return false
	}
	if out := p.batcher.add(q, batchMember{ctx: ctx, o: o, done: done}); out != nil {
		p.sendMembers(q, out)
	}
	return true
}

// sendMembers sends members (counted in flight on q) as one request: a
// lone member as itself, more as a batch, first to q.
func (p *Producer) sendMembers(q MessageQueue, members []batchMember) {
	// NB: a member whose context ended while it waited leaves now, with
	// its context's error; once sent, a batch is bounded by the producer's
	// send timeout and retries, not by any one member's context.
	live := members[:0]
	for _, m := range members {
		if err := m.ctx.Err(); err != nil {
			m.done(SendResult{}, err)
			continue
		}
		live = append(live, m)
	}
	if len(live) == 0 {
		p.batchAnswered(q)
		return
	}
	if len(live) == 1 {
		m := live[0]
		o := *m.o
		o.first = &q
		p.launch(m.ctx, &o, func(res SendResult, err error) {
			p.batchAnswered(q)
			m.done(res, err)
		})
		return
	}
	o := p.joinBatch(q, live)
	p.autoBatches.Add(1)
	p.launch(context.Background(), o, func(res SendResult, err error) {
		p.batchAnswered(q)
		splitBatchResult(live, res, err)
	})
}

// batchAnswered sends what waited for q's batch in flight.
func (p *Producer) batchAnswered(q MessageQueue) {
	if out := p.batcher.answered(q); out != nil {
		p.sendMembers(q, out)
	}
}

// joinBatch encodes members (all of q's topic) as one batch outgoing.
func (p *Producer) joinBatch(q MessageQueue, members []batchMember) *outgoing {
	size := 0
	for _, m := range members {
		size += batchItemSize(m.o)
	}
	body := make([]byte, 0, size)
	ids := make([]string, len(members))
	for i, m := range members {
		// NB: every member passed prepare, so its item encodes.
		body, _ = message.AppendBatch(body, []message.BatchItem{{Flag: m.o.flag, Body: m.o.body, Properties: m.o.props}})
		ids[i] = m.o.ids[0]
	}
	return &outgoing{m: members[0].o.m, topic: q.Topic, body: body, ids: ids, batch: true, group: members[0].o.group, first: &q}
}

// splitBatchResult answers each member of a batch with its own result:
// its id, its offset id and its queue offset.
func splitBatchResult(members []batchMember, res SendResult, err error) {
	if err != nil {
		for _, m := range members {
			m.done(SendResult{}, err)
		}
		return
	}
	offIDs := strings.Split(res.OffsetMsgID, ",")
	for i, m := range members {
		r := res
		r.MsgID = m.o.ids[0]
		r.QueueOffset = res.QueueOffset + int64(i)
		if len(offIDs) == len(members) {
			r.OffsetMsgID = offIDs[i]
		}
		m.done(r, nil)
	}
}
