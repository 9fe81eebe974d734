package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/conf"
	"github.com/stretchr/testify/require"
)

// TestPushConsumer_ReadsFromSlaveWhileMasterDown: a consumer behind its
// master when the master goes down keeps reading the rest from the slave
// (it stopped where it was and pulled the dead master: "no master address
// for broker"), a new pull consumer reads from the slave too, and each is
// told its reads moved.
func TestPushConsumer_ReadsFromSlaveWhileMasterDown(t *testing.T) {
	c := &cluster{t: t, ns: startNamesrv(t)}
	mc := brokerConfig(t, c.ns.Addr(), "broker-a", t.TempDir())
	master, err := broker.New(mc, broker.Options{Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, master.Start())
	t.Cleanup(func() { master.Close() })
	c.brokers, c.cfgs = append(c.brokers, master), append(c.cfgs, mc)
	sc := brokerConfig(t, c.ns.Addr(), "broker-a", t.TempDir())
	sc.Role, sc.BrokerID = conf.RoleSlave, 1
	slave, err := broker.New(sc, broker.Options{Logger: quiet(), MetaSyncInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, slave.Start())
	t.Cleanup(func() { slave.Close() })
	c.waitRoute("TBW102", 1)

	const n = 120
	c.createTopic("orders", 2)
	sendN(t, c.producer(), "orders", "m", n, nil)
	require.Eventually(t, func() bool {
		return slave.Store().Log().Next() == master.Store().Log().Next() && slave.Store().DispatchLag() == 0
	}, 20*time.Second, 10*time.Millisecond, "the slave has every message")

	var notices atomic.Int64
	notice := WithSlaveReadNotice(func(broker, addr string) {
		if broker == "broker-a" && addr == slave.Addr() {
			notices.Add(1)
		}
	})
	first, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	got := map[string]bool{}
	c.pushConsumer("g", "orders", func(_ context.Context, msgs []*Message) ConsumeResult {
		once.Do(func() { close(first); <-release }) // NB: behind when the master goes
		mu.Lock()
		for _, m := range msgs {
			got[string(m.Body)] = true
		}
		mu.Unlock()
		return ConsumeSuccess
	}, WithConsumeFrom(ConsumeFromFirst), WithConsumeGoroutines(1), WithPullBatchSize(1), WithPullThreshold(1, 1<<20), notice)
	select {
	case <-first:
	case <-time.After(20 * time.Second):
		t.Fatal("no message consumed")
	}
	require.NoError(t, master.Close())
	close(release)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	}, 30*time.Second, 10*time.Millisecond, "every message, the rest from the slave")
	require.Positive(t, notices.Load(), "the consumer was told its reads moved to the slave")

	// A send says what is true: the topic exists, its group has no master.
	_, err = c.producer(WithRetries(0)).Send(ctxT(t, 10*time.Second), &Message{Topic: "orders", Body: []byte("x")})
	require.ErrorIs(t, err, ErrNoRoute)
	require.ErrorContains(t, err, "orders: the topic exists but no queue takes sends: broker group broker-a has no master")
	require.NotContains(t, err.Error(), "TBW102")

	pc, err := NewPullConsumer("fresh", c.opts(notice)...)
	require.NoError(t, err)
	require.NoError(t, pc.Start())
	t.Cleanup(func() { pc.Close() })
	total := 0
	for q := range 2 {
		mq := MessageQueue{Topic: "orders", BrokerName: "broker-a", QueueID: q}
		for off := int64(0); ; {
			res, err := pc.Pull(ctxT(t, 10*time.Second), mq, off, 32)
			require.NoError(t, err, "queue %d at %d", q, off)
			if res.Status != PullFound {
				break
			}
			total += len(res.Messages)
			off = res.NextOffset
		}
		require.NoError(t, pc.CommitOffset(ctxT(t, 10*time.Second), mq, 5), "offsets go to the slave meanwhile")
	}
	require.Equal(t, n, total, fmt.Sprintf("a new consumer reads all %d from the slave", n))
}
