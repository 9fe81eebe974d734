package client

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProducer_AutoBatch: with WithAutoBatch, async sends travel in batch
// requests, and each callback still gets its own id, offset id and queue
// offset, which name the message as stored.
func TestProducer_AutoBatch(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("ab", 4)
	p := c.producer(WithGroup("pg-ab"), WithAutoBatch(16, 64<<10), WithAsyncInflight(512))
	a := c.admin()
	ctx := ctxT(t, 60*time.Second)

	const n = 1500
	msgs := make([]*Message, n)
	results := make([]SendResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range msgs {
		m := &Message{Topic: "ab", Body: fmt.Appendf(nil, "ab-%d", i)}
		switch i % 4 {
		case 1:
			m.Tags, m.Keys = "T"+strconv.Itoa(i%3), []string{"k" + strconv.Itoa(i)}
		case 2:
			m.Properties = map[string]string{"n": strconv.Itoa(i)}
		case 3:
			m.Flag = int32(i)
		}
		if i == 700 {
			m.DelayLevel = 1 // NB: a delayed message goes alone: batches cannot be delayed
		}
		msgs[i] = m
		wg.Add(1)
		p.SendAsync(ctx, m, func(r SendResult, err error) {
			results[i], errs[i] = r, err
			wg.Done()
		})
	}
	wg.Wait()
	require.Positive(t, p.autoBatches.Load(), "no batch request was sent")
	seen := map[MessageQueue]map[int64]bool{}
	for i, r := range results {
		require.NoError(t, errs[i], "message %d", i)
		if i != 700 { // NB: the delayed message's offset is in the delay queue
			if seen[r.Queue] == nil {
				seen[r.Queue] = map[int64]bool{}
			}
			require.False(t, seen[r.Queue][r.QueueOffset], "message %d: %s offset %d given twice", i, r.Queue, r.QueueOffset)
			seen[r.Queue][r.QueueOffset] = true
		}
		if i%5 != 0 && i != 700 {
			continue // NB: every fifth message is read back, and the delayed one
		}
		got, err := a.QueryByID(ctx, r.OffsetMsgID)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, string(msgs[i].Body), string(got.Body))
		require.Equal(t, r.MsgID, got.MsgID)
		require.Equal(t, r.Queue.QueueID, got.Queue.QueueID)
		if i != 700 {
			require.Equal(t, r.QueueOffset, got.QueueOffset, "message %d", i)
		}
		require.Equal(t, msgs[i].Tags, got.Tags)
		require.Equal(t, msgs[i].Flag, got.Flag)
		if msgs[i].Properties != nil {
			require.Equal(t, msgs[i].Properties["n"], got.Properties["n"])
		}
	}
	require.Less(t, p.autoBatches.Load(), int64(n), "as many batch requests as messages")
}

// TestProducer_AutoBatchKeepsKeyOrder: the queue is picked per message
// before it joins a batch, so a hash selector's per-key order holds.
func TestProducer_AutoBatchKeepsKeyOrder(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("abo", 4)
	p := c.producer(WithGroup("pg-abo"), WithAutoBatch(32, 64<<10), WithQueueSelector(HashSelector()))
	ctx := ctxT(t, 60*time.Second)

	// NB: async sends keep their order only once the route is known; the
	// first sends to an unknown topic wait for it on workers, in any order.
	_, err := p.Send(ctx, &Message{Topic: "abo", Body: []byte("warm")})
	require.NoError(t, err)
	const keys, per = 6, 200
	type sent struct {
		res SendResult
		err error
	}
	results := make([][]sent, keys)
	var wg sync.WaitGroup
	for k := range keys {
		results[k] = make([]sent, per)
	}
	for i := range per {
		for k := range keys {
			wg.Add(1)
			p.SendAsync(ctx, &Message{Topic: "abo", ShardingKey: "key" + strconv.Itoa(k), Body: fmt.Appendf(nil, "%d-%d", k, i)},
				func(r SendResult, err error) { results[k][i] = sent{r, err}; wg.Done() })
		}
	}
	wg.Wait()
	require.Positive(t, p.autoBatches.Load())
	for k := range keys {
		for i, s := range results[k] {
			require.NoError(t, s.err)
			require.Equal(t, results[k][0].res.Queue, s.res.Queue, "key %d changed queue", k)
			if i > 0 {
				require.Greater(t, s.res.QueueOffset, results[k][i-1].res.QueueOffset, "key %d message %d stored out of order", k, i)
			}
		}
	}
}

