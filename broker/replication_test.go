package broker

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
)

// groupConfigs returns a master's and a slave's configuration registering
// with the nameserver at ns.
func groupConfigs(t *testing.T, ns string, role string) (master, slave conf.Broker) {
	master = testConfig(t.TempDir())
	master.NamesrvAddr, master.Role, master.RegisterInterval = ns, role, 50*time.Millisecond
	master.HA.SyncTimeout = 2 * time.Second
	slave = testConfig(t.TempDir())
	slave.NamesrvAddr, slave.Role, slave.BrokerID, slave.RegisterInterval = ns, conf.RoleSlave, 1, 50*time.Millisecond
	return master, slave
}

// requireSameLog checks that the slave's log equals the master's byte for
// byte.
func requireSameLog(t *testing.T, master, slave *commitlog.Log) {
	t.Helper()
	require.Equal(t, master.Next(), slave.Next())
	a, b := make([]byte, 64<<10), make([]byte, 64<<10)
	for at := master.Min(); at < master.Next(); {
		n, _ := master.ReadAt(a, at)
		m, _ := slave.ReadAt(b[:n], at)
		require.Equal(t, n, m)
		require.True(t, bytes.Equal(a[:n], b[:n]), "logs differ in [%d, %d)", at, at+commitlog.Offset(n))
		at += commitlog.Offset(n)
	}
}

// TestReplication_SyncMasterGroup runs a SYNC_MASTER and its slave with a
// nameserver: sends are answered SLAVE_NOT_AVAILABLE before the slave
// connects, SUCCESS once it has them; the slave's log equals the master's,
// it serves pulls of the same messages, keeps the master's topics and
// offsets and not its pullers', and refuses sends.
func TestReplication_SyncMasterGroup(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	mc, sc := groupConfigs(t, ns.Addr(), conf.RoleSyncMaster)
	master := startBroker(t, mc, Options{})
	c := newClient(t, remoting.SerializeJSON)

	resp := send(t, c, master.Addr(), "orders", 0, "before-slave", nil)
	require.Equal(t, protocol.SlaveNotAvailable, int(resp.Code), resp.Remark)
	var h protocol.SendMessageResponseHeader
	require.NoError(t, h.FromExt(resp.ExtFields), "stored: the answer carries its ids")
	require.NotEmpty(t, h.MsgID)

	slave := startBroker(t, sc, Options{MetaSyncInterval: 50 * time.Millisecond})
	require.Eventually(t, func() bool { return len(master.repl.master.Load().Status().Slaves) == 1 }, 10*time.Second, time.Millisecond)
	// NB: a slave counts once it acknowledged the master's end.
	require.Eventually(t, func() bool { return master.repl.master.Load().Status().Acked == int64(master.Store().Log().Next()) },
		10*time.Second, time.Millisecond)
	bodies := seq("m", 100)
	for _, body := range bodies {
		mustSend(t, c, master.Addr(), "orders", 0, body, nil)
	}
	// Every acknowledged send is on the slave already (SYNC_MASTER).
	require.GreaterOrEqual(t, slave.Store().ReplicaOffset(), int64(master.Store().Log().Next()))
	require.Eventually(t, func() bool { return slave.Store().Log().Next() == master.Store().Log().Next() }, 10*time.Second, time.Millisecond)
	requireSameLog(t, master.Store().Log(), slave.Store().Log())

	// Metadata follows the master: the topic, and a committed offset.
	commit := &protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "g", Topic: "orders", QueueID: 0, CommitOffset: 42}
	require.Equal(t, protocol.Success, int(invoke(t, c, master.Addr(), protocol.UpdateConsumerOffset, commit, nil).Code))
	require.Eventually(t, func() bool {
		_, ok := slave.topics.Get("orders")
		off, _ := slave.offsets.Query("g", "orders", 0)
		return ok && off == 42
	}, 10*time.Second, 5*time.Millisecond)

	// The slave serves the same messages.
	waitIndexed(t, slave)
	heartbeat(t, c, remoting.SerializeJSON, slave.Addr(), "cid", "g", map[string]string{"orders": "*"})
	var got []string
	for off := int64(0); len(got) < 101; {
		resp := invoke(t, c, slave.Addr(), protocol.PullMessage, pullHeader("g", "orders", 0, off, pullCommitOffset), nil)
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		got = append(got, recordBodies(t, resp.Body)...)
		off = pullExt(t, resp).NextBeginOffset
	}
	require.Equal(t, append([]string{"before-slave"}, bodies...), got)
	off, _ := slave.offsets.Query("g", "orders", 0)
	require.Equal(t, int64(42), off, "a slave does not commit its pullers' offsets")

	// A slave refuses sends, saying why.
	resp = send(t, c, slave.Addr(), "orders", 0, "to-slave", nil)
	require.Equal(t, protocol.ServiceNotAvailable, int(resp.Code))
	require.Contains(t, resp.Remark, "slave")
	require.Equal(t, "replicating", slave.replicationStatus()["haState"])

	// The slave gone, sends are stored and answered at once.
	require.NoError(t, slave.Close())
	require.Eventually(t, func() bool {
		return send(t, c, master.Addr(), "orders", 0, "after-slave", nil).Code == protocol.SlaveNotAvailable
	}, 10*time.Second, 10*time.Millisecond)
}

