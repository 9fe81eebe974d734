package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// PullStatus is the outcome of a pull.
type PullStatus int

const (
	PullFound         PullStatus = iota // messages returned
	PullNoNewMsg                        // the queue has nothing at or after the offset
	PullNoMatchedMsg                    // messages were scanned, none matched the expression
	PullOffsetIllegal                   // the offset is out of range; NextOffset is a valid one
)

func (s PullStatus) String() string {
	switch s {
	case PullNoNewMsg:
		return "NO_NEW_MSG"
	case PullNoMatchedMsg:
		return "NO_MATCHED_MSG"
	case PullOffsetIllegal:
		return "OFFSET_ILLEGAL"
	}
	return "FOUND"
}

// PullResult is one pull's answer.
type PullResult struct {
	Status     PullStatus
	NextOffset int64 // where the next pull should start
	MinOffset  int64
	MaxOffset  int64
	Messages   []*Message
}

// pullRequest is one PULL_MESSAGE.
type pullRequest struct {
	group   string
	q       MessageQueue
	offset  int64
	max     int
	sub     subscription
	suspend time.Duration // 0: answer at once
	commit  int64         // offset to commit with the pull; < 0 none
	timeout time.Duration
}

// pull sends one PULL_MESSAGE to the master of q's broker (a slave while
// it has none: readAddr) and decodes the answer. Messages not matching
// sub's tags are filtered out; messages of a retry topic get their
// original topic back.
func pull(ctx context.Context, c *core, r pullRequest) (PullResult, error) {
	addr, err := c.readAddr(ctx, r.q)
	if err != nil {
		return PullResult{}, err
	}
	flag := int32(protocol.PullFlagSubscription)
	if r.suspend > 0 {
		flag |= protocol.PullFlagSuspend
	}
	if r.commit > 0 {
		flag |= protocol.PullFlagCommitOffset
	}
	h := &protocol.PullMessageRequestHeader{ConsumerGroup: r.group, Topic: r.q.Topic, QueueID: int32(r.q.QueueID),
		QueueOffset: r.offset, MaxMsgNums: int32(r.max), SysFlag: flag, CommitOffset: max(r.commit, 0),
		SuspendTimeoutMillis: r.suspend.Milliseconds(), Subscription: r.sub.expr, SubVersion: r.sub.version,
		ExpressionType: r.sub.typ,
		BrokerName:     r.q.BrokerName}
	pctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := c.tr.call(pctx, addr, request{code: protocol.PullMessage, hdr: h, longPoll: r.suspend > 0},
		protocol.PullNotFound, protocol.PullRetryImmediately, protocol.PullOffsetMoved)
	if err != nil {
		c.connFailed(addr, err)
		return PullResult{}, err
	}
	var rh protocol.PullMessageResponseHeader
	if resp.ExtFields == nil && resp.ExtPairs.Valid() {
		err = rh.FromExtPairs(resp.ExtPairs) // NB: msgpack answers come so
	} else {
		err = rh.FromExt(resp.ExtFields)
	}
	if err != nil {
		return PullResult{}, fmt.Errorf("client: bad PULL_MESSAGE answer from %s: %w", addr, err)
	}
	res := PullResult{NextOffset: rh.NextBeginOffset, MinOffset: rh.MinOffset, MaxOffset: rh.MaxOffset}
	switch resp.Code {
	case protocol.PullNotFound:
		res.Status = PullNoNewMsg
		return res, nil
	case protocol.PullRetryImmediately:
		res.Status = PullNoMatchedMsg
		return res, nil
	case protocol.PullOffsetMoved:
		res.Status = PullOffsetIllegal
		return res, nil
	}
	msgs, err := decodeRecords(resp.Body, r.q.BrokerName, c.cfg.maxBodySize)
	if err != nil {
		return PullResult{}, err
	}
	for _, m := range msgs {
		if r.sub.matches(m) {
			restoreRetryTopic(m)
			res.Messages = append(res.Messages, m)
		}
	}
	if len(res.Messages) == 0 {
		res.Status = PullNoMatchedMsg
	}
	return res, nil
}

