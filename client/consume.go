package client

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
)

// consumeTask is a batch of one queue's messages for a handler.
type consumeTask struct {
	pq   *processQueue
	msgs []*Message
}

// submit splits pulled messages into batches for the consume goroutines.
// It blocks while they are all busy (flow control), until the queue drops.
func (c *PushConsumer) submit(pq *processQueue, msgs []*Message) {
	for len(msgs) > 0 {
		n := min(len(msgs), c.cfg.consumeBatch)
		select {
		case c.tasks <- consumeTask{pq: pq, msgs: msgs[:n]}:
		case <-pq.ctx.Done():
			return
		}
		msgs = msgs[n:]
	}
}

// consumeLoop is one consume goroutine of a concurrent consumer.
func (c *PushConsumer) consumeLoop() {
	for {
		select {
		case <-c.quit:
			return
		case t := <-c.tasks:
			c.consumeConcurrently(t)
		}
	}
}

// handleQueue handles a batch of pq and counts it in the consumer's stats.
func (c *PushConsumer) handleQueue(pq *processQueue, msgs []*Message) ConsumeResult {
	began := time.Now()
	res, _ := c.handle(msgs)
	end := time.Now()
	pq.lastConsume.Store(end.UnixMilli())
	c.stats.consumed(pq.mq.Topic, len(msgs), res == ConsumeSuccess, end.Sub(began), end)
	return res
}

// handle runs the handler of msgs' topic, turning a panic into
// ConsumeRetryLater (and returning what it panicked with). Messages of a
// topic without a handler are dropped (ConsumeSuccess).
func (c *PushConsumer) handle(msgs []*Message) (res ConsumeResult, panicked any) {
	sub, ok := c.subscription(msgs[0].Topic)
	if !ok || sub.handler == nil {
		c.core.log.Warn("client: no handler for topic, message dropped", "group", c.group, "topic", msgs[0].Topic)
		return ConsumeSuccess, nil
	}
	defer func() {
		if r := recover(); r != nil {
			c.core.log.Error("client: handler panicked", "group", c.group, "topic", msgs[0].Topic, "panic", r)
			res, panicked = ConsumeRetryLater, r
		}
	}()
	return sub.handler(c.handlerCtx, msgs), nil
}

// keepsProgress reports whether a batch of pq whose handler just finished
// may still be acknowledged: pq was not dropped, or it was dropped by Close
// while still owned. Close waits for the consume goroutines before it
// commits, so such a batch's acknowledgement is in the offsets it commits.
// A queue a rebalance dropped is no longer ours: its new owner delivers the
// batch again, and acknowledging it here would commit an offset over the
// new owner's.
func (c *PushConsumer) keepsProgress(pq *processQueue) bool {
	if !pq.dropped() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// NB: a rebalance removes a queue from c.queues when it drops it; Close
	// drops the queues it leaves in c.queues after it set stateClosed.
	return c.state == stateClosed && c.queues[pq.mq] == pq
}

// consumeConcurrently handles one batch and acknowledges it: at once on
// success, after sending the messages back on ConsumeRetryLater. A batch
// whose handler was running when Close began and then succeeds is
// acknowledged too, before Close commits.
func (c *PushConsumer) consumeConcurrently(t consumeTask) {
	if t.pq.dropped() {
		return // NB: not acknowledged; the queue's new owner delivers it
	}
	res := c.handleQueue(t.pq, t.msgs)
	if !c.keepsProgress(t.pq) {
		return
	}
	if res == ConsumeRetryLater {
		if c.cfg.model == Broadcasting {
			c.core.log.Warn("client: broadcasting consumer dropped failed messages", "group", c.group, "count", len(t.msgs))
		} else {
			for _, m := range t.msgs {
				if !c.sendBackUntilDone(t.pq, m, 0) {
					return // closing: left unacknowledged, delivered again later
				}
			}
		}
	}
	t.pq.ack(t.msgs)
}

// sendBackUntilDone sends m back, retrying with backoff until it works or
// the queue is dropped (then it returns false).
func (c *PushConsumer) sendBackUntilDone(pq *processQueue, m *Message, delayLevel int) bool {
	for {
		err := c.sendBack(pq.ctx, m, delayLevel)
		if err == nil {
			return true
		}
		if pq.dropped() {
			return false
		}
		c.core.log.Warn("client: send back failed, retrying", "group", c.group, "msg_id", m.MsgID, "err", err)
		if sleepCtx(pq.ctx, c.cfg.pullBackoff) != nil {
			return false
		}
	}
}

