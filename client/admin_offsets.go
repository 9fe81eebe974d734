package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// QueueProgress is a consumer group's position in one queue.
type QueueProgress struct {
	Queue          MessageQueue
	BrokerOffset   int64 // the queue's max offset (next to be written)
	ConsumerOffset int64 // the group's committed offset; -1 if none
	// Lag is how many messages the group has not consumed; -1 (unknown)
	// when the group has no committed offset there, since where it would
	// start is up to its consumers (ConsumeFrom), as mqadmin reports it.
	Lag int64
	// LagTime is how long the oldest message the group has not consumed
	// has been waiting; 0 when there is no lag, -1 when Lag is unknown or
	// the broker could not say when that message was stored.
	LagTime time.Duration
}

// ConsumerProgress is a group's position on a topic (or on every topic it
// consumes), as mqadmin consumerProgress shows it.
type ConsumerProgress struct {
	Group  string
	Queues []QueueProgress // sorted by topic, broker name, queue id
	// Lag sums the queues whose lag is known; UnknownLag counts the
	// others.
	Lag        int64
	UnknownLag int
	LagTime    time.Duration // the largest known; -1 when none is known
}

// ConsumeStats returns group's progress on topic, or on every topic the
// group has offsets for or subscribes to when topic is empty, from every
// broker (GET_CONSUME_STATS).
//
// NB: the body is Sluice's (queues as a list); an Apache RocketMQ broker
// answers in its own form, which this method does not read.
func (a *Admin) ConsumeStats(ctx context.Context, group, topic string) (ConsumerProgress, error) {
	if err := a.check(); err != nil {
		return ConsumerProgress{}, err
	}
	var addrs []string
	if topic != "" {
		r, err := a.core.routes.refresh(ctx, topic)
		if err != nil {
			return ConsumerProgress{}, err
		}
		for _, name := range sortedKeys(r.addrs) {
			addrs = append(addrs, r.addrs[name])
		}
	} else {
		ci, err := a.ClusterInfo(ctx)
		if err != nil {
			return ConsumerProgress{}, err
		}
		addrs = ci.MasterAddrs("")
	}
	now := time.Now()
	cp := ConsumerProgress{Group: group, LagTime: -1}
	h := &protocol.GetConsumeStatsRequestHeader{ConsumerGroup: group, Topic: topic}
	for _, addr := range addrs {
		cctx, cancel := a.core.callCtx(ctx)
		resp, err := a.core.tr.call(cctx, addr, request{code: protocol.GetConsumeStats, ext: protocol.Ext(h)})
		cancel()
		if err != nil {
			return cp, err
		}
		var st protocol.ConsumeStats
		if err := decode(resp, &st); err != nil {
			return cp, err
		}
		for _, q := range st.Queues {
			p := progressOf(q, now)
			if p.Lag < 0 {
				cp.UnknownLag++
			} else {
				cp.Lag += p.Lag
			}
			cp.LagTime = max(cp.LagTime, p.LagTime)
			cp.Queues = append(cp.Queues, p)
		}
	}
	slices.SortFunc(cp.Queues, func(x, y QueueProgress) int { return compareQueues(x.Queue, y.Queue) })
	return cp, nil
}

// progressOf reads one queue of a GET_CONSUME_STATS answer.
func progressOf(q protocol.QueueProgress, now time.Time) QueueProgress {
	p := QueueProgress{Queue: fromWire(q.MessageQueue), BrokerOffset: q.BrokerOffset, ConsumerOffset: -1, Lag: -1, LagTime: -1}
	if q.ConsumerOffset < 0 {
		return p
	}
	p.ConsumerOffset = q.ConsumerOffset
	p.Lag = max(q.BrokerOffset-q.ConsumerOffset, 0)
	switch {
	case p.Lag == 0:
		p.LagTime = 0
	case q.OldestUnconsumedTimestamp > 0:
		p.LagTime = max(now.Sub(time.UnixMilli(q.OldestUnconsumedTimestamp)), 0)
	}
	return p
}

