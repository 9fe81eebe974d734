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
// offset, else the queue's first); a message the group's tags do not take,
// or that retention removed, is acked and skipped.
func (g grpcBackend) Pop(ctx context.Context, r v5.PopRequest) ([]v5.Popped, *v2.Status) {
	b := g.b
	cfg, ok := b.topics.Get(r.Topic)
	if !ok {
		return nil, &v2.Status{Code: v2.Code_TOPIC_NOT_FOUND, Message: fmt.Sprintf("topic %s does not exist on broker %s", r.Topic, b.cfg.BrokerName)}
	}
	if !cfg.Readable() || cfg.ReadQueueNums <= 0 {
		return nil, &v2.Status{Code: v2.Code_FORBIDDEN, Message: fmt.Sprintf("topic %s is not readable on broker %s", r.Topic, b.cfg.BrokerName)}
	}
	if gc, ok := b.groupCfgs.Get(r.Group); ok && !gc.ConsumeEnable {
		return nil, &v2.Status{Code: v2.Code_FORBIDDEN, Message: fmt.Sprintf("group %s may not consume (consumeEnable false)", r.Group)}
	}
	first := max(r.Queue, 0) % cfg.ReadQueueNums
	now := b.popNow()
	maxAttempts := b.retryMaxTimes(r.Group) + 1
	var out []v5.Popped
	for i := range cfg.ReadQueueNums {
		if len(out) >= r.Max || ctx.Err() != nil {
			break
		}
		q := (first + i) % cfg.ReadQueueNums
		start, ok := b.offsets.Query(r.Group, r.Topic, q)
		if !ok || start < b.store.MinOffset(r.Topic, q) {
			start = b.store.MinOffset(r.Topic, q)
		}
		end := b.store.MaxOffset(r.Topic, q)
		for _, d := range b.pop.Pop(b.cfg.BrokerName, r.Group, r.Topic, q, start, end, r.Max-len(out), r.Invisible, now) {
			rec, err := b.readAt(ctx, r.Topic, q, d.Offset)
			skip := errors.Is(err, errGone)
			if err != nil && !skip {
				// NB: not taken: visible again once its invisible time is over.
				return out, &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: err.Error()}
			}
			if !skip && r.Tags != nil {
				tag, _ := message.PropertyValue(string(rec.Properties), message.PropTags)
				skip = !slices.Contains(r.Tags, tag)
			}
			if skip {
				_ = b.pop.Ack(r.Group, d.Handle, now)
				continue
			}
			if d.Attempt > maxAttempts {
				// NB: delivered max attempts times and never acked: to the
				// group's dead-letter topic; left in flight (delivered
				// again later) when that fails.
				if err := b.popDeadLetter(ctx, r.Group, rec, d.Attempt-1); err != nil {
					b.logger.Warn("broker: POP dead letter failed", "group", r.Group, "topic", r.Topic, "queue", q, "offset", d.Offset, "err", err)
				} else {
					_ = b.pop.Ack(r.Group, d.Handle, now)
				}
				continue
			}
			out = append(out, v5.Popped{Rec: rec, Attempt: d.Attempt, Handle: d.Handle.Encode()})
		}
		b.commitPop(r.Group, r.Topic, q)
	}
	return out, nil
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

// Ack implements v5.Popper.
func (g grpcBackend) Ack(group, topicName, handle string) *v2.Status {
	h, st := g.b.handleFor(topicName, handle)
	if st != nil {
		return st
	}
	if err := g.b.pop.Ack(group, h, g.b.popNow()); err != nil {
		return &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: err.Error()}
	}
	g.b.commitPop(group, topicName, h.Queue)
	return nil
}

// Change implements v5.Popper.
func (g grpcBackend) Change(group, topicName, handle string, d time.Duration) (string, *v2.Status) {
	h, st := g.b.handleFor(topicName, handle)
	if st != nil {
		return handle, st
	}
	nh, err := g.b.pop.Change(group, h, d, g.b.popNow())
	if err != nil {
		return handle, &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: err.Error()}
	}
	return nh.Encode(), nil
}
