package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/sluicemq/sluice/broker/pop"
	"github.com/sluicemq/sluice/broker/store"
	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/internal/message"
)

// arrivals wakes POP long polls when a message is stored: a channel
// closed at the next arrival, made anew only once someone waited on it.
type arrivals struct {
	waiting atomic.Bool
	mu      sync.Mutex
	ch      chan struct{} // guarded by mu
}

// next returns the channel the next arrival closes.
func (a *arrivals) next() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ch == nil {
		a.ch = make(chan struct{})
	}
	a.waiting.Store(true)
	return a.ch
}

// notify is a store listener: it must not block.
func (a *arrivals) notify(string, int32, int64, int64, []byte) {
	if !a.waiting.Load() {
		return
	}
	a.mu.Lock()
	if a.ch != nil {
		close(a.ch)
		a.ch = nil
	}
	a.waiting.Store(false)
	a.mu.Unlock()
}

// Arrival implements v5.Popper.
func (g grpcBackend) Arrival() <-chan struct{} { return g.b.popArrivals.next() }

// Pop implements v5.Popper: the queues of r.Topic on this broker from
// r.Queue on, in order, each from where the group is (its committed
// offset, else the queue's first); a message the group's tags or SQL92
// filter do not take, or that retention removed, is acked and skipped.
// An orderly group (consumeMessageOrderly) pops FIFO per message group
// (pop.Table.PopOrderly): the message group is the __SHARDINGKEY property
// v5 FIFO messages carry, and a message with none is its own group.
func (g grpcBackend) Pop(ctx context.Context, r v5.PopRequest) ([]v5.Popped, *v2.Status) {
	b := g.b
	if st := b.popOnSlave(); st != nil {
		return nil, st
	}
	cfg, ok := b.topics.Get(r.Topic)
	if !ok {
		return nil, &v2.Status{Code: v2.Code_TOPIC_NOT_FOUND, Message: fmt.Sprintf("topic %s does not exist on broker %s", r.Topic, b.cfg.BrokerName)}
	}
	if !cfg.Readable() || cfg.ReadQueueNums <= 0 {
		return nil, &v2.Status{Code: v2.Code_FORBIDDEN, Message: fmt.Sprintf("topic %s is not readable on broker %s", r.Topic, b.cfg.BrokerName)}
	}
	gc, known := b.groupCfgs.Get(r.Group)
	if known && !gc.ConsumeEnable {
		return nil, &v2.Status{Code: v2.Code_FORBIDDEN, Message: fmt.Sprintf("group %s may not consume (consumeEnable false)", r.Group)}
	}
	if r.SQL != nil && !b.cfg.Filter.PropertyEnabled {
		return nil, &v2.Status{Code: v2.Code_NOT_IMPLEMENTED, Message: fmt.Sprintf(
			"broker %s does not filter messages by SQL92: set filter.property_enabled: true in its configuration (or SLUICE_FILTER_PROPERTY_ENABLED=true)",
			b.cfg.BrokerName)}
	}
	run := &popRun{b: b, r: r, orderly: known && gc.ConsumeMessageOrderly, now: b.popNow(),
		maxAttempts: b.retryMaxTimes(r.Group) + 1}
	first := max(r.Queue, 0) % cfg.ReadQueueNums
	for i := range cfg.ReadQueueNums {
		if len(run.out) >= r.Max || ctx.Err() != nil {
			break
		}
		q := (first + i) % cfg.ReadQueueNums
		start, ok := b.offsets.Query(r.Group, r.Topic, q)
		if !ok || start < b.store.MinOffset(r.Topic, q) {
			start = b.store.MinOffset(r.Topic, q)
		}
		end := b.store.MaxOffset(r.Topic, q)
		// NB: a queue is popped again (a few times at most) when this
		// pop's own acks (skipped, dead-lettered) let a message group's
		// next offset through.
		for range 4 {
			released, st := run.queue(ctx, q, start, end)
			if st != nil {
				return run.out, st
			}
			if !released || len(run.out) >= r.Max {
				break
			}
		}
		b.commitPop(r.Group, r.Topic, q)
	}
	if len(run.out) > 0 && r.Invisible <= popWakeWithin {
		// NB: what is not acked in time is visible again then, and a
		// receive parked until then takes it (as for Change's nack).
		time.AfterFunc(r.Invisible+time.Millisecond, func() { b.popArrivals.notify("", 0, 0, 0, nil) })
	}
	return run.out, nil
}

// popRun is one Pop: its request, what it found of the group, and the
// messages taken so far.
type popRun struct {
	b           *Broker
	r           v5.PopRequest
	orderly     bool // FIFO per message group
	maxAttempts int32
	now         time.Time
	out         []v5.Popped
}

