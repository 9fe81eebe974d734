package client

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// cluster is an in-process nameserver with brokers registered to it.
type cluster struct {
	t       testing.TB
	ns      *nameserver.Server
	brokers []*broker.Broker
	cfgs    []conf.Broker
	auth    []Option // options every client of the cluster gets first (credentials)
}

func startNamesrv(t testing.TB) *nameserver.Server {
	t.Helper()
	cfg := conf.DefaultNameserver()
	cfg.Listen = "127.0.0.1:0"
	ns, err := nameserver.New(cfg, quiet())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })
	return ns
}

func brokerConfig(t testing.TB, nsAddr, name, dir string) conf.Broker {
	c := conf.DefaultBroker()
	c.BrokerName = name
	c.Listen = "127.0.0.1:0"
	c.NamesrvAddr = nsAddr
	c.RegisterInterval = 200 * time.Millisecond
	c.Store.Dir = dir
	c.Store.SegmentSize = 8 << 20
	c.Store.ConsumeQueueEntries = 10000
	return c
}

func startBrokerCfg(t testing.TB, c conf.Broker) *broker.Broker {
	t.Helper()
	b, err := broker.New(c, broker.Options{Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })
	return b
}

// newCluster starts a nameserver and n brokers (broker-a, broker-b, …).
func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, ns: startNamesrv(t)}
	for i := range n {
		c.addBroker(fmt.Sprintf("broker-%c", 'a'+i))
	}
	return c
}

func (c *cluster) addBroker(name string) *broker.Broker {
	cfg := brokerConfig(c.t, c.ns.Addr(), name, c.t.TempDir())
	b := startBrokerCfg(c.t, cfg)
	c.brokers = append(c.brokers, b)
	c.cfgs = append(c.cfgs, cfg)
	c.waitRoute("TBW102", len(c.brokers))
	return b
}

// opts returns the options every test client uses.
func (c *cluster) opts(extra ...Option) []Option {
	return append(append([]Option{WithNameServers(c.ns.Addr()), WithLogger(quiet()),
		WithRouteRefreshInterval(200 * time.Millisecond), WithHeartbeatInterval(500 * time.Millisecond)}, c.auth...), extra...)
}

// waitRoute waits until topic's route lists brokers brokers.
func (c *cluster) waitRoute(topic string, brokers int) {
	c.t.Helper()
	a := c.admin()
	require.Eventually(c.t, func() bool {
		r, err := a.TopicRoute(context.Background(), topic)
		return err == nil && len(r.Queues) == brokers
	}, 10*time.Second, 20*time.Millisecond, "route of %s", topic)
}

var adminOnce sync.Map // testing.TB → *Admin

func (c *cluster) admin() *Admin {
	if a, ok := adminOnce.Load(c.t); ok {
		return a.(*Admin)
	}
	a, err := NewAdmin(c.opts()...)
	require.NoError(c.t, err)
	adminOnce.Store(c.t, a)
	c.t.Cleanup(func() { a.Close(); adminOnce.Delete(c.t) })
	return a
}

// createTopic creates topic with q queues on every broker and waits for its
// route.
func (c *cluster) createTopic(topic string, q int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.t, c.admin().CreateTopic(ctx, TopicSpec{Topic: topic, ReadQueues: q, WriteQueues: q}))
	c.waitRoute(topic, len(c.brokers))
}

func (c *cluster) producer(extra ...Option) *Producer {
	c.t.Helper()
	p, err := NewProducer(c.opts(extra...)...)
	require.NoError(c.t, err)
	require.NoError(c.t, p.Start())
	c.t.Cleanup(func() { p.Close() })
	return p
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
