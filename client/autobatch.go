package client

import (
	"context"
	"strings"
	"sync"
	"time"

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
	inflight int // batches taken and not yet answered
	waiting  []batchMember
	bytes    int             // encoded size of waiting
	ready    [][]batchMember // taken, to be written in this order
	writing  bool            // a goroutine is writing ready (see drain)
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
	return !o.batch && !o.reply && o.sysFlag == 0 && o.m.DelayLevel == 0 && o.m.DeliverAt.IsZero() && o.reconsum == 0 &&
		!strings.HasPrefix(o.topic, retryPrefix) && batchItemSize(o) <= b.maxBytes/2
}

func batchItemSize(o *outgoing) int { return message.BatchItemSize(o.batchItem()) }

// add queues mem for q. It reports whether the caller must write q's
// ready batches (drain).
func (b *batcher) add(q MessageQueue, mem batchMember) bool {
	size := batchItemSize(mem.o)
	b.mu.Lock()
	defer b.mu.Unlock()
	qb := b.queues[q]
	if qb == nil {
		qb = &queueBatch{}
		b.queues[q] = qb
	}
	if qb.bytes+size > b.maxBytes && len(qb.waiting) > 0 {
		// NB: mem would overflow the waiting batch: that one leaves now,
		// mem starts the next.
		qb.take()
	}
	qb.waiting = append(qb.waiting, mem)
	qb.bytes += size
	if qb.inflight == 0 || len(qb.waiting) >= b.maxMessages {
		qb.take()
	}
	return qb.claim()
}

// take moves the waiting batch to ready, counted as in flight.
func (qb *queueBatch) take() {
	qb.ready = append(qb.ready, qb.waiting)
	qb.waiting, qb.bytes = nil, 0
	qb.inflight++
}

// claim makes the caller q's writer when a batch is ready and none writes.
// NB: one writer at a time writes a queue's batches in the order they were
// taken, so they reach the broker in send order.
func (qb *queueBatch) claim() bool {
	if len(qb.ready) == 0 || qb.writing {
		return false
	}
	qb.writing = true
	return true
}

// next gives q's writer its next batch, or nil, ending its turn.
func (b *batcher) next(q MessageQueue) []batchMember {
	b.mu.Lock()
	defer b.mu.Unlock()
	qb := b.queues[q]
	if len(qb.ready) == 0 {
		qb.writing = false
		b.forgetIdle(q, qb)
		return nil
	}
	out := qb.ready[0]
	qb.ready[0] = nil
	qb.ready = qb.ready[1:]
	return out
}

// answered records that a batch of q was answered; the batch that waited
// for it becomes ready. It reports whether the caller must drain q.
func (b *batcher) answered(q MessageQueue) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	qb := b.queues[q]
	qb.inflight--
	if len(qb.waiting) > 0 && qb.inflight == 0 {
		qb.take()
	}
	b.forgetIdle(q, qb)
	return qb.claim()
}

// forgetIdle drops q's entry when it holds nothing. REQUIRES: b.mu held.
func (b *batcher) forgetIdle(q MessageQueue, qb *queueBatch) {
	if qb.inflight == 0 && len(qb.waiting) == 0 && len(qb.ready) == 0 && !qb.writing {
		delete(b.queues, q)
	}
}

// sendAutoBatched sends o through the batcher when the route of its topic
// is known; it returns false when it did not (o then takes the plain
// path). done has the contract of sendAsync's.
func (p *Producer) sendAutoBatched(ctx context.Context, o *outgoing, done func(SendResult, error)) bool {
	q, _, ok := p.pickCached(o)
	if !ok {
		return false
	}
	if p.batcher.add(q, batchMember{ctx: ctx, o: o, done: done}) {
		p.drain(q)
	}
	return true
}

// drain writes q's ready batches in order until none is left.
func (p *Producer) drain(q MessageQueue) {
	for out := p.batcher.next(q); out != nil; out = p.batcher.next(q) {
		p.sendMembers(q, out)
	}
}

// sendMembers sends members (counted in flight on q) as one request: a
// lone member as itself, more as a batch, first to q.
func (p *Producer) sendMembers(q MessageQueue, members []batchMember) {
	// NB: a member whose context ended while it waited leaves now, with
	// its context's error, on the completions goroutine (never on another
	// caller's SendAsync).
	live := members[:0]
	for _, m := range members {
		if err := m.ctx.Err(); err != nil {
			p.completions.add(m.done, SendResult{}, err)
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
		m.o.first = &q // NB: the member's own outgoing, sent once
		p.launch(m.ctx, m.o, func(res SendResult, err error) {
			p.batchAnswered(q)
			m.done(res, err)
		})
		return
	}
	o := p.joinBatch(q, live)
	p.autoBatches.Add(1)
	ctx, cancel := batchContext(live)
	p.launch(ctx, o, func(res SendResult, err error) {
		cancel()
		o.recycle()
		p.batchAnswered(q)
		splitBatchResult(live, res, err)
	})
}

// batchContext bounds a batch by the latest deadline of its members, when
// each has one: no member waits past its own deadline for more than the
// others' sake, and none is cut short by another's. Cancellation of one
// member does not stop the others' send.
func batchContext(members []batchMember) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, m := range members {
		d, ok := m.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// batchAnswered makes what waited for q's batch in flight ready, and
// writes it.
func (p *Producer) batchAnswered(q MessageQueue) {
	if p.batcher.answered(q) {
		p.drain(q)
	}
}

// joinBatch encodes members (all of q's topic) as one batch outgoing.
func (p *Producer) joinBatch(q MessageQueue, members []batchMember) *outgoing {
	items := make([]message.BatchItem, len(members))
	ids := make([]string, len(members))
	for i, m := range members {
		items[i] = m.o.batchItem()
		ids[i] = m.o.ids[0]
	}
	// NB: every member passed prepare and the batcher's size bound, so the
	// batch encodes.
	body, _ := batchBody(items)
	o := &outgoing{m: members[0].o.m, topic: q.Topic, ids: ids, batch: true, group: members[0].o.group, first: &q}
	o.pooledBody(body)
	return o
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
