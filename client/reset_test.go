package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPushConsumer_ResetWhileRunning: an admin rewinds a group whose
// consumer is running; the broker tells the consumer, which consumes every
// message again from the reset point (without being restarted), and its
// later commits do not undo the reset.
func TestPushConsumer_ResetWhileRunning(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("rewind", 4)
	p := c.producer()
	ctx := ctxT(t, 60*time.Second)
	const n = 40
	send := func(prefix string) {
		for i := range n {
			_, err := p.Send(ctx, &Message{Topic: "rewind", Body: fmt.Appendf(nil, "%s-%d", prefix, i)})
			require.NoError(t, err)
		}
	}
	before := time.Now().Add(-time.Second)
	send("a")
	rec := newRecorder()
	pc := c.pushConsumer("rewinders", "rewind", rec.handler("c1"), WithConsumeFrom(ConsumeFromFirst))
	rec.waitDistinct(t, n, 20*time.Second)
	committed := func() bool { // the consumer has committed all it consumed
		cp, err := c.admin().ConsumeStats(ctx, "rewinders", "rewind")
		if err != nil || len(cp.Queues) != 4 {
			return false
		}
		for _, q := range cp.Queues {
			if q.ConsumerOffset != q.BrokerOffset {
				return false
			}
		}
		return true
	}
	require.Eventually(t, committed, 20*time.Second, 50*time.Millisecond)

	offsets, err := c.admin().ResetOffsetByTime(ctx, "rewinders", "rewind", before)
	require.NoError(t, err)
	require.Len(t, offsets, 4)
	for q, off := range offsets {
		require.Equal(t, int64(0), off, "queue %v", q)
	}
	require.Eventually(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for i := range n {
			if rec.count[fmt.Sprintf("a-%d", i)] < 2 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "every message consumed again after the reset")

	// Still consuming, and committing past the reset point.
	send("b")
	rec.waitDistinct(t, 2*n, 20*time.Second)
	require.Eventually(t, committed, 20*time.Second, 50*time.Millisecond)
	require.NoError(t, pc.Close())
}
