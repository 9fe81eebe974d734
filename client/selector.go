package client

import (
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// QueueSelector picks the queue a message is sent to.
//
// Select gets the message and the candidate queues, never empty, sorted by
// broker name and queue id (for an ordered topic whose route carries an
// order config, in that config's order, as the official client has them);
// it must return one of them and be safe for
// concurrent use. For the default RoundRobinSelector the producer has
// already removed queues of brokers it is avoiding (slow, failing, or the
// one the previous attempt failed on); other selectors see every writable
// queue of the topic, so a retry picks the same queue again and order is
// kept.
type QueueSelector interface {
	Select(m *Message, queues []MessageQueue) MessageQueue
}

// faultAware marks selectors whose candidates may be filtered by fault
// avoidance.
type faultAware interface{ avoidsFaults() }

type roundRobin struct{ n atomic.Uint64 }

// RoundRobinSelector returns the default selector: queues in turn from a
// random one (so producers that each send a few messages spread them, as
// RocketMQ's clients do), skipping brokers the producer is avoiding.
func RoundRobinSelector() QueueSelector { s := &roundRobin{}; s.n.Store(rand.Uint64()); return s }

func (s *roundRobin) Select(_ *Message, queues []MessageQueue) MessageQueue {
	return queues[(s.n.Add(1)-1)%uint64(len(queues))]
}

func (s *roundRobin) avoidsFaults() {}

type hashSelector struct{ rr roundRobin }

// HashSelector returns a selector that sends messages with equal
// ShardingKey to the same queue (FNV-1a of the key modulo the queue
// count), for orderly consumption per key. Messages without a sharding key
// go round robin. The mapping changes when the topic's queue count does.
func HashSelector() QueueSelector { return &hashSelector{} }

func (s *hashSelector) Select(m *Message, queues []MessageQueue) MessageQueue {
	if m.ShardingKey == "" {
		return s.rr.Select(m, queues)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(m.ShardingKey))
	return queues[h.Sum32()%uint32(len(queues))]
}

type manualSelector struct{}

// ManualSelector returns a selector that sends each message to its Queue
// field (topic, broker name and queue id). A queue the route does not hold
// fails the send with ErrNoRoute.
func ManualSelector() QueueSelector { return manualSelector{} }

func (manualSelector) Select(m *Message, _ []MessageQueue) MessageQueue {
	q := m.Queue
	if q.Topic == "" {
		q.Topic = m.Topic
	}
	return q
}

// faultTracker is the latency-based broker avoidance of a producer: a broker
// whose send failed, or answered slowly, is avoided for a while. Avoidance
// only orders the candidates: when every broker is avoided, all are used.
type faultTracker struct {
	isolation time.Duration

	mu    sync.Mutex
	until map[string]time.Time // guarded by mu: broker name → avoided until
}

// latencyPenalty maps a send's latency to how long its broker is avoided
// (RocketMQ's latencyMax/notAvailableDuration table, shortened).
var latencyPenalty = []struct{ latency, avoid time.Duration }{
	{3 * time.Second, 60 * time.Second},
	{2 * time.Second, 30 * time.Second},
	{1 * time.Second, 10 * time.Second},
	{550 * time.Millisecond, 5 * time.Second},
}

func newFaultTracker(isolation time.Duration) *faultTracker {
	return &faultTracker{isolation: isolation, until: make(map[string]time.Time)}
}

// record notes the outcome of a send to broker.
func (f *faultTracker) record(broker string, latency time.Duration, failed bool) {
	var avoid time.Duration
	if failed {
		avoid = f.isolation
	} else {
		for _, p := range latencyPenalty {
			if latency >= p.latency {
				avoid = p.avoid
				break
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if avoid <= 0 {
		delete(f.until, broker)
		return
	}
	f.until[broker] = time.Now().Add(avoid)
}

// avoided reports whether broker is being avoided now.
func (f *faultTracker) avoided(broker string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Before(f.until[broker])
}

// candidates returns the queues of brokers not avoided and other than last;
// failing that, the queues other than last's; failing that, all of them.
func (f *faultTracker) candidates(queues []MessageQueue, last string) []MessageQueue {
	f.mu.Lock()
	if last == "" && len(f.until) == 0 {
		// NB: the common case, every broker healthy: no copy, no clock.
		f.mu.Unlock()
		return queues
	}
	now := time.Now()
	good := make([]MessageQueue, 0, len(queues))
	for _, q := range queues {
		if q.BrokerName != last && !now.Before(f.until[q.BrokerName]) {
			good = append(good, q)
		}
	}
	f.mu.Unlock()
	if len(good) > 0 {
		return good
	}
	for _, q := range queues {
		if q.BrokerName != last {
			good = append(good, q)
		}
	}
	if len(good) > 0 {
		return good
	}
	return queues
}