// TestReplication_AsyncMasterSlaveRestarts: an ASYNC_MASTER answers at
// once; a slave that restarts continues from its own end, and the logs end
// equal after master segment rolls.
func TestReplication_AsyncMasterSlaveRestarts(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	mc, sc := groupConfigs(t, ns.Addr(), conf.RoleAsyncMaster)
	mc.Store.SegmentSize, mc.Store.MaxMessageSize = 256<<10, 64<<10
	sc.Store.SegmentSize, sc.Store.MaxMessageSize = 256<<10, 64<<10
	mc.MetricsListen = "127.0.0.1:0"
	master := startBroker(t, mc, Options{})
	c := newClient(t, remoting.SerializeJSON)
	body := string(bytes.Repeat([]byte("x"), 2000))
	for i := range 100 {
		mustSend(t, c, master.Addr(), "t", int32(i%4), body, nil)
	}
	slave, err := New(sc, Options{Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, slave.Start())
	for round := range 3 {
		for i := range 100 {
			mustSend(t, c, master.Addr(), "t", int32(i%4), fmt.Sprintf("%d-%d-%s", round, i, body), nil)
		}
		require.Eventually(t, func() bool { return slave.Store().Log().Next() == master.Store().Log().Next() }, 10*time.Second, time.Millisecond)
		require.NoError(t, slave.Close())
		slave, err = New(sc, Options{Logger: quiet()})
		require.NoError(t, err)
		require.NoError(t, slave.Start())
	}
	defer slave.Close()
	require.Eventually(t, func() bool { return slave.Store().Log().Next() == master.Store().Log().Next() }, 10*time.Second, time.Millisecond)
	require.Greater(t, int64(master.Store().Log().Next()), int64(3*mc.Store.SegmentSize))
	requireSameLog(t, master.Store().Log(), slave.Store().Log())
	waitIndexed(t, master)
	waitIndexed(t, slave)
	for q := range int32(4) {
		require.Equal(t, master.Store().MaxOffset("t", q), slave.Store().MaxOffset("t", q), "queue %d", q)
	}
	// Caught up, the lag the master reports is zero, in its status and
	// its metrics.
	require.Eventually(t, func() bool {
		st := master.repl.master.Load().Status()
		return len(st.Slaves) == 1 && st.Slaves[0].LagBytes == 0 && st.Slaves[0].LagSeconds == 0
	}, 10*time.Second, time.Millisecond)
	get := scrape(t, master.MetricsAddr())
	sent, ok := get("sluice_ha_bytes_sent_total", nil)
	require.True(t, ok)
	require.GreaterOrEqual(t, sent, float64(master.Store().Log().Next()), "the restarts re-sent nothing lost")
	slaveAddr := master.repl.master.Load().Status().Slaves[0].Addr
	lag, ok := get("sluice_ha_slave_lag_bytes", map[string]string{"slave": slaveAddr})
	require.True(t, ok)
	require.Equal(t, 0.0, lag)
}

// TestReplication_ReplaceLostMaster runs the README's procedure for a
// master whose disk is lost: the slave restarts as the master on its own
// store, a new empty slave copies everything from it, and nothing
// acknowledged is lost.
func TestReplication_ReplaceLostMaster(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	mc, sc := groupConfigs(t, ns.Addr(), conf.RoleSyncMaster)
	master := startBroker(t, mc, Options{})
	slave, err := New(sc, Options{Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, slave.Start())
	c := newClient(t, remoting.SerializeJSON)
	var acked []string
	require.Eventually(t, func() bool {
		st := master.repl.master.Load().Status()
		return len(st.Slaves) == 1 && st.Slaves[0].Acked == int64(master.Store().Log().Next())
	}, 10*time.Second, time.Millisecond)
	for _, body := range seq("a", 50) {
		mustSend(t, c, master.Addr(), "t", 0, body, nil)
		acked = append(acked, body)
	}
	// The master's machine is gone; the slave becomes the master.
	require.NoError(t, master.Close())
	require.NoError(t, slave.Close())
	nc := sc
	nc.Role, nc.BrokerID = conf.RoleAsyncMaster, 0
	newMaster := startBroker(t, nc, Options{})
	for _, body := range seq("b", 50) {
		mustSend(t, c, newMaster.Addr(), "t", 0, body, nil)
		acked = append(acked, body)
	}
	// A new, empty slave copies everything.
	_, ec := groupConfigs(t, ns.Addr(), conf.RoleSyncMaster)
	empty := startBroker(t, ec, Options{})
	require.Eventually(t, func() bool { return empty.Store().Log().Next() == newMaster.Store().Log().Next() }, 10*time.Second, time.Millisecond)
	requireSameLog(t, newMaster.Store().Log(), empty.Store().Log())
	waitIndexed(t, empty)
	heartbeat(t, c, remoting.SerializeJSON, empty.Addr(), "cid", "g", map[string]string{"t": "*"})
	var got []string
	for off := int64(0); len(got) < len(acked); {
		resp := invoke(t, c, empty.Addr(), protocol.PullMessage, pullHeader("g", "t", 0, off, 0), nil)
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		got = append(got, recordBodies(t, resp.Body)...)
		off = pullExt(t, resp).NextBeginOffset
	}
	require.Equal(t, acked, got)
}

// TestReplication_AdvertisedAddresses runs the group on distinct loopback
// addresses: the slave reaches the master's HA port only at the address
// the master registered, and clients are told each member's own address.
func TestReplication_AdvertisedAddresses(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	mc, sc := groupConfigs(t, ns.Addr(), conf.RoleAsyncMaster)
	mc.Listen, mc.HA.Listen = "127.0.0.2:0", "127.0.0.3:0"
	sc.Listen = "127.0.0.4:0"
	master := startBroker(t, mc, Options{})
	require.Regexp(t, `^127\.0\.0\.2:\d+$`, master.Addr())
	require.Regexp(t, `^127\.0\.0\.3:\d+$`, master.repl.haAddr)
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, master.Addr(), "t", 0, "hello", nil)
	slave := startBroker(t, sc, Options{})
	require.Eventually(t, func() bool { return slave.Store().Log().Next() == master.Store().Log().Next() }, 10*time.Second, time.Millisecond)
	require.Equal(t, master.repl.haAddr, slave.repl.slave.Load().Status().Master)
	require.Equal(t, master.Addr(), loadStr(&slave.repl.masterAddr))
	require.Eventually(t, func() bool {
		r := route(t, c, ns.Addr(), "t")
		return r != nil && len(r.BrokerDatas) == 1 && r.BrokerDatas[0].BrokerAddrs[1] == slave.Addr() &&
			r.BrokerDatas[0].BrokerAddrs[0] == master.Addr()
	}, 10*time.Second, 10*time.Millisecond)

	// An unspecified listen host advertises a real address, never 0.0.0.0.
	a := advertised(&net.TCPAddr{IP: net.IPv4zero, Port: 1234}, quiet(), "advertise")
	require.Equal(t, firstNonLoopback().String()+":1234", a)
	require.Equal(t, "127.0.0.9:5", advertised(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 9), Port: 5}, quiet(), "advertise"))
}