// startOffset returns where a newly assigned queue starts: the committed
// offset, or for a group without one the configured starting point
// (spec §3.6, §8.6).
func (c *PushConsumer) startOffset(ctx context.Context, q MessageQueue) (int64, error) {
	off, err := c.offsets.read(ctx, q)
	if err != nil || off >= 0 {
		return off, err
	}
	retry := strings.HasPrefix(q.Topic, retryPrefix)
	addr, err := c.core.readAddr(ctx, q)
	if err != nil {
		return 0, err
	}
	switch {
	case c.cfg.from == ConsumeFromFirst:
		return 0, nil
	case c.cfg.from == ConsumeFromLast && retry:
		return 0, nil
	case c.cfg.from == ConsumeFromTimestamp && !retry:
		return searchOffset(ctx, c.core, addr, q, c.cfg.fromTime)
	}
	return maxOffset(ctx, c.core, addr, q)
}

// pullLoop long-polls one owned queue until it is dropped: start offset,
// flow control, pull, hand messages to the consume side.
func (c *PushConsumer) pullLoop(pq *processQueue) {
	ctx := pq.ctx
	for {
		off, err := c.startOffset(ctx, pq.mq)
		if err == nil {
			pq.start(off)
			break
		}
		if ctx.Err() != nil {
			return
		}
		c.core.log.Warn("client: start offset", "group", c.group, "queue", pq.mq, "err", err)
		if sleepCtx(ctx, c.cfg.pullBackoff) != nil {
			return
		}
	}
	sub, _ := c.subscription(pq.mq.Topic)
	orderlyLocks := c.cfg.orderly && c.cfg.model == Clustering
	for ctx.Err() == nil {
		if pq.overLimit(c.cfg.pullThresholdCount, c.cfg.pullThresholdBytes) {
			if pq.flowPaused.Add(1) == 1 {
				c.core.log.Debug("client: window full, pulling paused", "group", c.group, "queue", pq.mq)
			}
			select { // NB: an ack kicks space after it frees room, so no wakeup is lost
			case <-pq.space:
			case <-ctx.Done():
			}
			continue
		}
		if orderlyLocks && !pq.lockValid(c.cfg.lockExpiry) {
			c.relock(ctx, pq)
			continue
		}
		commit := int64(-1)
		if c.cfg.model == Clustering {
			commit = pq.offset.Load()
		}
		began := time.Now()
		res, err := pull(ctx, c.core, pullRequest{group: c.group, q: pq.mq, offset: pq.nextOffset(), max: c.cfg.pullBatch,
			sub: sub, suspend: c.cfg.suspendTimeout, commit: commit, timeout: c.cfg.pullTimeout})
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrClosed) {
				return
			}
			c.core.log.Debug("client: pull", "group", c.group, "queue", pq.mq, "err", err)
			_ = sleepCtx(ctx, c.cfg.pullBackoff)
			continue
		}
		end := time.Now()
		pq.lastPull.Store(end.UnixMilli())
		switch res.Status {
		case PullFound:
			c.stats.pulledMsgs(pq.mq.Topic, len(res.Messages), end.Sub(began), end)
			pq.add(res.Messages, res.NextOffset)
			if !c.cfg.orderly {
				c.submit(pq, res.Messages)
				if res.NextOffset >= res.MaxOffset {
					// NB: caught up: the consume goroutine just woken
					// runs now, not once this one has sent its next pull
					// (which the broker will hold anyway) and parked.
					// The next pull waits for it: 27-31 µs at the median,
					// 157-215 at p99. A backlog's pull goes out first:
					// it is the rate. mqbench e2e at 10,000 msgs/s, fresh
					// brokers alternated with the build before: p50 lower
					// in 13 of 15 single runs and in 4 of 4 sets of 3
					// (0.24-0.50 -> 0.16-0.38 ms), p99 in 6 of 15 and in
					// 4 of 4; at 2,500 msgs/s p99 lower in 7 of 9.
					runtime.Gosched()
				}
			}
		case PullOffsetIllegal:
			c.core.log.Warn("client: offset out of range, moving", "group", c.group, "queue", pq.mq,
				"from", pq.nextOffset(), "to", res.NextOffset)
			pq.setNext(res.NextOffset)
		default:
			pq.setNext(res.NextOffset)
		}
	}
}

// relock tries to take a lost or expired lock back, waiting a little when
// it fails.
func (c *PushConsumer) relock(ctx context.Context, pq *processQueue) {
	got := c.lock(ctx, []MessageQueue{pq.mq})
	if len(got) == 1 {
		pq.setLocked(true)
		return
	}
	_ = sleepCtx(ctx, min(c.cfg.pullBackoff, time.Second))
}
