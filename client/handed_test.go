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
// messages one at a time, small ones (whose answers the connection's
// reader hands to the consume side itself: handedPull) between large ones
// (past handedDecodeMax: decoded on the pull loop), each exactly once and
// whole, and the group's lag comes back to 0.
func TestPushConsumer_CaughtUpSmallAndLarge(t *testing.T) {
	c := newCluster(t, 1)
	topic := "handed"
	c.createTopic(topic, 1)
	rec := newRecorder()
	pc := c.pushConsumer("g-handed", topic, rec.handler("c0"), WithConsumeFrom(ConsumeFromFirst))
	waitBalanced(t, topic, 1, pc)
	p := c.producer()
	ctx := ctxT(t, 60*time.Second)
	large := make([]byte, handedDecodeMax+1)
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
	waitLag(t, c.admin(), "g-handed", topic, 0)
}

// TestPushConsumer_HandedNoRoom: answers arriving while the consume side
// has no room (one consume goroutine, held in its handler) go to the pull
// loop, which waits for room; nothing is lost or delivered twice once the
// handler lets go.
func TestPushConsumer_HandedNoRoom(t *testing.T) {
	c := newCluster(t, 1)
	topic := "handed-full"
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
	pc := c.pushConsumer("g-handed-full", topic, h, WithConsumeFrom(ConsumeFromFirst),
		WithConsumeGoroutines(1), WithConsumeBatchSize(1))
	waitBalanced(t, topic, 4, pc)
	p := c.producer()
	const n = 60
	sendN(t, p, topic, "m", n, nil)
	require.Eventually(t, func() bool { return inHandler.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	close(release)
	rec.waitDistinct(t, n, 30*time.Second)
	require.Zero(t, rec.duplicates())
	waitLag(t, c.admin(), "g-handed-full", topic, 0)
}

// waitLag waits until group's lag on topic is want.
func waitLag(t *testing.T, a *Admin, group, topic string, want int64) {
	t.Helper()
	var last ConsumerProgress
	require.Eventually(t, func() bool {
		pr, err := a.ConsumeStats(ctxT(t, 5*time.Second), group, topic)
		last = pr
		return err == nil && pr.UnknownLag == 0 && pr.Lag == want
	}, 30*time.Second, 50*time.Millisecond, "lag of %s on %s: %+v", group, topic, &last)
}

// TestConsumeLoop_ServesOverflow: tasks a connection's reader could not
// put in the full task channel (overflow) are handled by the consume
// goroutines, whether they are busy when the task overflows or parked
// (then the overflow wakes one), and acknowledged.
func TestConsumeLoop_ServesOverflow(t *testing.T) {
	c, err := NewPushConsumer("g-overflow", WithNameServers("127.0.0.1:1"), WithConsumeGoroutines(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	got := make(chan string, 8)
	require.NoError(t, c.Subscribe("t", "*", func(_ context.Context, msgs []*Message) ConsumeResult {
		for _, m := range msgs {
			got <- string(m.Body)
		}
		return ConsumeSuccess
	}))
	c.stats = newConsumeStats(time.Now())
	pq := newProcessQueue(MessageQueue{Topic: "t", BrokerName: "b", QueueID: 0})
	pq.start(0)
	var msgs []*Message
	for i := range 4 {
		msgs = append(msgs, &Message{Topic: "t", QueueOffset: int64(i), Body: fmt.Appendf(nil, "m%d", i)})
	}
	pq.add(msgs, 4)
	c.tasks <- consumeTask{pq: pq, msgs: msgs[0:1]} // NB: the channel holds one: full
	c.overflow(consumeTask{pq: pq, msgs: msgs[1:2]})
	c.overflow(consumeTask{pq: pq, msgs: msgs[2:3]})
	done := make(chan struct{})
	go func() { c.consumeLoop(); close(done) }()
	recv := func() string {
		select {
		case b := <-got:
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("a task was not handled")
		}
		return ""
	}
	var bodies []string
	for range 3 {
		bodies = append(bodies, recv())
	}
	require.ElementsMatch(t, []string{"m0", "m1", "m2"}, bodies)
	// NB: the loop is parked on an empty channel now, or about to be
	c.overflow(consumeTask{pq: pq, msgs: msgs[3:4]})
	require.Equal(t, "m3", recv())
	require.Eventually(t, func() bool { return pq.inFlight() == 0 }, 10*time.Second, time.Millisecond,
		"every task acknowledged")
	close(c.quit)
	<-done
}
