package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder collects deliveries.
type recorder struct {
	mu     sync.Mutex
	count  map[string]int             // by body
	byKey  map[string][]string        // sharding key → bodies in delivery order
	msgs   []*Message                 // every delivery
	byCons map[string]map[string]bool // consumer → bodies
}

func newRecorder() *recorder {
	return &recorder{count: map[string]int{}, byKey: map[string][]string{}, byCons: map[string]map[string]bool{}}
}

func (r *recorder) handler(name string) Handler {
	return func(_ context.Context, msgs []*Message) ConsumeResult {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, m := range msgs {
			b := string(m.Body)
			r.count[b]++
			r.msgs = append(r.msgs, m)
			if m.ShardingKey != "" {
				r.byKey[m.ShardingKey] = append(r.byKey[m.ShardingKey], b)
			}
			if r.byCons[name] == nil {
				r.byCons[name] = map[string]bool{}
			}
			r.byCons[name][b] = true
		}
		return ConsumeSuccess
	}
}

// distinct returns how many different bodies arrived.
func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.count)
}

// duplicates returns deliveries beyond the first of each body.
func (r *recorder) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := 0
	for _, n := range r.count {
		d += n - 1
	}
	return d
}

func (r *recorder) waitDistinct(t *testing.T, n int, d time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return r.distinct() >= n }, d, 20*time.Millisecond,
		"want %d distinct messages", n)
}

// consumerOpts are fast timings for tests.
func (c *cluster) consumerOpts(extra ...Option) []Option {
	return c.opts(append([]Option{WithRebalanceInterval(time.Second), WithCommitInterval(200 * time.Millisecond),
		WithPullBackoff(200 * time.Millisecond), WithLongPolling(5*time.Second, 10*time.Second),
		WithLockInterval(time.Second)}, extra...)...)
}

// pushConsumer starts a push consumer of group on topic.
func (c *cluster) pushConsumer(group, topic string, h Handler, extra ...Option) *PushConsumer {
	c.t.Helper()
	pc, err := NewPushConsumer(group, c.consumerOpts(extra...)...)
	require.NoError(c.t, err)
	require.NoError(c.t, pc.Subscribe(topic, "*", h))
	require.NoError(c.t, pc.Start())
	c.t.Cleanup(func() { pc.Close() })
	return pc
}

// owned returns the queues of topic a consumer currently pulls, with their
// start offset known.
func owned(pc *PushConsumer, topic string) []MessageQueue {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var out []MessageQueue
	for mq, pq := range pc.queues {
		if mq.Topic == topic && pq.offset.Load() >= 0 {
			out = append(out, mq)
		}
	}
	slices.SortFunc(out, compareQueues)
	return out
}

// waitBalanced waits until the consumers own every queue of topic exactly
// once between them, each its share.
func waitBalanced(t *testing.T, topic string, queues int, pcs ...*PushConsumer) {
	t.Helper()
	require.Eventually(t, func() bool {
		seen := map[MessageQueue]bool{}
		for _, pc := range pcs {
			mine := owned(pc, topic)
			if len(mine) < queues/len(pcs) {
				return false
			}
			for _, q := range mine {
				if seen[q] {
					return false
				}
				seen[q] = true
			}
		}
		return len(seen) == queues
	}, 30*time.Second, 20*time.Millisecond, "queues of %s balanced over %d consumers", topic, len(pcs))
}

// sendN sends n messages with bodies prefix-0 … prefix-(n-1).
func sendN(t *testing.T, p *Producer, topic, prefix string, n int, mod func(i int, m *Message)) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	for i := range n {
		m := &Message{Topic: topic, Body: fmt.Appendf(nil, "%s-%d", prefix, i)}
		if mod != nil {
			mod(i, m)
		}
		_, err := p.Send(ctx, m)
		require.NoError(t, err)
	}
}
