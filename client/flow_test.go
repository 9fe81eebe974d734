package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gate blocks handler calls until the test lets them through, one call
// per pass.
type gate struct {
	pass    chan struct{}
	running atomic.Int32 // calls in progress
	maxRun  atomic.Int32 // most calls in progress at once
	handled atomic.Int32 // messages of calls that passed
}

func (g *gate) handler(ctx context.Context, msgs []*Message) ConsumeResult {
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for m := g.maxRun.Load(); n > m && !g.maxRun.CompareAndSwap(m, n); m = g.maxRun.Load() {
	}
	select {
	case <-g.pass:
	case <-ctx.Done():
		return ConsumeRetryLater
	}
	g.handled.Add(int32(len(msgs)))
	return ConsumeSuccess
}

// flowConsumer starts a consumer of a one-queue topic holding n messages
// of size bytes each, its handler behind a gate.
func flowConsumer(t *testing.T, n, size int, extra ...Option) (*PushConsumer, *gate, *processQueue) {
	t.Helper()
	c := newCluster(t, 1)
	topic := "flow"
	c.createTopic(topic, 1)
	sendN(t, c.producer(WithCompression(0, 0)), topic, "f", n, func(i int, m *Message) {
		m.Body = fmt.Appendf(nil, "%0*d", size, i)
	})
	g := &gate{pass: make(chan struct{})}
	pc := c.pushConsumer("g-flow", topic, g.handler, append([]Option{WithConsumeFrom(ConsumeFromFirst)}, extra...)...)
	t.Cleanup(func() { close(g.pass) }) // NB: runs before the consumer's Close
	var pq *processQueue
	require.Eventually(t, func() bool {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		pq = pc.queues[MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}]
		return pq != nil
	}, 30*time.Second, 5*time.Millisecond)
	return pc, g, pq
}

// window returns the messages and body bytes in pq's window.
func (pq *processQueue) window() (int, int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.live, pq.bytes
}

// checkPausedWindows lets handler calls (of one message each) through one
// at a time. Each time the pull loop has paused on the thresholds (so the
// window cannot grow until a call passes), check sees the window. Once
// every message was pulled, the rest are let through.
func checkPausedWindows(t *testing.T, g *gate, pq *processQueue, total int, check func(live int, bytes int64)) {
	t.Helper()
	require.Eventually(t, func() bool { return pq.flowPaused.Load() > 0 }, 30*time.Second, 5*time.Millisecond,
		"pulling paused")
	pauses := 0
	for pq.nextOffset() < int64(total) {
		paused := pq.flowPaused.Load()
		check(pq.window())
		pauses++
		g.pass <- struct{}{}
		require.Eventually(t, func() bool { return pq.flowPaused.Load() > paused || pq.nextOffset() >= int64(total) },
			30*time.Second, time.Millisecond, "paused again")
	}
	for range total - pauses { // NB: one message per call
		g.pass <- struct{}{}
	}
	t.Logf("checked the window at %d pauses", pauses)
	require.Positive(t, pauses)
}

// TestPushConsumer_PullThresholdCount: while handlers hold messages,
// pulling pauses once the window holds the count threshold, so it holds
// at most threshold-1 plus one pull batch.
func TestPushConsumer_PullThresholdCount(t *testing.T) {
	const total, threshold, batch = 60, 10, 4
	_, g, pq := flowConsumer(t, total, 8, WithConsumeGoroutines(64), WithPullBatchSize(batch),
		WithPullThreshold(threshold, 1<<30))
	checkPausedWindows(t, g, pq, total, func(live int, _ int64) {
		require.GreaterOrEqual(t, live, threshold)
		require.LessOrEqual(t, live, threshold-1+batch)
	})
}

// TestPushConsumer_PullThresholdBytes: the same by body bytes.
func TestPushConsumer_PullThresholdBytes(t *testing.T) {
	const total, size, threshold, batch = 40, 1000, 5000, 3
	_, g, pq := flowConsumer(t, total, size, WithConsumeGoroutines(64), WithPullBatchSize(batch),
		WithPullThreshold(1<<20, threshold))
	checkPausedWindows(t, g, pq, total, func(_ int, bytes int64) {
		require.GreaterOrEqual(t, bytes, int64(threshold))
		require.LessOrEqual(t, bytes, int64(threshold-1+batch*size))
	})
}

// TestPushConsumer_ConsumeGoroutines: handler calls run on at most
// WithConsumeGoroutines goroutines, and on all of them when there is work.
func TestPushConsumer_ConsumeGoroutines(t *testing.T) {
	const total, goroutines = 30, 3
	_, g, pq := flowConsumer(t, total, 8, WithConsumeGoroutines(goroutines))
	for passed := range total { // NB: one message per call
		left := total - passed
		// Every goroutine is busy while more messages wait for one.
		require.Eventually(t, func() bool { return int(g.running.Load()) == min(goroutines, left) },
			30*time.Second, time.Millisecond)
		if left > goroutines {
			live, _ := pq.window()
			require.Greater(t, live, goroutines, "more work than goroutines")
		}
		g.pass <- struct{}{}
	}
	require.Equal(t, int32(goroutines), g.maxRun.Load())
}

// TestPushConsumer_ConsumeBatchSize: a handler call gets at most
// WithConsumeBatchSize messages, of one queue, consecutive and in order,
// for concurrent and orderly consumers.
func TestPushConsumer_ConsumeBatchSize(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		t.Run(fmt.Sprintf("orderly=%v", orderly), func(t *testing.T) {
			const total, size = 40, 5
			c := newCluster(t, 1)
			topic := "batch"
			c.createTopic(topic, 1)
			sendN(t, c.producer(), topic, "b", total, nil)
			// NB: indexed before the consumer starts, so that its first
			// pull finds them all (the dispatcher trails the sends).
			require.Eventually(t, func() bool { return c.brokers[0].Store().MaxOffset(topic, 0) == total },
				10*time.Second, time.Millisecond)
			var mu sync.Mutex
			var sizes []int
			handled := 0
			h := func(_ context.Context, msgs []*Message) ConsumeResult {
				mu.Lock()
				defer mu.Unlock()
				sizes = append(sizes, len(msgs))
				for i, m := range msgs {
					require.Equal(t, msgs[0].Queue, m.Queue)
					require.Equal(t, msgs[0].QueueOffset+int64(i), m.QueueOffset, "consecutive, in order")
				}
				handled += len(msgs)
				return ConsumeSuccess
			}
			c.pushConsumer("g-batch", topic, h, WithConsumeFrom(ConsumeFromFirst), WithOrderly(orderly),
				WithConsumeBatchSize(size), WithPullBatchSize(32))
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return handled >= total
			}, 30*time.Second, 5*time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, total, handled)
			require.LessOrEqual(t, slices.Max(sizes), size, "%v", sizes)
			// NB: the pulls (32 stored messages, then 8) are cut into full
			// batches but for each pull's last one; concurrent handlers
			// may record those in any order.
			partial := 0
			for _, n := range sizes {
				if n < size {
					partial++
				}
			}
			require.LessOrEqual(t, partial, 2, "%v", sizes)
		})
	}
}