// ResetOffsetByTime moves group's committed offset on every queue of topic
// to the first message stored at or after t, backwards or forwards, and
// returns the new offsets. Each broker is asked to do it
// (INVOKE_BROKER_TO_RESET_OFFSET), which also tells the group's running
// consumers to restart from there; a broker without that request gets
// SEARCH_OFFSET_BY_TIMESTAMP and UPDATE_CONSUMER_OFFSET instead (running
// consumers then keep their own offsets).
func (a *Admin) ResetOffsetByTime(ctx context.Context, group, topic string, t time.Time) (map[MessageQueue]int64, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	r, err := a.core.routes.refresh(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[MessageQueue]int64, len(r.read))
	for broker, qs := range byBroker(r.read) {
		addr := r.addrs[broker]
		if addr == "" {
			return out, fmt.Errorf("%w: no master address for broker %s", ErrNoRoute, broker)
		}
		offs, err := a.resetOnBroker(ctx, addr, group, topic, t)
		if err == nil {
			maps.Copy(out, offs)
			continue
		}
		if !errors.Is(err, &BrokerError{Code: CodeRequestNotSupported}) {
			return out, err
		}
		if err := a.resetByHand(ctx, addr, group, qs, t, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// resetOnBroker asks the broker at addr to reset group's offsets on topic
// (INVOKE_BROKER_TO_RESET_OFFSET, forced) and returns the new offsets.
func (a *Admin) resetOnBroker(ctx context.Context, addr, group, topic string, t time.Time) (map[MessageQueue]int64, error) {
	cctx, cancel := a.core.callCtx(ctx)
	defer cancel()
	resp, err := a.core.tr.call(cctx, addr, request{code: protocol.InvokeBrokerToResetOffset,
		ext: protocol.Ext(&protocol.ResetOffsetRequestHeader{Topic: topic, Group: group, Timestamp: t.UnixMilli(), IsForce: true})})
	if err != nil {
		return nil, err
	}
	var body protocol.ResetOffsetBody
	if err := body.UnmarshalJSON(resp.Body); err != nil {
		return nil, fmt.Errorf("client: bad INVOKE_BROKER_TO_RESET_OFFSET answer from %s: %w", addr, err)
	}
	out := make(map[MessageQueue]int64, len(body.OffsetTable))
	for q, off := range body.OffsetTable {
		out[MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int(q.QueueID)}] = off
	}
	return out, nil
}

// resetByHand moves group's offsets on qs (at addr) to the first message at
// or after t, one queue at a time, and records them in out.
func (a *Admin) resetByHand(ctx context.Context, addr, group string, qs []MessageQueue, t time.Time, out map[MessageQueue]int64) error {
	for _, q := range qs {
		off, err := searchOffset(ctx, a.core, addr, q, t)
		if err != nil {
			return err
		}
		if err := commitOffset(ctx, a.core, addr, group, q, off); err != nil {
			return err
		}
		out[q] = off
	}
	return nil
}

// searchOffset asks addr for the offset of the first message of q stored at
// or after t (SEARCH_OFFSET_BY_TIMESTAMP).
func searchOffset(ctx context.Context, c *core, addr string, q MessageQueue, t time.Time) (int64, error) {
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	resp, err := c.tr.call(cctx, addr, request{code: protocol.SearchOffsetByTimestamp,
		ext: protocol.Ext(&protocol.SearchOffsetByTimestampRequestHeader{Topic: q.Topic, QueueID: int32(q.QueueID),
			Timestamp: t.UnixMilli(), BrokerName: q.BrokerName})})
	if err != nil {
		return 0, err
	}
	var h protocol.SearchOffsetByTimestampResponseHeader
	if err := h.FromExt(resp.ExtFields); err != nil {
		return 0, fmt.Errorf("client: bad SEARCH_OFFSET_BY_TIMESTAMP answer from %s: %w", addr, err)
	}
	return h.Offset, nil
}

// maxOffset asks addr for q's max offset (GET_MAX_OFFSET).
func maxOffset(ctx context.Context, c *core, addr string, q MessageQueue) (int64, error) {
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	resp, err := c.tr.call(cctx, addr, request{code: protocol.GetMaxOffset,
		ext: protocol.Ext(&protocol.GetMaxOffsetRequestHeader{Topic: q.Topic, QueueID: int32(q.QueueID), BrokerName: q.BrokerName})})
	if err != nil {
		return 0, err
	}
	var h protocol.GetMaxOffsetResponseHeader
	if err := h.FromExt(resp.ExtFields); err != nil {
		return 0, fmt.Errorf("client: bad GET_MAX_OFFSET answer from %s: %w", addr, err)
	}
	return h.Offset, nil
}

// commitOffset stores group's offset of q on addr (UPDATE_CONSUMER_OFFSET).
func commitOffset(ctx context.Context, c *core, addr, group string, q MessageQueue, off int64) error {
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	_, err := c.tr.call(cctx, addr, request{code: protocol.UpdateConsumerOffset,
		ext: protocol.Ext(&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: q.Topic,
			QueueID: int32(q.QueueID), CommitOffset: off, BrokerName: q.BrokerName})})
	return err
}

// queryOffset returns group's committed offset of q on addr, or -1 when the
// broker has none (QUERY_NOT_FOUND).
func queryOffset(ctx context.Context, c *core, addr, group string, q MessageQueue) (int64, error) {
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	resp, err := c.tr.call(cctx, addr, request{code: protocol.QueryConsumerOffset,
		ext: protocol.Ext(&protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: q.Topic,
			QueueID: int32(q.QueueID), BrokerName: q.BrokerName})}, protocol.QueryNotFound)
	if err != nil {
		return 0, err
	}
	if resp.Code == protocol.QueryNotFound {
		return -1, nil
	}
	var h protocol.QueryConsumerOffsetResponseHeader
	if err := h.FromExt(resp.ExtFields); err != nil {
		return 0, fmt.Errorf("client: bad QUERY_CONSUMER_OFFSET answer from %s: %w", addr, err)
	}
	return h.Offset, nil
}