// TestBatcher: a queue's first message leaves at once; later ones wait for
// the answer, or leave when they fill a batch by count or by bytes; one
// writer at a time takes a queue's batches, in order.
func TestBatcher(t *testing.T) {
	b := newBatcher(3, 4096)
	q := MessageQueue{Topic: "t", BrokerName: "b", QueueID: 1}
	n := 0
	mem := func(size int) batchMember {
		n++
		return batchMember{ctx: context.Background(), o: &outgoing{m: &Message{}, body: make([]byte, size), ids: []string{strconv.Itoa(n)}}}
	}
	ids := func(ms []batchMember) (out []string) {
		for _, m := range ms {
			out = append(out, m.o.ids[0])
		}
		return out
	}
	require.True(t, b.add(q, mem(10)), "nothing in flight: sent at once, by this caller")
	require.Equal(t, []string{"1"}, ids(b.next(q)))
	require.Nil(t, b.next(q), "the writer's turn ends")
	require.False(t, b.add(q, mem(10)))
	require.False(t, b.add(q, mem(10)))
	require.True(t, b.add(q, mem(10)), "a full batch leaves without waiting")
	require.False(t, b.add(q, mem(10)))
	require.False(t, b.add(q, mem(10)))
	require.False(t, b.add(q, mem(10)), "a second full batch waits for the writer")
	require.Equal(t, []string{"2", "3", "4"}, ids(b.next(q)))
	require.Equal(t, []string{"5", "6", "7"}, ids(b.next(q)), "batches are written in the order they were taken")
	require.Nil(t, b.next(q))
	require.False(t, b.add(q, mem(10)))
	require.False(t, b.answered(q), "two batches are still in flight")
	require.False(t, b.answered(q))
	require.True(t, b.answered(q), "the last answer makes what waited ready")
	require.Equal(t, []string{"8"}, ids(b.next(q)))
	require.Nil(t, b.next(q))
	require.False(t, b.answered(q))
	require.Empty(t, b.queues, "an idle queue is forgotten")

	require.True(t, b.add(q, mem(10)))
	require.Len(t, b.next(q), 1)
	require.Nil(t, b.next(q))
	require.False(t, b.add(q, mem(1500)))
	require.False(t, b.add(q, mem(1500)))
	require.True(t, b.add(q, mem(1500)), "the waiting batch leaves when the next member would overflow its bytes")
	require.Len(t, b.next(q), 2)
	require.Nil(t, b.next(q))
	require.False(t, b.answered(q))
	require.True(t, b.answered(q))
	require.Len(t, b.next(q), 1)
	require.Nil(t, b.next(q))
	require.False(t, b.answered(q))
	require.Empty(t, b.queues)

	require.True(t, b.batchable(&outgoing{m: &Message{}, body: make([]byte, 100)}))
	require.False(t, b.batchable(&outgoing{m: &Message{DelayLevel: 2}, body: make([]byte, 100)}))
	require.False(t, b.batchable(&outgoing{m: &Message{DeliverAt: time.Now()}, body: make([]byte, 100)}))
	require.False(t, b.batchable(&outgoing{m: &Message{}, body: make([]byte, 3000)}), "too big to share a batch")
	require.False(t, b.batchable(&outgoing{m: &Message{}, topic: "%RETRY%g", body: make([]byte, 100)}))
}

// TestProducer_AutoBatchCanceledWhileWaiting: a member whose context ends
// while it waits is answered with that error, on the completions
// goroutine, and never sent.
func TestProducer_AutoBatchCanceledWhileWaiting(t *testing.T) {
	c := newCluster(t, 1)
	p := c.producer(WithAutoBatch(8, 64<<10))
	q := MessageQueue{Topic: "abc", BrokerName: "b", QueueID: 0}
	first := batchMember{ctx: context.Background(), o: &outgoing{m: &Message{}, body: []byte("a"), ids: []string{"1"}}}
	require.True(t, p.batcher.add(q, first))
	require.Len(t, p.batcher.next(q), 1) // NB: taken as if written
	require.Nil(t, p.batcher.next(q))
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	waiting := batchMember{ctx: ctx, o: &outgoing{m: &Message{}, body: []byte("b"), ids: []string{"2"}},
		done: func(_ SendResult, err error) { got <- err }}
	require.False(t, p.batcher.add(q, waiting))
	cancel()
	p.batchAnswered(q) // NB: the first member's answer
	select {
	case err := <-got:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the canceled member was never answered")
	}
	require.Eventually(t, func() bool {
		p.batcher.mu.Lock()
		defer p.batcher.mu.Unlock()
		return len(p.batcher.queues) == 0
	}, 5*time.Second, 5*time.Millisecond)
	require.Zero(t, p.autoBatches.Load())
}

