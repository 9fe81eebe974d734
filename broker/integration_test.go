package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/nameserver"
	"github.com/stretchr/testify/require"
)

func startNamesrv(t *testing.T, listen string) *nameserver.Server {
	t.Helper()
	cfg := conf.DefaultNameserver()
	cfg.Listen = listen
	ns, err := nameserver.New(cfg, quiet())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })
	return ns
}

// restartNamesrv starts a nameserver on the address of one just closed: the
// address may still be in use (EADDRINUSE) for a moment, so listening is
// retried for a few seconds.
func restartNamesrv(t *testing.T, listen string) *nameserver.Server {
	t.Helper()
	cfg := conf.DefaultNameserver()
	cfg.Listen = listen
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var ns *nameserver.Server
		if ns, err = nameserver.New(cfg, quiet()); err != nil {
			break
		}
		if err = ns.Start(); err == nil {
			t.Cleanup(func() { ns.Close() })
			return ns
		}
		ns.Close()
		if time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, err, "restart on %s", listen)
	return nil
}

// route asks a nameserver for a topic's route; nil when it has none.
func route(t *testing.T, c *remoting.Client, ns, topic string) *protocol.TopicRouteData {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, ns, remoting.NewRequest(protocol.GetRouteInfoByTopic, protocol.Ext(&protocol.GetRouteInfoRequestHeader{Topic: topic}), nil))
	if err != nil || resp.Code != protocol.Success {
		return nil
	}
	var r protocol.TopicRouteData
	require.NoError(t, remoting.DecodeBody(resp.SerializeType, resp.Body, &r))
	return &r
}

// TestIntegration_Registration: a broker registers its topics (TBW102 and
// auto-created ones at once), disappears from routes when it stops, and
// registers again after a nameserver restart.
func TestIntegration_Registration(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	nsAddr := ns.Addr()
	cfg := testConfig(t.TempDir())
	cfg.NamesrvAddr = nsAddr
	cfg.RegisterInterval = 100 * time.Millisecond
	cfg.EmbeddedNamesrv.BrokerExpiry = time.Minute
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	require.Eventually(t, func() bool { return route(t, c, nsAddr, "TBW102") != nil }, 10*time.Second, 10*time.Millisecond)
	r := route(t, c, nsAddr, "TBW102")
	require.Equal(t, b.Addr(), r.BrokerDatas[0].BrokerAddrs[0])
	require.Equal(t, int32(7), r.QueueDatas[0].Perm, "the auto-create template is inheritable")

	mustSend(t, c, b.Addr(), "fresh", 0, "x", nil)
	require.Eventually(t, func() bool { return route(t, c, nsAddr, "fresh") != nil }, 10*time.Second, 10*time.Millisecond,
		"an auto-created topic is registered at once")
	require.Equal(t, int32(4), route(t, c, nsAddr, "fresh").QueueDatas[0].WriteQueueNums)

	// Nameserver restart on the same address: the broker registers again.
	require.NoError(t, ns.Close())
	ns2 := restartNamesrv(t, nsAddr)
	require.Equal(t, nsAddr, ns2.Addr())
	require.Eventually(t, func() bool { return route(t, c, nsAddr, "fresh") != nil }, 10*time.Second, 20*time.Millisecond,
		"re-registration after a nameserver restart")

	// The broker stops: it is gone from routes at once.
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return route(t, c, nsAddr, "fresh") == nil }, 5*time.Second, 10*time.Millisecond)
}