// takes reports whether the request's filters take rec.
func (p *popRun) takes(rec *message.Record) bool {
	if p.r.Tags != nil {
		tag, _ := message.PropertyValue(string(rec.Properties), message.PropTags)
		if !slices.Contains(p.r.Tags, tag) {
			return false
		}
	}
	return p.r.SQL == nil || p.r.SQL.MatchProperties(rec.Properties)
}

// queue pops queue q into p.out and reports whether an ack it made (a
// message skipped or dead-lettered) released a message group's next
// offset (FIFO).
func (p *popRun) queue(ctx context.Context, q int32, start, end int64) (released bool, st *v2.Status) {
	b, r := p.b, p.r
	ack := func(h pop.Handle) {
		if rel, err := b.pop.AckNext(r.Group, h, p.now); err == nil && rel {
			released = true
		}
	}
	var ahead map[int64]*message.Record
	var ds []pop.Delivery
	if p.orderly {
		var known int64
		from, room := b.pop.Next(r.Group, r.Topic, q, start)
		known = from
		if room {
			ahead, known = b.readAhead(ctx, r.Topic, q, from, min(end, from+popReadAhead))
		}
		ds = b.pop.PopOrderly(b.cfg.BrokerName, r.Group, r.Topic, q, start, end, r.Max-len(p.out), r.Invisible, p.now,
			func(off int64) (string, bool) {
				if off >= known {
					return "", false
				}
				rec := ahead[off]
				if rec == nil || !p.takes(rec) {
					return "", true // NB: gone or filtered out: acked below, so it holds no group back
				}
				mg, _ := message.PropertyValue(string(rec.Properties), v5.PropShardingKey)
				return mg, true
			})
	} else {
		ds = b.pop.Pop(b.cfg.BrokerName, r.Group, r.Topic, q, start, end, r.Max-len(p.out), r.Invisible, p.now)
		ahead = b.readPopped(ctx, r.Topic, q, ds)
	}
	for _, d := range ds {
		var rec message.Record
		var err error
		if a := ahead[d.Offset]; a != nil {
			rec = *a
		} else {
			rec, err = b.readAt(ctx, r.Topic, q, d.Offset)
		}
		skip := errors.Is(err, errGone)
		if err != nil && !skip {
			// NB: not taken: visible again once its invisible time is over.
			return released, &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: err.Error()}
		}
		if skip || !p.takes(&rec) {
			ack(d.Handle)
			continue
		}
		if d.Attempt > p.maxAttempts {
			// NB: delivered max attempts times and never acked: to the
			// group's dead-letter topic; left in flight (delivered again
			// later) when that fails.
			if err := b.popDeadLetter(ctx, r.Group, rec, d.Attempt-1); err != nil {
				b.logger.Warn("broker: POP dead letter failed", "group", r.Group, "topic", r.Topic, "queue", q, "offset", d.Offset, "err", err)
			} else {
				b.popCounts.add(r.Group, r.Topic, q, cDLQ, 1)
				ack(d.Handle)
			}
			continue
		}
		p.out = append(p.out, v5.Popped{Rec: rec, Attempt: d.Attempt, Handle: d.Handle.Encode()})
		b.popCounts.add(r.Group, r.Topic, q, cReceives, 1)
		if d.Attempt > 1 {
			b.popCounts.add(r.Group, r.Topic, q, cRedeliveries, 1)
		}
	}
	return released, nil
}

// popReadAhead is how many new offsets of a queue an orderly pop reads to
// learn their message groups.
const popReadAhead = 128

// readAhead reads the messages of a queue's offsets [from, to): those
// found, and known, the offset below which every offset is either found
// or gone (retention). On a read error known is from: nothing is known.
func (b *Broker) readAhead(ctx context.Context, topicName string, q int32, from, to int64) (map[int64]*message.Record, int64) {
	if to <= from {
		return nil, from
	}
	res, err := b.store.Get(ctx, store.GetRequest{Topic: topicName, QueueID: q, Offset: from, MaxMsgs: int(to - from)})
	if err != nil || res.Count == 0 {
		return nil, from
	}
	body := slices.Clone(res.Body)
	out := make(map[int64]*message.Record, res.Count)
	for len(body) > 0 {
		rec, err := message.Decode(body)
		if err != nil || rec.TotalSize <= 0 || int(rec.TotalSize) > len(body) {
			return nil, from
		}
		body = body[rec.TotalSize:]
		if rec.QueueOffset >= from && rec.QueueOffset < to {
			out[rec.QueueOffset] = &rec
		}
	}
	return out, min(res.NextOffset, to)
}