// TestReplication_SlaveReadSuggestion: with slave_read_enable, a pull far
// behind the log's end is told to read from slave 1; a recent one is not.
func TestReplication_SlaveReadSuggestion(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SlaveReadEnable = true
	b := startBroker(t, cfg, Options{ColdReadBytes: 2000})
	c := newClient(t, remoting.SerializeJSON)
	for _, body := range seq(string(bytes.Repeat([]byte("x"), 200)), 30) {
		mustSend(t, c, b.Addr(), "t", 0, body, nil)
	}
	waitIndexed(t, b)
	heartbeat(t, c, remoting.SerializeJSON, b.Addr(), "cid", "g", map[string]string{"t": "*"})
	pull := func(off int64) protocol.PullMessageResponseHeader {
		h := pullHeader("g", "t", 0, off, 0)
		h.MaxMsgNums = 1
		resp := invoke(t, c, b.Addr(), protocol.PullMessage, h, nil)
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		return pullExt(t, resp)
	}
	require.Equal(t, int64(1), pull(0).SuggestWhichBrokerID, "a cold read")
	require.Equal(t, int64(0), pull(29).SuggestWhichBrokerID, "a hot read")
}

// TestReplication_TLSAndACL: with TLS and ACL on, a slave replicates over
// TLS with its broker (admin) account; one with a wrong secret copies
// nothing and is counted.
func TestReplication_TLSAndACL(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	file := testutil.WriteACL(t, testutil.ACLRules)
	secure := func(c conf.Broker, secret string) conf.Broker {
		c.TLS.Mode = conf.TLSPermissive
		c.ACL = conf.BrokerACL{File: file, AccessKey: "rootroot", SecretKey: secret}
		return c
	}
	mc, sc := groupConfigs(t, ns.Addr(), conf.RoleSyncMaster)
	master := startBroker(t, secure(mc, "root-secret-1"), Options{})
	startBroker(t, secure(sc, "root-secret-1"), Options{})
	c := signedClient(t, remoting.SerializeJSON, "alice1", "alice-secret-1")
	require.Eventually(t, func() bool { return send(t, c, master.Addr(), "orders", 0, "x", nil).Code == protocol.Success },
		10*time.Second, 10*time.Millisecond, "a SYNC_MASTER acknowledges once its slave, over TLS, has the send")

	_, bad := groupConfigs(t, ns.Addr(), conf.RoleSyncMaster)
	bad.BrokerID = 2
	intruder := startBroker(t, secure(bad, "guess"), Options{})
	require.Eventually(t, func() bool { return master.repl.master.Load().Status().AuthFailures > 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, commitlog.Offset(0), intruder.Store().Log().Next())
}

// TestReplication_HAPortTaken: a lone ASYNC_MASTER whose default HA port
// (listen + 1) is taken serves all the same; one told ha.listen, or a
// SYNC_MASTER, refuses to start, naming the port.
func TestReplication_HAPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	c := testConfig(t.TempDir())
	c.Listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(p-1))
	if b, err := New(c, Options{Logger: quiet()}); err == nil {
		err = b.Start()
		if err == nil {
			require.Nil(t, b.repl.master.Load(), "no HA port, no master side")
			require.NoError(t, b.Close())
		} else {
			b.Close()
			require.NotContains(t, err.Error(), "ha listen", "the lone broker starts (or fails on its own port only)")
		}
	}
	c = testConfig(t.TempDir())
	c.Role = conf.RoleSyncMaster
	c.HA.Listen = ln.Addr().String()
	b, err := New(c, Options{Logger: quiet()})
	require.NoError(t, err)
	defer b.Close()
	err = b.Start()
	require.ErrorContains(t, err, "ha listen "+ln.Addr().String())
}

