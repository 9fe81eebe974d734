package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPushConsumer_CaughtUpSmallAndLarge: a caught-up consumer gets
// messages one at a time, small ones between large ones (20 KiB, random,
// so that the producer's compression leaves them large on the wire), each
// exactly once and whole, and the group's lag comes back to 0.
func TestPushConsumer_CaughtUpSmallAndLarge(t *testing.T) {
	c := newCluster(t, 1)
	topic := "caughtup"
	c.createTopic(topic, 1)
	rec := newRecorder()
	pc := c.pushConsumer("g-caughtup", topic, rec.handler("c0"), WithConsumeFrom(ConsumeFromFirst))
	waitBalanced(t, topic, 1, pc)
	p := c.producer()
	ctx := ctxT(t, 60*time.Second)
	large := make([]byte, 20<<10)
	_, _ = rand.NewChaCha8([32]byte{}).Read(large) // NB: random: a producer compresses a large body, and it must stay large on the wire
	const n = 40
	for i := range n {
		body := fmt.Appendf(nil, "small-%d", i)
		if i%4 == 3 {
			body = append(fmt.Appendf(nil, "large-%d-", i), large...)
		}
		_, err := p.Send(ctx, &Message{Topic: topic, Body: body})
		require.NoError(t, err)
		rec.waitDistinct(t, i+1, 10*time.Second) // NB: caught up before the next
	}
	require.Zero(t, rec.duplicates())
	rec.mu.Lock()
	for i, m := range rec.msgs {
		if i%4 == 3 {
			require.Len(t, m.Body, len(fmt.Sprintf("large-%d-", i))+len(large), "message %d whole", i)
		}
	}
	rec.mu.Unlock()
	waitConsumed(t, c, "g-caughtup", topic)
}

// TestPushConsumer_NoRoomToConsume: answers arriving while the consume
// side has no room (one consume goroutine, held in its handler) wait for
// it; nothing is lost or delivered twice once the handler lets go.
func TestPushConsumer_NoRoomToConsume(t *testing.T) {
	c := newCluster(t, 1)
	topic := "noroom"
	c.createTopic(topic, 4)
	release := make(chan struct{})
	var inHandler atomic.Int32
	rec := newRecorder()
	record := rec.handler("c0")
	h := func(ctx context.Context, msgs []*Message) ConsumeResult {
		inHandler.Add(1)
		<-release
		return record(ctx, msgs)
	}
	pc := c.pushConsumer("g-noroom", topic, h, WithConsumeFrom(ConsumeFromFirst),
		WithConsumeGoroutines(1), WithConsumeBatchSize(1))
	waitBalanced(t, topic, 4, pc)
	p := c.producer()
	const n = 60
	sendN(t, p, topic, "m", n, nil)
	require.Eventually(t, func() bool { return inHandler.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	close(release)
	rec.waitDistinct(t, n, 30*time.Second)
	require.Zero(t, rec.duplicates())
	waitConsumed(t, c, "g-noroom", topic)
}