// sendBack returns m to the broker for redelivery through the retry topic
// (CONSUMER_SEND_MSG_BACK, spec §3.8); delayLevel 0 lets the broker pick
// 3 + reconsume times, -1 sends it to the DLQ. If the broker refuses, the
// message is re-sent to %RETRY%<group> as a new message.
func (c *PushConsumer) sendBack(ctx context.Context, m *Message, delayLevel int) error {
	maxRe := int32(c.cfg.maxReconsume)
	h := &protocol.ConsumerSendMsgBackRequestHeader{Offset: m.CommitLogOffset, Group: c.group, DelayLevel: int32(delayLevel),
		OriginMsgID: m.MsgID, OriginTopic: m.Topic, MaxReconsumeTimes: &maxRe, BrokerName: m.Queue.BrokerName}
	addr, ok := c.core.routes.brokerAddr(m.Queue.BrokerName)
	if !ok {
		addr = m.StoreHost
	}
	cctx, cancel := c.core.callCtx(ctx)
	_, err := c.core.tr.call(cctx, addr, request{code: protocol.ConsumerSendMsgBack, ext: protocol.Ext(h)})
	cancel()
	if err == nil {
		return nil
	}
	c.core.connFailed(addr, err)
	if ferr := c.resendToRetry(ctx, m, delayLevel); ferr != nil {
		return fmt.Errorf("client: send back %s: %w; resend to %s: %w", m.MsgID, err, RetryTopic(c.group), ferr)
	}
	return nil
}

// resendToRetry is sendBack's fallback: a SEND_MESSAGE of m to
// %RETRY%<group> carrying its retry properties; the broker's send path
// moves it to the DLQ past the maximum.
func (c *PushConsumer) resendToRetry(ctx context.Context, m *Message, delayLevel int) error {
	props := maps.Clone(m.Properties)
	if props == nil {
		props = map[string]string{}
	}
	if props[message.PropRetryTopic] == "" {
		props[message.PropRetryTopic] = m.Topic
	}
	if props[message.PropOriginMessageID] == "" {
		props[message.PropOriginMessageID] = m.MsgID
	}
	delete(props, message.PropTranMsg)
	level := 3 + m.ReconsumeTimes
	if delayLevel != 0 {
		level = delayLevel
	}
	reconsume := int32(m.ReconsumeTimes + 1)
	maxRe := int32(c.cfg.maxReconsume)
	if delayLevel < 0 {
		reconsume = max(reconsume, maxRe) // NB: at or past the maximum the broker routes it to the DLQ
	}
	retry := m.clone()
	retry.Topic, retry.Properties, retry.DelayLevel = RetryTopic(c.group), props, 0
	if level > 0 {
		retry.DelayLevel = level
	}
	o, err := c.inner.prepare(retry)
	if err != nil {
		return err
	}
	o.group, o.reconsum, o.maxRecon = "CLIENT_INNER_PRODUCER", reconsume, &maxRe
	_, err = c.inner.send(ctx, o, false)
	return err
}

// orderlyLoop consumes one queue of an orderly consumer: one batch at a
// time, in queue order, only while the queue's lock is valid. A failed
// batch is retried in place after a pause; messages past the maximum
// reconsume count go to the DLQ.
func (c *PushConsumer) orderlyLoop(pq *processQueue) {
	orderlyLocks := c.cfg.model == Clustering
	for {
		select {
		case <-pq.ctx.Done():
			return
		case <-pq.ready:
		}
		for !pq.dropped() {
			if orderlyLocks && !pq.lockValid(c.cfg.lockExpiry) {
				break // the pull loop takes the lock back and kicks ready
			}
			msgs := pq.peek(c.cfg.consumeBatch)
			if len(msgs) == 0 {
				break
			}
			pq.consumeMu.Lock()
			if pq.dropped() {
				pq.consumeMu.Unlock()
				return
			}
			res := c.handleQueue(pq, msgs)
			pq.consumeMu.Unlock()
			if res == ConsumeSuccess || pq.dropped() {
				if res == ConsumeSuccess && c.keepsProgress(pq) {
					pq.ack(msgs)
				}
				continue
			}
			if !c.orderlyFailed(pq, msgs) {
				return
			}
		}
		if orderlyLocks && !pq.dropped() && !pq.lockValid(c.cfg.lockExpiry) && pq.inFlight() > 0 {
			_ = sleepCtx(pq.ctx, 100*time.Millisecond)
			kick(pq.ready)
		}
	}
}

// orderlyFailed handles a failed orderly batch: messages past the maximum
// go to the DLQ and are acknowledged, the rest wait for the retry delay.
// It returns false when the queue was dropped meanwhile.
func (c *PushConsumer) orderlyFailed(pq *processQueue, msgs []*Message) bool {
	counts := pq.failed(msgs)
	var dead []*Message
	for i, m := range msgs {
		if c.cfg.maxReconsume >= 0 && counts[i] > c.cfg.maxReconsume && c.cfg.model == Clustering {
			m.ReconsumeTimes = counts[i]
			if m.Properties == nil {
				m.Properties = map[string]string{}
			}
			m.Properties[message.PropReconsumeTime] = strconv.Itoa(counts[i])
			if !c.sendBackUntilDone(pq, m, -1) {
				return false
			}
			dead = append(dead, m)
		}
	}
	if len(dead) > 0 {
		pq.ack(dead)
		if len(dead) == len(msgs) {
			return true
		}
	}
	return sleepCtx(pq.ctx, c.cfg.orderlyRetryDelay) == nil
}