// TestReplication_SlaveFindsMasterStartedAfterIt: a slave started before
// its master (both with the default 30 s registration interval) finds the
// master within seconds: it asks the nameserver every second while it
// knows none (it waited for its next registration, up to 30 s, and a
// SYNC_MASTER refused every send meanwhile).
func TestReplication_SlaveFindsMasterStartedAfterIt(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	mc, sc := groupConfigs(t, ns.Addr(), conf.RoleSyncMaster)
	mc.RegisterInterval, sc.RegisterInterval = 30*time.Second, 30*time.Second
	logs := &testutil.SyncBuffer{}
	slave := startBroker(t, sc, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "slave waiting for its master") },
		10*time.Second, 10*time.Millisecond, "the slave says what it waits for")
	master := startBroker(t, mc, Options{})
	require.Eventually(t, func() bool { return loadStr(&slave.repl.masterHA) != "" }, 5*time.Second, 10*time.Millisecond,
		"the slave finds its master within seconds")
	c := newClient(t, remoting.SerializeJSON)
	require.Eventually(t, func() bool {
		return send(t, c, master.Addr(), "orders", 0, "replicated", nil).Code == protocol.Success
	}, 10*time.Second, 50*time.Millisecond, "the SYNC_MASTER acknowledges once its slave is in")
}
