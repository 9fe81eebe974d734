package client

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// routeChangeOpts are consumer options whose rebalance timer and full
// route refresh never fire during a test: a rebalance it sees comes from
// the default refresh of the subscribed topics' routes finding a change
// (or a member joining or leaving, which these tests do not do once
// balanced).
func routeChangeOpts(name string) []Option {
	return []Option{WithInstanceName(name), WithRebalanceInterval(time.Hour), WithRouteRefreshInterval(time.Hour)}
}

// TestPushConsumer_RebalanceOnQueuesAdded: a topic grown from 4 to 8
// queues is shared anew by the group as soon as its route refresh sees it,
// not at the next rebalance round.
func TestPushConsumer_RebalanceOnQueuesAdded(t *testing.T) {
	c := newCluster(t, 1)
	topic := "grow"
	c.createTopic(topic, 4)
	rec := newRecorder()
	c1 := c.pushConsumer("g-grow", topic, rec.handler("c1"), routeChangeOpts("c1")...)
	c2 := c.pushConsumer("g-grow", topic, rec.handler("c2"), routeChangeOpts("c2")...)
	waitBalanced(t, topic, 4, c1, c2)

	require.NoError(t, c.admin().CreateTopic(ctxT(t, 10*time.Second), TopicSpec{Topic: topic, ReadQueues: 8, WriteQueues: 8}))
	waitBalanced(t, topic, 8, c1, c2)
}

// TestPushConsumer_RebalanceOnBrokerChange: when a broker group starts
// serving the topic, the group takes its queues; when it goes, the
// queues of the brokers left are shared anew.
func TestPushConsumer_RebalanceOnBrokerChange(t *testing.T) {
	c := newCluster(t, 1)
	topic := "brokers"
	c.createTopic(topic, 4)
	rec := newRecorder()
	c1 := c.pushConsumer("g-brokers", topic, rec.handler("c1"), routeChangeOpts("c1")...)
	c2 := c.pushConsumer("g-brokers", topic, rec.handler("c2"), routeChangeOpts("c2")...)
	waitBalanced(t, topic, 4, c1, c2)

	b := c.addBroker("broker-b")
	require.NoError(t, c.admin().CreateTopic(ctxT(t, 10*time.Second),
		TopicSpec{Topic: topic, ReadQueues: 4, WriteQueues: 4, BrokerAddr: b.Addr()}))
	waitBalanced(t, topic, 8, c1, c2)
	// Averagely over broker-a's and broker-b's sorted queues: c1 gets
	// broker-a's, c2 broker-b's.
	require.Equal(t, "broker-b", owned(c2, topic)[0].BrokerName)

	require.NoError(t, b.Close())
	waitBalanced(t, topic, 4, c1, c2)
	for _, pc := range []*PushConsumer{c1, c2} {
		for _, q := range owned(pc, topic) {
			require.Equal(t, "broker-a", q.BrokerName, fmt.Sprintf("%s still owns %v", pc.ClientID(), q))
		}
	}
}

// blockingOffsets is an offset store whose first commit waits for release;
// it keeps the last offset committed per queue.
type blockingOffsets struct {
	entered chan struct{} // closed when the first commit is under way
	release chan struct{}
	mu      sync.Mutex
	calls   int
	last    map[MessageQueue]int64
}

func (s *blockingOffsets) read(context.Context, MessageQueue) (int64, error) { return -1, nil }

func (s *blockingOffsets) commit(_ context.Context, offs map[MessageQueue]int64) error {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.release
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.last, offs)
	return nil
}

// TestPushConsumer_CommitsInOrder: a periodic commit that read a queue's
// offset before a rebalance dropped the queue, and is slow to be answered,
// does not land after the dropped queue's final commit: the next owner
// starts where this one stopped, not at the older offset (found as an
// orderly queue's messages handled twice after it moved, under -race).
// Once dropped, the queue is no longer in periodic commits.
func TestPushConsumer_CommitsInOrder(t *testing.T) {
	store := &blockingOffsets{entered: make(chan struct{}), release: make(chan struct{}), last: map[MessageQueue]int64{}}
	c := &PushConsumer{group: "g", offsets: store}
	q := MessageQueue{Topic: "t", BrokerName: "b", QueueID: 0}
	pq := newProcessQueue(q)
	pq.start(5)
	ctx := context.Background()

	periodic := make(chan error, 1)
	go func() { periodic <- c.persist(ctx, []*processQueue{pq}, true) }()
	<-store.entered // it read 5 and waits for its answer
	pq.setNext(9)   // the queue moved on, then a rebalance dropped it
	pq.drop()
	final := make(chan error, 1)
	go func() { final <- c.persist(ctx, []*processQueue{pq}, false) }()
	// It waits for the periodic one (or, were commits not serialised,
	// lands first).
	require.Eventually(t, func() bool { return c.commitWaits.Load() == 1 || len(final) == 1 }, 10*time.Second, time.Millisecond)
	close(store.release)
	require.NoError(t, <-periodic)
	require.NoError(t, <-final)
	require.Equal(t, map[MessageQueue]int64{q: 9}, store.last, "the final commit lands last")
	require.Equal(t, 2, store.calls)

	pq.setNext(12) // NB: nothing moves a dropped queue; this shows it is skipped
	require.NoError(t, c.persist(ctx, []*processQueue{pq}, true))
	require.Equal(t, 2, store.calls, "a dropped queue is not committed periodically")
}
