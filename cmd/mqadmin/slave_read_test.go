package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/conf"
	"github.com/stretchr/testify/require"
)

// TestReadTools_FallBackToSlave: with the master of broker-a down, the
// read-only commands answer from its slave and say so on stderr (they
// answered "no master address for broker broker-a" and an empty table).
func TestReadTools_FallBackToSlave(t *testing.T) {
	c := startCluster(t)
	sc := conf.DefaultBroker()
	sc.Listen = "127.0.0.1:0"
	sc.Store.Dir = t.TempDir()
	sc.Store.SegmentSize = 8 << 20
	sc.Store.ConsumeQueueEntries = 1000
	sc.NamesrvAddr = c.ns
	sc.RegisterInterval = 100 * time.Millisecond
	sc.Role, sc.BrokerID = conf.RoleSlave, 1
	slave, err := broker.New(sc, broker.Options{Logger: quiet(), MetaSyncInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, slave.Start())
	t.Cleanup(func() { slave.Close() })

	c.ok(t, "updateTopic", "-t", "orders", "-b", c.broker, "-r", "1", "-w", "1")
	c.waitRoute(t, "orders")
	for _, body := range []string{"one", "two", "three"} {
		c.ok(t, "sendMessage", "-t", "orders", "-p", body)
	}
	require.Eventually(t, func() bool {
		return slave.Store().Log().Next() == c.b.Store().Log().Next() && slave.Store().DispatchLag() == 0 &&
			slave.Store().MaxOffset("orders", 0) == 3
	}, 20*time.Second, 10*time.Millisecond, "the slave has every message")
	require.NoError(t, c.b.Close())
	require.Eventually(t, func() bool {
		r := c.mq(t, "topicRoute", "-t", "orders")
		return r.code == exitOK && !strings.Contains(r.stdout, c.broker)
	}, 10*time.Second, 20*time.Millisecond, "the master left the routes")

	note := "broker broker-a has no master in the routes (it is down): reading from its slave at " + slave.Addr()
	r := c.mq(t, "topicStatus", "-t", "orders")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, note)
	require.Regexp(t, `broker-a\s+0\s+0\s+3`, r.stdout)

	r = c.mq(t, "consumeMessage", "-t", "orders", "-c", "10")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, note)
	for _, body := range []string{"one", "two", "three"} {
		require.Contains(t, r.stdout, body)
	}

	r = c.mq(t, "queryMsgByOffset", "-t", "orders", "-b", "broker-a", "-i", "0", "-o", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "two")

	// Errors say what is true: the group has no master.
	r = c.mq(t, "consumerProgress", "-g", "ops")
	require.NotContains(t, r.stderr, `no master broker registered in cluster ""`)
	require.Contains(t, r.stderr, note)
	r = c.mq(t, "sendMessage", "-t", "orders", "-p", "four")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "broker group broker-a has no master")
	require.NotContains(t, r.stderr, "TBW102")
	r = c.mq(t, "updateSubGroup", "-g", "ops", "-c", "DefaultCluster")
	require.Contains(t, r.stderr, "no master broker registered in cluster \"DefaultCluster\": broker-a has only slaves (the master is down)")
}
