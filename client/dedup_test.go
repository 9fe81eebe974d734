package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

// losingBroker is a broker that loses the answers of the next sends it
// stores (as a network that drops replies would): the producer's attempt
// times out and it sends again.
type losingBroker struct {
	*broker.Broker
	lose atomic.Int64 // answers still to lose
	lost atomic.Int64 // answers lost so far
}

func startLosingBroker(t *testing.T, c *cluster, window time.Duration) *losingBroker {
	t.Helper()
	cfg := brokerConfig(t, c.ns.Addr(), "broker-a", t.TempDir())
	cfg.Dedup.Window = window
	lb := &losingBroker{}
	b, err := broker.New(cfg, broker.Options{Logger: quiet(), LoseSendAnswer: func(*remoting.Command) bool {
		if lb.lose.Add(-1) >= 0 {
			lb.lost.Add(1)
			return true
		}
		return false
	}})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })
	lb.Broker = b
	c.brokers = append(c.brokers, b)
	c.cfgs = append(c.cfgs, cfg)
	c.waitRoute("TBW102", 1)
	return lb
}

// storedCount is the number of messages stored in topic's queues.
func storedCount(b *broker.Broker, topic string, queues int) int64 {
	n := int64(0)
	for q := range queues {
		n += b.Store().QueueNext(topic, int32(q))
	}
	return n
}

// checkFirstCopy checks that res names the one stored copy of its message.
func checkFirstCopy(t *testing.T, a *Admin, res SendResult) {
	t.Helper()
	ids, offIDs := strings.Split(res.MsgID, ","), strings.Split(res.OffsetMsgID, ",")
	require.Len(t, offIDs, len(ids))
	for i := range ids {
		got, err := a.QueryByID(t.Context(), offIDs[i])
		require.NoError(t, err)
		require.Equal(t, ids[i], got.MsgID, "the answer names the stored copy")
	}
}

// TestProducer_ResendAfterLostAnswer: a send whose answer is lost is sent
// again by the producer; the broker answers the resend with the first
// copy's ids and stores nothing more. Sync, async and batch sends; with
// the window off every resend is a second copy (the comparison).
func TestProducer_ResendAfterLostAnswer(t *testing.T) {
	const n = 4
	for _, tc := range []struct {
		name string
		send func(ctx context.Context, p *Producer, i int) (SendResult, error)
		msgs int // per send
	}{
		{"sync", func(ctx context.Context, p *Producer, i int) (SendResult, error) {
			return p.Send(ctx, &Message{Topic: "dedup", Body: fmt.Appendf(nil, "m%d", i)})
		}, 1},
		{"async", func(ctx context.Context, p *Producer, i int) (SendResult, error) {
			ch := make(chan SendResult, 1)
			var err error
			p.SendAsync(ctx, &Message{Topic: "dedup", Body: fmt.Appendf(nil, "m%d", i)}, func(r SendResult, e error) {
				err = e
				ch <- r
			})
			r := <-ch
			return r, err
		}, 1},
		{"batch", func(ctx context.Context, p *Producer, i int) (SendResult, error) {
			return p.SendBatch(ctx, []*Message{{Topic: "dedup", Body: fmt.Appendf(nil, "m%d-0", i)},
				{Topic: "dedup", Body: fmt.Appendf(nil, "m%d-1", i)}, {Topic: "dedup", Body: fmt.Appendf(nil, "m%d-2", i)}})
		}, 3},
	} {
		for _, window := range []time.Duration{2 * time.Minute, 0} {
			t.Run(fmt.Sprintf("%s/window=%s", tc.name, window), func(t *testing.T) {
				c := &cluster{t: t, ns: startNamesrv(t)}
				lb := startLosingBroker(t, c, window)
				c.createTopic("dedup", 2)
				p := c.producer(WithSendTimeout(300*time.Millisecond), WithRetries(2))
				for i := range n {
					lb.lose.Store(1)
					res, err := tc.send(ctxT(t, 20*time.Second), p, i)
					require.NoError(t, err)
					require.Equal(t, SendOK, res.Status)
					require.Equal(t, window > 0, res.Duplicate, "the answer says it was a resend")
					if window > 0 {
						checkFirstCopy(t, c.admin(), res)
					}
				}
				require.Equal(t, int64(n), lb.lost.Load(), "one answer lost per send")
				copies := int64(n * tc.msgs)
				if window == 0 {
					copies *= 2 // NB: the comparison: every resend stored again
				}
				require.Equal(t, copies, storedCount(lb.Broker, "dedup", 2))
			})
		}
	}
}

// TestProducer_ResendRaceOneCopy: many producers' sends of the same ids
// (one message object each, sent concurrently from several goroutines)
// store each id once.
func TestProducer_ResendRaceOneCopy(t *testing.T) {
	c := &cluster{t: t, ns: startNamesrv(t)}
	lb := startLosingBroker(t, c, time.Minute)
	c.createTopic("dedup", 4)
	p := c.producer()
	const ids, senders = 20, 4
	var wg sync.WaitGroup
	var dups atomic.Int64
	for range senders {
		wg.Go(func() {
			for i := range ids {
				m := &Message{Topic: "dedup", Body: []byte("x"), MsgID: fmt.Sprintf("%032d", i)}
				res, err := p.Send(ctxT(t, 20*time.Second), m)
				if !(assertNoErr(t, err)) {
					return
				}
				if res.Duplicate {
					dups.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(ids), storedCount(lb.Broker, "dedup", 4))
	require.Equal(t, int64(ids*(senders-1)), dups.Load())
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