// readPopped reads the messages of ds's offsets with one store read when
// they lie close together (a pop's offsets are mostly consecutive), else
// none: a message read one at a time (readAt) was 19% of the broker's
// CPU in a SimpleConsumer's receive + ack run. An offset it does not
// return is read alone.
func (b *Broker) readPopped(ctx context.Context, topicName string, q int32, ds []pop.Delivery) map[int64]*message.Record {
	if len(ds) < 2 {
		return nil
	}
	lo, hi := ds[0].Offset, ds[0].Offset
	for _, d := range ds[1:] {
		lo, hi = min(lo, d.Offset), max(hi, d.Offset)
	}
	// NB: at most a few messages not popped are read along.
	if hi-lo >= int64(2*len(ds)+8) {
		return nil
	}
	ahead, _ := b.readAhead(ctx, topicName, q, lo, hi+1)
	return ahead
}

// popNow is the POP clock (Options.PopClock, default time.Now).
func (b *Broker) popNow() time.Time {
	if b.opts.PopClock != nil {
		return b.opts.PopClock()
	}
	return time.Now()
}

// popDeadLetter stores rec in group's dead-letter topic (%DLQ%group), as
// a 4.x send-back past the group's retry count does, and waits for it.
func (b *Broker) popDeadLetter(ctx context.Context, group string, rec message.Record, reconsumed int32) error {
	m := rec.Message()
	m.ReconsumeTimes, m.StoreHost = reconsumed, b.storeHost
	if props, err := message.SetProperty(m.Properties, message.PropRetryTopic, m.Topic); err == nil {
		m.Properties = props
	}
	if _, err := b.deadLetter(&m, group, reconsumed, nil, true); err != nil {
		return err
	}
	done := make(chan store.PutResult, 1)
	b.store.Submit([]store.PutRequest{{Msg: &m, Done: store.AnswerFunc(func(res store.PutResult) { done <- res })}})
	select {
	case res := <-done:
		if !res.Stored() {
			return fmt.Errorf("%s: %s", res.Status, res.Remark)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errGone is a queue offset whose message retention removed.
var errGone = errors.New("broker: message no longer stored")

// readAt reads the message at a queue offset.
func (b *Broker) readAt(ctx context.Context, topicName string, q int32, off int64) (message.Record, error) {
	res, err := b.store.Get(ctx, store.GetRequest{Topic: topicName, QueueID: q, Offset: off, MaxMsgs: 1})
	if err != nil {
		return message.Record{}, err
	}
	if len(res.Body) == 0 {
		return message.Record{}, errGone
	}
	rec, err := message.Decode(res.Body)
	if err != nil {
		return message.Record{}, err
	}
	if rec.QueueOffset != off {
		return message.Record{}, errGone
	}
	rec.Body = append([]byte(nil), rec.Body...)
	rec.Properties = append([]byte(nil), rec.Properties...)
	return rec, nil
}

// commitPop commits the group's lowest offset not acked, so that
// consumerProgress shows it and a restart resumes there.
func (b *Broker) commitPop(group, topicName string, q int32) {
	if off, ok := b.pop.Committed(group, topicName, q); ok {
		b.offsets.Commit(group, topicName, q, off)
	}
}

// handleFor decodes a v5 receipt handle of topic.
func (b *Broker) handleFor(topicName, s string) (pop.Handle, *v2.Status) {
	h, err := pop.DecodeHandle(s)
	if err == nil && (h.Topic != topicName || h.Broker != b.cfg.BrokerName) {
		err = fmt.Errorf("%w: it names topic %s on broker %s", pop.ErrInvalidHandle, h.Topic, h.Broker)
	}
	if err != nil {
		return h, &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: err.Error()}
	}
	return h, nil
}

// popOnSlave refuses a POP call on a slave: its POP state is its
// master's, applied from the log (popjournal.go), never changed by a
// client of its own; and on a broker that has not read the records of
// its log yet (popInit).
func (b *Broker) popOnSlave() *v2.Status {
	if !b.popReady.Load() {
		return &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: fmt.Sprintf(
			"broker %s is still reading its POP state from its log (the dispatcher indexes it after a restart): try again", b.cfg.BrokerName)}
	}
	if !b.isSlave() {
		return nil
	}
	return &v2.Status{Code: v2.Code_FORBIDDEN, Message: fmt.Sprintf(
		"broker %s is a slave, not its group's master now: receive and acknowledge at the master", b.cfg.BrokerName)}
}

// Ack implements v5.Popper: OK once the ack's state record is as durable
// as a send would be (popjournal.go), so that a slave taking over never
// delivers the message again; a record not durable so is answered as
// such a send (the ack holds on this broker all the same).
func (g grpcBackend) Ack(group, topicName, handle string) *v2.Status {
	if st := g.b.popOnSlave(); st != nil {
		return st
	}
	h, st := g.b.handleFor(topicName, handle)
	if st != nil {
		g.b.popCounts.add(group, topicName, -1, cInvalid, 1)
		return st
	}
	released, wait, err := g.b.pop.AckDurable(group, h, g.b.popNow())
	if err != nil {
		g.b.popCounts.add(group, topicName, h.Queue, cInvalid, 1)
		return &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: err.Error()}
	}
	g.b.popCounts.add(group, topicName, h.Queue, cAcks, 1)
	if released {
		g.b.popArrivals.notify("", 0, 0, 0, nil) // NB: a receive waiting may take the group's next now
	}
	g.b.commitPop(group, topicName, h.Queue)
	if wait != nil {
		if err := wait(); err != nil {
			if pe, ok := err.(*putError); ok {
				return v5PutStatus(pe.res)
			}
			return &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: err.Error()}
		}
	}
	return nil
}

