package broker

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker/ha"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/internal/tlscert"
	"github.com/sluicemq/sluice/nameserver/controller"
)

// startControllerWith runs a one-node controller, as startController, on
// a remoting server with opts (ACL, TLS).
func startControllerWith(t testing.TB, opts remoting.ServerOptions) *controller.Standalone {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	s, err := controller.StartStandalone("127.0.0.1:0", opts, controller.Config{
		ID: "n0", Peers: []controller.Peer{{ID: "n0", Addr: ln.Addr().String()}}, Dir: filepath.Join(t.TempDir(), "ctl"),
		MasterTimeout: 3 * time.Second, Listener: ln, HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// secureController runs a controller that checks file's ACL rules and
// serves TLS only (a self-signed certificate).
func secureController(t *testing.T, file string) *controller.Standalone {
	w, err := acl.NewWatcher(file, acl.LoadFile, quiet())
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	ts, err := tlscert.Server(conf.TLS{Mode: conf.TLSEnforcing}, "", quiet())
	require.NoError(t, err)
	return startControllerWith(t, remoting.ServerOptions{Authorize: w.Guard().Authorize, TLS: ts})
}

// TestControllerMode_ACLAndTLS: with ACL and enforcing TLS on the
// controller and the brokers, brokers sign their controller requests with
// their own account (acl.access_key) and dial it with TLS
// (controller_tls), so a master is elected, and the other broker compares
// epochs with it over TLS and follows it. Before, brokers could neither
// sign nor use TLS towards the controllers, and none was elected; and a
// slave asked its master's epochs in plaintext, which enforcing TLS
// refused.
func TestControllerMode_ACLAndTLS(t *testing.T) {
	file := testutil.WriteACL(t, testutil.ACLRules)
	ns := startNamesrv(t, "127.0.0.1:0")
	ctl := secureController(t, file)
	var bs []*Broker
	for range 2 {
		c := ctlConfig(t.TempDir(), ns.Addr(), ctl.Addr())
		c.ACL = conf.BrokerACL{File: file, AccessKey: "rootroot", SecretKey: "root-secret-1"}
		c.ControllerTLS = conf.ClientTLS{Enabled: true, Insecure: true}
		c.TLS = conf.TLS{Mode: conf.TLSEnforcing} // NB: the HA port and the epoch comparison over TLS too
		bs = append(bs, startBroker(t, c, Options{}))
	}
	m := waitGroup(t, bs...)
	require.Eventually(t, func() bool { ss := m.ctl.syncSet.Load(); return ss != nil && len(ss.ids) == 2 }, 20*time.Second, 10*time.Millisecond)
}

// TestControllerMode_NoCutBelowConfirmed: the attack of issue 40. Whoever
// reaches the controllers (ACL off here) registers a fake member, adds it
// to the SyncStateSet, has it elected, and serves an empty epoch history:
// every real broker would cut its log to 0, losing every acknowledged
// message. Each broker refuses (its confirmed offset, what the group
// acknowledged, is above the cut), logs it and stays out, until an
// operator allows the cut (ALLOW_LOG_CUT, mqadmin allowLogCut). Before, both
// asked to restart with their logs cut to 0.
func TestControllerMode_NoCutBelowConfirmed(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	ctl := startController(t)
	var bs []*Broker
	for range 2 {
		bs = append(bs, startBroker(t, ctlConfig(t.TempDir(), ns.Addr(), ctl.Addr()), Options{}))
	}
	m := waitGroup(t, bs...)
	require.Eventually(t, func() bool { ss := m.ctl.syncSet.Load(); return ss != nil && len(ss.ids) == 2 }, 20*time.Second, 10*time.Millisecond)
	c := newClient(t, remoting.SerializeJSON)
	for _, body := range seq("acked", 20) {
		mustSend(t, c, m.Addr(), "t", 0, body, nil)
	}
	end := int64(m.Store().Log().Next())
	for _, b := range bs {
		require.Eventually(t, func() bool { return b.ctl.guard.confirmed.Load() >= end }, 20*time.Second, 10*time.Millisecond,
			"broker %s never confirmed %d", b.Addr(), end)
	}

	// The fake master: an empty log whose history starts the epoch it
	// was elected in at 0.
	attacker, err := controller.NewClient(controller.ClientConfig{Addrs: []string{ctl.Addr()}, Logger: quiet()})
	require.NoError(t, err)
	defer attacker.Close()
	fake := remoting.NewServer("127.0.0.1:0", remoting.ServerOptions{Logger: quiet()})
	fake.Handle(protocol.GetBrokerEpochCache, func(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		role, err := attacker.ReplicaInfo(ctx, "g")
		if err != nil {
			_ = w.Write(remoting.NewResponse(req, protocol.SystemError, err.Error()))
			return
		}
		body, _ := remoting.EncodeBody(req.SerializeType, EpochCache{BrokerName: "g", BrokerID: role.MasterID,
			Epochs: []ha.EpochEntry{{Epoch: role.MasterEpoch, Start: 0}}})
		resp := remoting.NewResponse(req, protocol.Success, "")
		resp.Body = body
		_ = w.Write(resp)
	})
	require.NoError(t, fake.Start())
	defer fake.Shutdown(context.Background())
	fakeAddr := fake.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role, err := attacker.Register(ctx, controller.Registration{Cluster: "DefaultCluster", Name: "g", ID: controller.NoMaster,
		Addr: fakeAddr, HAAddr: fakeAddr})
	require.NoError(t, err)
	id := role.BrokerID
	stop := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		for {
			hctx, hcancel := context.WithTimeout(ctx, time.Second)
			_, _ = attacker.Heartbeat(hctx, controller.Heartbeat{Cluster: "DefaultCluster", Name: "g", ID: id, Addr: fakeAddr,
				Timeout: time.Minute})
			hcancel()
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-beating }()
	require.Eventually(t, func() bool {
		r, err := attacker.ReplicaInfo(ctx, "g")
		if err != nil {
			return false
		}
		if _, err := attacker.AlterSyncStateSet(ctx, "g", r.MasterID, r.MasterEpoch, append(r.SyncStateSet, id), r.SyncStateSetEpoch); err != nil {
			return false
		}
		r, err = attacker.ElectMaster(ctx, "g", id)
		return err == nil && r.MasterID == id
	}, 20*time.Second, 50*time.Millisecond, "the fake member was never elected")

	for _, b := range bs {
		require.Eventually(t, func() bool { return b.ctl.guard.refused.Load() == 0 }, 20*time.Second, 10*time.Millisecond,
			"broker %s never refused the cut to 0", b.Addr())
		select {
		case why := <-b.Restart():
			t.Fatalf("broker %s restarts to cut its log: %s", b.Addr(), why)
		default:
		}
		_, cutting, err := pendingCut(b.cfg.Store.Dir)
		require.NoError(t, err)
		require.False(t, cutting, "broker %s asked for a cut below its confirmed offset", b.Addr())
		require.Equal(t, end, int64(b.Store().Log().Next()))
	}

	// brokerStatus tells what was refused.
	rt, err := c.Invoke(ctx, bs[0].Addr(), remoting.NewRequest(protocol.GetBrokerRuntimeInfo, nil, nil))
	require.NoError(t, err)
	var kv protocol.KVTable
	require.NoError(t, remoting.DecodeBody(rt.SerializeType, rt.Body, &kv))
	require.Equal(t, "0", kv.Table["refusedCutTo"])
	confirmed, err := strconv.ParseInt(kv.Table["confirmedOffset"], 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, confirmed, end)

	// An operator lets one of them cut (mqadmin allowLogCut -b).
	b := bs[0]
	resp, err := c.Invoke(ctx, b.Addr(), remoting.NewRequest(protocol.AllowLogCut, nil, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	select {
	case <-b.Restart():
	case <-time.After(20 * time.Second):
		t.Fatal("the allowed cut was not made")
	}
	at, cutting, err := pendingCut(b.cfg.Store.Dir)
	require.NoError(t, err)
	require.True(t, cutting)
	require.Zero(t, at)
}

// TestControllerMode_HAPeerMustBeItsMember: a peer on the master's HA port
// claiming a broker id the controllers do not know at its address is
// refused in its hello (the real slave still replicates). Before, it was
// taken as that broker and its offset reports counted toward
// acknowledging sends.
func TestControllerMode_HAPeerMustBeItsMember(t *testing.T) {
	_, bs := startCtlGroup(t, nil)
	m := waitGroup(t, bs...)
	require.Eventually(t, func() bool { ss := m.ctl.syncSet.Load(); return ss != nil && len(ss.ids) == 3 }, 20*time.Second, 10*time.Millisecond)
	var slave *Broker
	for _, b := range bs {
		if b != m {
			slave = b
		}
	}
	for _, id := range []int64{99, m.ctl.id.Load()} {
		require.Equal(t, uint32(2), haHello(t, m, id), "id %d", id)
	}
	// A member at another address: the controllers know 10.9.9.9 for it.
	reg, err := controller.NewClient(controller.ClientConfig{Addrs: []string{bs[0].cfg.Controller}, Logger: quiet()})
	require.NoError(t, err)
	defer reg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	role, err := reg.Register(ctx, controller.Registration{Cluster: "DefaultCluster", Name: "g", ID: controller.NoMaster,
		Addr: "10.9.9.9:10911"})
	require.NoError(t, err)
	require.Equal(t, uint32(2), haHello(t, m, role.BrokerID))
	require.Equal(t, int64(-1), m.repl.master.Load().AckedBy(role.BrokerID))

	c2 := newClient(t, remoting.SerializeJSON)
	mustSend(t, c2, m.Addr(), "t", 0, "still replicated", nil)
	require.Eventually(t, func() bool { return slave.Store().Log().Next() == m.Store().Log().Next() }, 20*time.Second, time.Millisecond)
}

// haHello sends a controller-mode hello ("SLHA" | id | epoch) to m's HA
// port as broker id and returns the master's status (2: id refused).
func haHello(t *testing.T, m *Broker, id int64) uint32 {
	t.Helper()
	c, err := net.Dial("tcp", m.repl.haAddr)
	require.NoError(t, err)
	defer c.Close()
	b := binary.BigEndian.AppendUint64([]byte("SLHA"), uint64(id))
	b = binary.BigEndian.AppendUint32(b, uint32(m.ctl.epoch.Load()))
	_, err = c.Write(b)
	require.NoError(t, err)
	var r [12]byte
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.ReadFull(c, r[:])
	require.NoError(t, err)
	return binary.BigEndian.Uint32(r[8:])
}

// TestReplication_WarnsUnverifiedMaster: a slave whose replication TLS
// verifies nothing (no namesrv_tls.ca_file) says so at start.
func TestReplication_WarnsUnverifiedMaster(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	for _, ca := range []string{"", "with"} {
		c := testConfig(t.TempDir())
		c.NamesrvAddr, c.Role, c.BrokerID = ns.Addr(), conf.RoleSlave, 1
		c.TLS = conf.TLS{Mode: conf.TLSPermissive}
		if ca != "" {
			certPEM, _, _, err := tlscert.Issue([]string{"127.0.0.1"}, nil, true)
			require.NoError(t, err)
			c.NamesrvTLS.CAFile = filepath.Join(t.TempDir(), "ca.crt")
			require.NoError(t, os.WriteFile(c.NamesrvTLS.CAFile, certPEM, 0o600))
		}
		logs := &testutil.SyncBuffer{}
		b := startBroker(t, c, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.Equal(t, ca == "", strings.Contains(logs.String(), "does not verify the master's certificate"), "%s", logs.String())
		require.NoError(t, b.Close())
	}
}
