package broker

import (
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/nameserver/controller"
)

// startController runs a one-node controller with a short master timeout.
func startController(t testing.TB) *controller.Standalone {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := controller.StartStandalone("127.0.0.1:0", remoting.ServerOptions{Logger: quiet()}, controller.Config{
		ID: "n0", Peers: []controller.Peer{{ID: "n0", Addr: ln.Addr().String()}}, Dir: filepath.Join(t.TempDir(), "ctl"),
		MasterTimeout: 3 * time.Second, Listener: ln, HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// ctlConfig is a controller-mode broker of group "g" with its store in dir.
func ctlConfig(dir, ns, ctl string) conf.Broker {
	c := testConfig(dir)
	c.BrokerName, c.NamesrvAddr, c.Controller, c.RegisterInterval = "g", ns, ctl, 100*time.Millisecond
	c.HA.SyncTimeout = 3 * time.Second
	return c
}

// startCtlGroup starts a nameserver, a controller and three brokers of
// group "g" in controller mode (edit, if set, changes their configuration).
func startCtlGroup(t *testing.T, edit func(*conf.Broker)) ([]conf.Broker, []*Broker) {
	t.Helper()
	ns := startNamesrv(t, "127.0.0.1:0")
	ctl := startController(t)
	var cfgs []conf.Broker
	var bs []*Broker
	for range 3 {
		c := ctlConfig(t.TempDir(), ns.Addr(), ctl.Addr())
		if edit != nil {
			edit(&c)
		}
		cfgs = append(cfgs, c)
		bs = append(bs, startBroker(t, c, Options{}))
	}
	return cfgs, bs
}

// roleOf is a broker's controller-mode role.
func roleOf(b *Broker) int32 { return b.ctl.role.Load() }

// waitGroup waits until exactly one of bs is master and every other one
// follows it with its epoch, and returns the master.
func waitGroup(t *testing.T, bs ...*Broker) *Broker {
	t.Helper()
	var m *Broker
	require.Eventually(t, func() bool {
		m = nil
		for _, b := range bs {
			if roleOf(b) == roleMaster {
				if m != nil {
					return false
				}
				m = b
			}
		}
		if m == nil {
			return false
		}
		for _, b := range bs {
			if b != m && (roleOf(b) != roleSlave || b.ctl.epoch.Load() != m.ctl.epoch.Load()) {
				return false
			}
		}
		return true
	}, 20*time.Second, 5*time.Millisecond)
	return m
}

// TestControllerMode_Failover: three brokers and a controller. The first
// master is elected; sends are acknowledged once the SyncStateSet has
// them; when the master dies, a slave of the SyncStateSet becomes master
// with a higher epoch and takes sends within seconds; the old master,
// restarted on its store, follows the new one; every acknowledged message
// is in every replica's log, which are byte-for-byte equal.
func TestControllerMode_Failover(t *testing.T) {
	cfgs, bs := startCtlGroup(t, nil)
	m := waitGroup(t, bs...)
	firstEpoch := m.ctl.epoch.Load()
	// Both numberings, named: the master's route id is 0, its controller
	// id the one the controllers gave it (getSyncStateSet's).
	st := m.replicationStatus()
	require.Equal(t, "MASTER", st["brokerRole"])
	require.Equal(t, strconv.FormatInt(m.ctl.id.Load(), 10), st["controllerBrokerId"])
	require.NotEqual(t, "0", st["controllerBrokerId"], "controller ids start at 1")
	require.Equal(t, int64(0), m.registrationID(), "its route id")
	c := newClient(t, remoting.SerializeJSON)
	// Every slave joins the SyncStateSet once caught up.
	require.Eventually(t, func() bool { ss := m.ctl.syncSet.Load(); return ss != nil && len(ss.ids) == 3 }, 20*time.Second, 10*time.Millisecond)
	var acked []string
	first := map[string]protocol.SendMessageResponseHeader{}
	for _, body := range seq("a", 50) {
		first[body] = mustSend(t, c, m.Addr(), "t", 0, body, map[string]string{"UNIQ_KEY": "key-" + body})
		acked = append(acked, body)
	}
	for _, b := range bs {
		if b != m {
			require.GreaterOrEqual(t, b.Store().ReplicaOffset(), int64(m.Store().Log().Next()), "a SyncStateSet member has every acknowledged send")
			resp := send(t, c, b.Addr(), "t", 0, "to-slave", nil)
			require.Equal(t, protocol.ServiceNotAvailable, int(resp.Code), "a slave refuses sends")
		}
	}

	// The master dies.
	dead := m
	var deadCfg conf.Broker
	var rest []*Broker
	for i, b := range bs {
		if b == dead {
			deadCfg = cfgs[i]
		} else {
			rest = append(rest, b)
		}
	}
	killed := time.Now()
	require.NoError(t, dead.Close())
	m = waitGroup(t, rest...)
	elected := time.Since(killed)
	require.Greater(t, m.ctl.epoch.Load(), firstEpoch)
	var resp *remoting.Command
	require.Eventually(t, func() bool {
		resp = send(t, c, m.Addr(), "t", 0, "b-0", nil)
		return resp.Code == protocol.Success
	}, 10*time.Second, 10*time.Millisecond)
	t.Logf("new master in %v, first acknowledged send after %v", elected.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	// A producer's retry of a send the old master stored reaches the new
	// master: its duplicate window, fed by its dispatcher while it was a
	// slave, answers with the first ids and stores nothing.
	next := m.Store().Log().Next()
	dup := mustSend(t, c, m.Addr(), "t", 0, "a-7", map[string]string{"UNIQ_KEY": "key-a-7"})
	require.Equal(t, int32(1), dup.Duplicates)
	// NB: the same record; the id names the broker that answers.
	_, firstPos, err := message.ParseOffsetMsgID(first["a-7"].MsgID)
	require.NoError(t, err)
	_, dupPos, err := message.ParseOffsetMsgID(dup.MsgID)
	require.NoError(t, err)
	require.Equal(t, firstPos, dupPos)
	require.Equal(t, first["a-7"].QueueOffset, dup.QueueOffset)
	require.Equal(t, next, m.Store().Log().Next(), "nothing stored")
	acked = append(acked, "b-0")
	for _, body := range seq("b", 20)[1:] {
		mustSend(t, c, m.Addr(), "t", 0, body, nil)
		acked = append(acked, body)
	}

	// The old master returns and follows.
	back := startBroker(t, deadCfg, Options{})
	all := append(rest, back)
	require.Equal(t, m, waitGroup(t, all...))
	for _, b := range all {
		if b == m {
			continue
		}
		require.Eventually(t, func() bool { return b.Store().Log().Next() == m.Store().Log().Next() }, 20*time.Second, time.Millisecond)
		requireSameLog(t, m.Store().Log(), b.Store().Log())
	}
	waitIndexed(t, m)
	heartbeat(t, c, remoting.SerializeJSON, m.Addr(), "cid", "g1", map[string]string{"t": "*"})
	var got []string
	for off := int64(0); len(got) < len(acked); {
		resp := invoke(t, c, m.Addr(), protocol.PullMessage, pullHeader("g1", "t", 0, off, 0), nil)
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		got = append(got, recordBodies(t, resp.Body)...)
		off = pullExt(t, resp).NextBeginOffset
	}
	require.Equal(t, acked, got)
}

// restartable is a controller-mode broker that the test opens again when
// it asks to (a cut of its log), as mqbroker does.
type restartable struct {
	t    *testing.T
	cfg  conf.Broker
	mu   sync.Mutex
	b    *Broker
	cuts atomic.Int32
	done chan struct{}
}

func startRestartable(t *testing.T, cfg conf.Broker) *restartable {
	r := &restartable{t: t, cfg: cfg, done: make(chan struct{})}
	r.b = startBroker(t, cfg, Options{})
	go func() {
		for {
			r.mu.Lock()
			b := r.b
			r.mu.Unlock()
			select {
			case <-r.done:
				return
			case <-b.Restart():
			}
			b.Close()
			nb, err := New(cfg, Options{Logger: quiet()})
			if err == nil {
				err = nb.Start()
			}
			if err != nil {
				t.Errorf("restart: %v", err)
				return
			}
			r.cuts.Add(1)
			r.mu.Lock()
			r.b = nb
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(r.done); r.get().Close() })
	return r
}

func (r *restartable) get() *Broker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b
}

// TestControllerMode_DivergentTailIsCut: a master stores sends its
// in-sync slaves never got (they were down; the sends were answered
// FLUSH_SLAVE_TIMEOUT, not acknowledged) and dies; the slaves return and
// one is elected; the old master returns, finds that its log holds what
// the new master does not, cuts it there (reopening its store) and
// follows: the logs end byte-for-byte equal.
func TestControllerMode_DivergentTailIsCut(t *testing.T) {
	cfgs, bs := startCtlGroup(t, func(c *conf.Broker) { c.HA.SyncTimeout = 300 * time.Millisecond })
	m := waitGroup(t, bs...)
	require.Eventually(t, func() bool { ss := m.ctl.syncSet.Load(); return ss != nil && len(ss.ids) == 3 }, 20*time.Second, 10*time.Millisecond)
	c := newClient(t, remoting.SerializeJSON)
	for _, body := range seq("acked", 20) {
		mustSend(t, c, m.Addr(), "t", 0, body, nil)
	}
	var mcfg conf.Broker
	var slaves []conf.Broker
	for i, b := range bs {
		if b == m {
			mcfg = cfgs[i]
			continue
		}
		slaves = append(slaves, cfgs[i])
		require.NoError(t, b.Close())
	}
	agreed := int64(m.Store().Log().Next())
	for range 5 {
		resp := send(t, c, m.Addr(), "t", 0, "unacknowledged", nil)
		require.Equal(t, protocol.FlushSlaveTimeout, int(resp.Code), resp.Remark)
	}
	require.Greater(t, int64(m.Store().Log().Next()), agreed)
	require.NoError(t, m.Close())

	var back []*Broker
	for _, sc := range slaves {
		back = append(back, startBroker(t, sc, Options{}))
	}
	nm := waitGroup(t, back...)
	require.Equal(t, agreed, int64(nm.Store().Log().Next()), "the new master has what was acknowledged")
	old := startRestartable(t, mcfg)
	require.Eventually(t, func() bool { return old.cuts.Load() == 1 && roleOf(old.get()) == roleSlave }, 20*time.Second, 5*time.Millisecond)
	mustSend(t, c, nm.Addr(), "t", 0, "after", nil)
	require.Eventually(t, func() bool { return old.get().Store().Log().Next() == nm.Store().Log().Next() }, 20*time.Second, time.Millisecond)
	requireSameLog(t, nm.Store().Log(), old.get().Store().Log())
}

// TestControllerMode_ClientFollowsNewMaster: Sluice's producer goes on
// sending through a failover: once the new master registers, its route
// refresh (at once on a failed or refused send) finds it.
func TestControllerMode_ClientFollowsNewMaster(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	ctl := startController(t)
	var bs []*Broker
	for range 2 {
		bs = append(bs, startBroker(t, ctlConfig(t.TempDir(), ns.Addr(), ctl.Addr()), Options{}))
	}
	m := waitGroup(t, bs...)
	require.Eventually(t, func() bool { ss := m.ctl.syncSet.Load(); return ss != nil && len(ss.ids) == 2 }, 20*time.Second, 10*time.Millisecond)
	p, err := client.NewProducer(client.WithNameServers(ns.Addr()), client.WithGroup("pg"), client.WithSendTimeout(3*time.Second))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Close()
	send := func() error {
		_, err := p.Send(t.Context(), &client.Message{Topic: "t", Body: []byte("x")})
		return err
	}
	require.Eventually(t, func() bool { return send() == nil }, 20*time.Second, 10*time.Millisecond)
	killed := time.Now()
	require.NoError(t, m.Close())
	var other *Broker
	for _, b := range bs {
		if b != m {
			other = b
		}
	}
	require.Eventually(t, func() bool { return send() == nil }, 20*time.Second, time.Millisecond)
	t.Logf("producing again %v after the master's death", time.Since(killed).Round(time.Millisecond))
	require.Equal(t, roleMaster, roleOf(other))
}
