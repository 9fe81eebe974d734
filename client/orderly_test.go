package client

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// orderlyLog records the deliveries of keyed messages whose body is the
// key's sequence number, in the order the handlers ran them.
type orderlyLog struct {
	mu      sync.Mutex
	busy    map[MessageQueue]string          // queue → consumer handling it
	overlap []string                         // queues handled by two calls at once
	byCons  map[string]map[string][]int      // consumer → key → sequence numbers
	all     map[string][]int                 // key → sequence numbers, every consumer
	seen    map[string]map[int]bool          // key → sequence numbers delivered
	queues  map[string]map[MessageQueue]bool // consumer → queues it handled
}

func newOrderlyLog() *orderlyLog {
	return &orderlyLog{busy: map[MessageQueue]string{}, byCons: map[string]map[string][]int{}, all: map[string][]int{},
		seen: map[string]map[int]bool{}, queues: map[string]map[MessageQueue]bool{}}
}

func (l *orderlyLog) handler(t *testing.T, name string) Handler {
	l.mu.Lock()
	l.byCons[name], l.queues[name] = map[string][]int{}, map[MessageQueue]bool{}
	l.mu.Unlock()
	return func(_ context.Context, msgs []*Message) ConsumeResult {
		q := msgs[0].Queue
		l.mu.Lock()
		if other, ok := l.busy[q]; ok {
			l.overlap = append(l.overlap, fmt.Sprintf("%v: %s and %s", q, other, name))
		}
		l.busy[q] = name
		for _, m := range msgs {
			n, err := strconv.Atoi(string(m.Body))
			if err != nil {
				t.Errorf("body %q", m.Body)
				continue
			}
			k := m.ShardingKey
			l.byCons[name][k] = append(l.byCons[name][k], n)
			l.all[k] = append(l.all[k], n)
			if l.seen[k] == nil {
				l.seen[k] = map[int]bool{}
			}
			l.seen[k][n] = true
			l.queues[name][m.Queue] = true
		}
		l.mu.Unlock()
		time.Sleep(time.Millisecond) // NB: the handler's work, so that overlapping calls would meet
		l.mu.Lock()
		delete(l.busy, q)
		l.mu.Unlock()
		return ConsumeSuccess
	}
}

func (l *orderlyLog) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.seen {
		n += len(s)
	}
	return n
}

// TestPushConsumer_OrderlyAcrossRebalance: a second orderly member joins
// while keyed messages flow. Each key's messages are handled in order at
// every consumer, no message before its predecessor anywhere, one call at
// a time per queue, and the messages handled twice are at most those in
// flight at the moved queues when they moved: the one batch each was
// handling.
func TestPushConsumer_OrderlyAcrossRebalance(t *testing.T) {
	c := newCluster(t, 1)
	topic := "ord-rb"
	const queues = 8
	c.createTopic(topic, queues)
	l := newOrderlyLog()
	opts := []Option{WithOrderly(true), WithConsumeFrom(ConsumeFromFirst)}
	o1 := c.pushConsumer("g-ord-rb", topic, l.handler(t, "o1"), append(opts, WithInstanceName("o1"))...)
	waitBalanced(t, topic, queues, o1)

	p := c.producer(WithQueueSelector(HashSelector()))
	const keys = 16
	seq := 0
	sendRound := func() {
		for k := range keys {
			_, err := p.Send(ctxT(t, 10*time.Second), &Message{Topic: topic, ShardingKey: fmt.Sprintf("key-%d", k),
				Body: []byte(strconv.Itoa(seq))})
			require.NoError(t, err)
		}
		seq++
	}
	for range 20 {
		sendRound()
	}
	o2 := c.pushConsumer("g-ord-rb", topic, l.handler(t, "o2"), append(opts, WithInstanceName("o2"))...)
	// Messages keep flowing until the queues have moved, and after.
	balanced := func() bool {
		a, b := owned(o1, topic), owned(o2, topic)
		return len(a) == queues/2 && len(b) == queues/2
	}
	for !balanced() {
		sendRound()
		require.Less(t, seq, 100000, "the group never balanced")
	}
	for range 20 {
		sendRound()
	}
	total := seq * keys
	require.Eventually(t, func() bool { return l.distinct() == total }, 60*time.Second, 20*time.Millisecond,
		"want %d distinct messages", total)

	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(t, l.overlap, "one call at a time per queue")
	for name, byKey := range l.byCons {
		for k, ns := range byKey {
			for i := 1; i < len(ns); i++ {
				require.Greater(t, ns[i], ns[i-1], "%s: %s in order: %v", name, k, ns)
			}
		}
	}
	dups := 0
	for k, ns := range l.all {
		high := -1
		for _, n := range ns {
			require.LessOrEqual(t, n, high+1, "%s: %d handled before %d: %v", k, n, high+1, ns)
			high = max(high, n)
		}
		dups += len(ns) - len(l.seen[k])
	}
	moved := 0
	for q := range l.queues["o2"] {
		if l.queues["o1"][q] {
			moved++
		}
	}
	t.Logf("%d rounds of %d keys; %d queues moved; %d messages handled twice", seq, keys, moved, dups)
	require.LessOrEqual(t, dups, moved, "at most the batch in progress of each moved queue")
}

// TestPushConsumer_OrderlyRetriesLock: a queue allocated to a new orderly
// member while its previous owner is still handling a batch of it cannot
// be locked at once; the new member takes it as soon as the old owner
// lets go, not at its next rebalance round (an hour here).
func TestPushConsumer_OrderlyRetriesLock(t *testing.T) {
	c := newCluster(t, 1)
	topic := "ord-lock"
	c.createTopic(topic, 2)
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	h := func(_ context.Context, msgs []*Message) ConsumeResult {
		if string(msgs[0].Body) == "hold" {
			once.Do(func() { close(held) })
			<-release
		}
		return ConsumeSuccess
	}
	opts := []Option{WithOrderly(true), WithConsumeFrom(ConsumeFromFirst), WithRebalanceInterval(time.Hour)}
	o1 := c.pushConsumer("g-ord-lock", topic, h, append(opts, WithInstanceName("o1"))...)
	waitBalanced(t, topic, 2, o1)
	// Averagely, o1 keeps queue 0 and o2 gets queue 1 once it joins.
	q1 := MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 1}
	_, err := c.producer(WithQueueSelector(ManualSelector())).Send(ctxT(t, 10*time.Second),
		&Message{Topic: topic, Queue: q1, Body: []byte("hold")})
	require.NoError(t, err)
	<-held

	o2 := c.pushConsumer("g-ord-lock", topic, h, append(opts, WithInstanceName("o2"))...)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // NB: before the consumers' Close, should the test fail first
	// o1 drops queue 1 when the broker tells it o2 joined, and keeps its
	// lock until the batch in progress ends: o2's attempts fail until then
	// (two after the drop show it), and it keeps trying.
	require.Eventually(t, func() bool { return !slices.Contains(owned(o1, topic), q1) }, 30*time.Second, 5*time.Millisecond)
	misses := o2.lockMisses.Load()
	require.Eventually(t, func() bool { return o2.lockMisses.Load() >= misses+2 }, 30*time.Second, 5*time.Millisecond)
	require.Empty(t, owned(o2, topic))
	unblock()
	waitBalanced(t, topic, 2, o1, o2)
	require.Equal(t, []MessageQueue{q1}, owned(o2, topic))
}
