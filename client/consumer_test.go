package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPushConsumer_Clustering: with 1, 2 and 3 members every message is
// consumed, and exactly once once the group is balanced.
func TestPushConsumer_Clustering(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("consumers=%d", n), func(t *testing.T) {
			c := newCluster(t, 2)
			topic := "clu"
			c.createTopic(topic, 4)
			rec := newRecorder()
			var pcs []*PushConsumer
			for i := range n {
				name := fmt.Sprintf("c%d", i)
				pcs = append(pcs, c.pushConsumer("g-clu", topic, rec.handler(name), WithInstanceName(name),
					WithConsumeFrom(ConsumeFromFirst)))
			}
			waitBalanced(t, topic, 8, pcs...)
			p := c.producer()
			sendN(t, p, topic, "m", 200, nil)
			rec.waitDistinct(t, 200, 30*time.Second)
			time.Sleep(300 * time.Millisecond)
			require.Zero(t, rec.duplicates(), "steady state: exactly once")
			if n > 1 {
				for name, got := range rec.byCons {
					require.NotEmpty(t, got, "consumer %s got a share", name)
				}
				require.Len(t, rec.byCons, n)
			}
			for _, m := range rec.msgs {
				require.Equal(t, topic, m.Topic)
				require.NotEmpty(t, m.MsgID)
				require.NotZero(t, m.StoreTimestamp)
				require.NotZero(t, m.BornTimestamp)
				require.Zero(t, m.ReconsumeTimes)
			}
		})
	}
}

// TestPushConsumer_JoinLeave: a member joins and another leaves while
// messages flow; nothing is lost and duplicates stay within the in-flight
// window.
func TestPushConsumer_JoinLeave(t *testing.T) {
	c := newCluster(t, 1)
	topic := "jl"
	c.createTopic(topic, 8)
	rec := newRecorder()
	opts := []Option{WithConsumeFrom(ConsumeFromFirst), WithPullBatchSize(8), WithPullThreshold(16, 1<<20)}
	c1 := c.pushConsumer("g-jl", topic, rec.handler("c1"), append(opts, WithInstanceName("c1"))...)
	waitBalanced(t, topic, 8, c1)
	p := c.producer()

	const total = 600
	var sent atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		for i := range total {
			if _, err := p.Send(ctx, &Message{Topic: topic, Body: fmt.Appendf(nil, "jl-%d", i)}); err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
			sent.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	require.Eventually(t, func() bool { return sent.Load() > total/4 }, 30*time.Second, 5*time.Millisecond)
	c2 := c.pushConsumer("g-jl", topic, rec.handler("c2"), append(opts, WithInstanceName("c2"))...)
	waitBalanced(t, topic, 8, c1, c2)
	require.Eventually(t, func() bool { return sent.Load() > total/2 }, 30*time.Second, 5*time.Millisecond)
	c3 := c.pushConsumer("g-jl", topic, rec.handler("c3"), append(opts, WithInstanceName("c3"))...)
	require.NoError(t, c1.Close(), "c1 leaves")
	waitBalanced(t, topic, 8, c2, c3)
	<-done
	rec.waitDistinct(t, total, 60*time.Second)
	dups := rec.duplicates()
	t.Logf("duplicates: %d of %d", dups, total)
	// Each queue change can redeliver at most the queue's in-flight window
	// (pull threshold + one pull batch); 8 queues moved at most twice.
	require.LessOrEqual(t, dups, 2*8*(16+8))
	require.NotEmpty(t, rec.byCons["c2"])
	require.NotEmpty(t, rec.byCons["c3"])
}

// TestPushConsumer_Broadcasting: every member gets every message; offsets
// are kept in a local file.
func TestPushConsumer_Broadcasting(t *testing.T) {
	c := newCluster(t, 1)
	topic := "bc"
	c.createTopic(topic, 4)
	dir := t.TempDir()
	recs := []*recorder{newRecorder(), newRecorder()}
	var pcs []*PushConsumer
	for i, r := range recs {
		name := fmt.Sprintf("b%d", i)
		pcs = append(pcs, c.pushConsumer("g-bc", topic, r.handler(name), WithInstanceName(name),
			WithMessageModel(Broadcasting), WithOffsetDir(dir), WithConsumeFrom(ConsumeFromFirst)))
	}
	for _, pc := range pcs {
		require.Eventually(t, func() bool { return len(owned(pc, topic)) == 4 }, 20*time.Second, 20*time.Millisecond)
	}
	sendN(t, c.producer(), topic, "bc", 100, nil)
	for _, r := range recs {
		r.waitDistinct(t, 100, 30*time.Second)
	}
	require.NoError(t, pcs[0].Close())
	b, err := os.ReadFile(filepath.Join(dir, "g-bc", "b0", "offsets.json"))
	require.NoError(t, err)
	require.Contains(t, string(b), `"topic": "bc"`)

	// A restarted member resumes from its file: it replays nothing.
	again := newRecorder()
	c.pushConsumer("g-bc", topic, again.handler("b0"), WithInstanceName("b0"),
		WithMessageModel(Broadcasting), WithOffsetDir(dir), WithConsumeFrom(ConsumeFromFirst))
	sendN(t, c.producer(), topic, "bc2", 10, nil)
	again.waitDistinct(t, 10, 30*time.Second)
	time.Sleep(300 * time.Millisecond)
	for body := range again.count {
		require.True(t, strings.HasPrefix(body, "bc2-"), "replayed %s", body)
	}
}

// TestPushConsumer_Orderly: messages of one sharding key are handled in
// send order, one at a time, by two orderly members.
func TestPushConsumer_Orderly(t *testing.T) {
	c := newCluster(t, 2)
	topic := "ord"
	c.createTopic(topic, 4)
	rec := newRecorder()
	var busy sync.Map // queue → handling
	var overlap atomic.Bool
	h := func(name string) Handler {
		inner := rec.handler(name)
		return func(ctx context.Context, msgs []*Message) ConsumeResult {
			if _, loaded := busy.LoadOrStore(msgs[0].Queue, true); loaded {
				overlap.Store(true)
			}
			defer busy.Delete(msgs[0].Queue)
			time.Sleep(time.Millisecond)
			return inner(ctx, msgs)
		}
	}
	opts := []Option{WithOrderly(true), WithConsumeFrom(ConsumeFromFirst)}
	o1 := c.pushConsumer("g-ord", topic, h("o1"), append(opts, WithInstanceName("o1"))...)
	o2 := c.pushConsumer("g-ord", topic, h("o2"), append(opts, WithInstanceName("o2"))...)
	waitBalanced(t, topic, 8, o1, o2)
	p := c.producer(WithQueueSelector(HashSelector()))
	const keys, per = 10, 20
	sendN(t, p, topic, "o", keys*per, func(i int, m *Message) {
		m.ShardingKey = fmt.Sprintf("key-%d", i%keys)
		m.Body = fmt.Appendf(nil, "%d", i/keys)
	})
	require.Eventually(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for _, b := range rec.byKey {
			n += len(b)
		}
		return n >= keys*per
	}, 30*time.Second, 20*time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for key, bodies := range rec.byKey {
		require.Len(t, bodies, per, "key %s", key)
		for i, b := range bodies {
			require.Equal(t, strconv.Itoa(i), b, "key %s in order", key)
		}
	}
	require.False(t, overlap.Load(), "one message at a time per queue")
}