// Change implements v5.Popper.
func (g grpcBackend) Change(group, topicName, handle string, d time.Duration) (string, *v2.Status) {
	if st := g.b.popOnSlave(); st != nil {
		return handle, st
	}
	h, st := g.b.handleFor(topicName, handle)
	if st != nil {
		g.b.popCounts.add(group, topicName, -1, cInvalid, 1)
		return handle, st
	}
	nh, err := g.b.pop.Change(group, h, d, g.b.popNow())
	if err != nil {
		g.b.popCounts.add(group, topicName, h.Queue, cInvalid, 1)
		return handle, &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: err.Error()}
	}
	g.b.popCounts.add(group, topicName, h.Queue, cNacks, 1)
	if d <= popWakeWithin {
		// NB: a nack: the message is visible again in d, and a receive
		// parked until then takes it (RocketMQ's revive appends it to the
		// retry topic, which wakes the polls); else it waits out its poll.
		time.AfterFunc(d+time.Millisecond, func() { g.b.popArrivals.notify("", 0, 0, 0, nil) })
	}
	return nh.Encode(), nil
}

// popWakeWithin bounds the invisible times after which Pop and Change
// wake the parked receives: a longer one outlasts every long poll (20 s at
// most).
const popWakeWithin = 30 * time.Second

// Extend implements v5.Renewer: the handle's message stays invisible for
// d from now and the handle stays valid (auto_renew; pop.Table.Extend).
func (g grpcBackend) Extend(group, topicName, handle string, d time.Duration) *v2.Status {
	if st := g.b.popOnSlave(); st != nil {
		return st
	}
	h, st := g.b.handleFor(topicName, handle)
	if st != nil {
		g.b.popCounts.add(group, topicName, -1, cInvalid, 1)
		return st
	}
	if err := g.b.pop.Extend(group, h, d, g.b.popNow()); err != nil {
		g.b.popCounts.add(group, topicName, h.Queue, cInvalid, 1)
		return &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: err.Error()}
	}
	return nil
}

// PopNow implements v5.Renewer.
func (g grpcBackend) PopNow() time.Time { return g.b.popNow() }

// DeadLetter implements v5.DeadLetterer: the handle's message goes to the
// group's dead-letter topic (%DLQ%group) and is acked. Its reconsume
// times are the broker's deliveries of it less one: what the client
// counts (a FIFO PushConsumer's local retries) is not added.
func (g grpcBackend) DeadLetter(ctx context.Context, group, topicName, handle string) *v2.Status {
	b := g.b
	if st := b.popOnSlave(); st != nil {
		return st
	}
	h, st := b.handleFor(topicName, handle)
	if st != nil {
		return st
	}
	attempt, err := b.pop.Attempt(group, h, b.popNow())
	if err != nil {
		return &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: err.Error()}
	}
	rec, err := b.readAt(ctx, topicName, h.Queue, h.Offset)
	switch {
	case errors.Is(err, errGone): // NB: retention removed it: nothing to keep, acked below
	case err != nil:
		return &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: err.Error()}
	default:
		if err := b.popDeadLetter(ctx, group, rec, max(attempt-1, 0)); err != nil {
			return &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: "dead letter of group " + group + ": " + err.Error()}
		}
		b.popCounts.add(group, topicName, h.Queue, cDLQ, 1)
	}
	return g.Ack(group, topicName, handle)
}