// TestProducer_AutoBatchOrderOneQueue: one goroutine sending to a one-queue
// topic gets its messages stored in send order, full batches included.
func TestProducer_AutoBatchOrderOneQueue(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("ab1", 1)
	p := c.producer(WithGroup("pg-ab1"), WithAutoBatch(3, 64<<10))
	ctx := ctxT(t, 60*time.Second)
	_, err := p.Send(ctx, &Message{Topic: "ab1", Body: []byte("warm")})
	require.NoError(t, err)
	const n = 3000
	offsets := make([]int64, n)
	var wg sync.WaitGroup
	var failed sync.Once
	for i := range n {
		wg.Add(1)
		p.SendAsync(ctx, &Message{Topic: "ab1", Body: fmt.Appendf(nil, "%d", i)}, func(r SendResult, err error) {
			if err != nil {
				failed.Do(func() { t.Errorf("message %d: %v", i, err) })
			}
			offsets[i] = r.QueueOffset
			wg.Done()
		})
		if i%7 == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	wg.Wait()
	require.Positive(t, p.autoBatches.Load())
	for i := 1; i < n; i++ {
		require.Greater(t, offsets[i], offsets[i-1], "message %d stored before message %d", i, i-1)
	}
}

// TestBatchContext: a batch is bounded by the latest deadline of its
// members, and by none when one member has none.
func TestBatchContext(t *testing.T) {
	now := time.Now()
	member := func(d time.Duration) batchMember {
		if d == 0 {
			return batchMember{ctx: context.Background()}
		}
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(d))
		t.Cleanup(cancel)
		return batchMember{ctx: ctx}
	}
	ctx, cancel := batchContext([]batchMember{member(time.Second), member(3 * time.Second), member(2 * time.Second)})
	dl, ok := ctx.Deadline()
	cancel()
	require.True(t, ok)
	require.Equal(t, now.Add(3*time.Second), dl)
	ctx, cancel = batchContext([]batchMember{member(time.Second), member(0)})
	_, ok = ctx.Deadline()
	cancel()
	require.False(t, ok, "a member without a deadline: none for the batch")
}

// TestPick_FirstYieldsToFaultAvoidance: a batch's queue, chosen before,
// is kept unless its broker is being avoided since.
func TestPick_FirstYieldsToFaultAvoidance(t *testing.T) {
	p := &Producer{cfg: defaultConfig(), sel: RoundRobinSelector(), faults: newFaultTracker(time.Minute)}
	a := MessageQueue{Topic: "t", BrokerName: "a", QueueID: 0}
	b := MessageQueue{Topic: "t", BrokerName: "b", QueueID: 0}
	r := &topicRoute{write: []MessageQueue{a, b}}
	o := &outgoing{m: &Message{}, topic: "t", first: &a}
	for range 4 {
		q, err := p.pick(o, r, "")
		require.NoError(t, err)
		require.Equal(t, a, q)
	}
	p.faults.record("a", 0, true)
	for range 4 {
		q, err := p.pick(o, r, "")
		require.NoError(t, err)
		require.Equal(t, b, q, "broker a failed: the pinned queue is not used")
	}
}

// TestOutgoing_PooledBodyHeldByWrite: a pooled batch body goes back to the
// pool only when both its outcome and the writes that held it let go, in
// either order; never after a failure on its connection.
func TestOutgoing_PooledBodyHeldByWrite(t *testing.T) {
	for _, outcomeFirst := range []bool{true, false} {
		o := &outgoing{}
		o.pooledBody(make([]byte, 10, 64))
		o.hold() // NB: an inline first attempt's write
		if outcomeFirst {
			o.recycle() // NB: the call timed out while the write blocks
			require.NotNil(t, o.body, "recycled while a write held it")
			o.drop()
		} else {
			o.drop()
			require.NotNil(t, o.body, "recycled before its outcome")
			o.recycle()
		}
		require.Nil(t, o.body)
	}
	o := &outgoing{}
	body := make([]byte, 10, 64)
	o.pooledBody(body)
	o.noReuse.Store(true)
	o.recycle()
	require.Nil(t, o.body)
	for range 100 { // NB: a pool may drop what it is given; it must never hand this back
		if bp, ok := batchBufs.Get().(*[]byte); ok {
			require.NotSame(t, &body[:1][0], &(*bp)[:1][0])
		}
	}
}
