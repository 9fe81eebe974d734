package broker

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker/ha"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/nameserver/controller"
)

// Issue 40, defects 2 and 3: the master learns the SyncStateSet from every
// heartbeat answer and re-reads it when fenced, acknowledges against both
// sets while a change is pending, and answers no send SUCCESS once its
// lease ran out. A scripted controller (fakeCtl) lets the tests lose
// answers and notices, hang, and stop acting as leader at will.

// fakeCtl is a controller the test steers: one group whose first broker
// to register is master in epoch 1; what it answers is the state the test
// set, with no notices (NOTIFY_BROKER_ROLE_CHANGED) ever.
type fakeCtl struct {
	srv *remoting.Server

	mu       sync.Mutex
	role     controller.Role // master, epochs and set
	members  map[int64][2]string
	leader   bool // heartbeat answers say isLeader
	roleless bool // heartbeat answers carry no role (as a Java controller's)
	hang     bool // every request goes unanswered
	// alter answers CONTROLLER_ALTER_SYNC_STATE_SET (under mu): nil
	// applies it; code -1 loses the answer.
	alter  func(f *fakeCtl, set []int64, setEpoch int32) (code int16, remark string)
	alters chan []int64 // every set asked for
}

func startFakeCtl(t *testing.T) *fakeCtl {
	t.Helper()
	f := &fakeCtl{role: controller.Role{MasterID: controller.NoMaster, BrokerID: controller.NoMaster},
		members: map[int64][2]string{}, leader: true, alters: make(chan []int64, 64)}
	f.srv = remoting.NewServer("127.0.0.1:0", remoting.ServerOptions{Logger: quiet()})
	f.srv.HandleDefault(f.serve)
	require.NoError(t, f.srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.srv.Shutdown(ctx)
	})
	return f
}

func (f *fakeCtl) addr() string { return f.srv.Addr().String() }

func (f *fakeCtl) set(edit func(f *fakeCtl)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	edit(f)
}

func (f *fakeCtl) serve(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hang {
		return // NB: accepted, never answered
	}
	roleResp := func(brokerID int64) *remoting.Command {
		resp := remoting.NewResponse(req, protocol.Success, "")
		r := f.role
		if m, ok := f.members[r.MasterID]; ok {
			r.MasterAddr, r.MasterHAAddr = m[0], m[1]
		}
		resp.ExtFields = protocol.Ext(&protocol.ControllerRoleHeader{MasterBrokerID: r.MasterID, MasterAddress: r.MasterAddr,
			MasterHAAddress: r.MasterHAAddr, MasterEpoch: r.MasterEpoch, SyncStateSetEpoch: r.SyncStateSetEpoch, BrokerID: brokerID})
		return resp
	}
	withSet := func(resp *remoting.Command) *remoting.Command {
		resp.Body, _ = remoting.EncodeBody(req.SerializeType,
			protocol.SyncStateSet{SyncStateSet: f.role.SyncStateSet, SyncStateSetEpoch: f.role.SyncStateSetEpoch})
		return resp
	}
	var resp *remoting.Command
	switch req.Code {
	case protocol.ControllerRegisterBroker:
		var h protocol.ControllerRegisterBrokerRequestHeader
		_ = h.FromExt(req.ExtFields)
		id := int64(len(f.members) + 1)
		for mid, m := range f.members {
			if m[0] == h.BrokerAddress {
				id = mid
			}
		}
		f.members[id] = [2]string{h.BrokerAddress, h.HAAddress}
		if f.role.MasterID == controller.NoMaster {
			f.role = controller.Role{MasterID: id, MasterEpoch: 1, SyncStateSet: []int64{id}, SyncStateSetEpoch: 1}
		}
		resp = roleResp(id)
	case protocol.BrokerHeartbeat:
		resp = remoting.NewResponse(req, protocol.Success, "")
		if !f.roleless {
			resp = withSet(roleResp(controller.NoMaster))
		}
		if resp.ExtFields == nil {
			resp.ExtFields = map[string]string{}
		}
		resp.ExtFields["isLeader"] = map[bool]string{true: "true", false: "false"}[f.leader]
	case protocol.ControllerGetReplicaInfo:
		resp = withSet(roleResp(controller.NoMaster))
	case protocol.ControllerGetSyncStateData:
		// NB: the members, for a master that checks a replication peer's
		// id against its address (CheckSlave).
		var names []string
		_ = remoting.DecodeBody(req.SerializeType, req.Body, &names)
		info := protocol.BrokerReplicasInfo{ReplicasInfoTable: map[string]protocol.ReplicasInfo{}}
		for _, name := range names {
			ri := protocol.ReplicasInfo{MasterBrokerID: f.role.MasterID, MasterEpoch: f.role.MasterEpoch,
				SyncStateSetEpoch: f.role.SyncStateSetEpoch}
			for id, m := range f.members {
				r := protocol.ReplicaIdentity{BrokerName: name, BrokerID: id, BrokerAddress: m[0], Alive: true}
				if slices.Contains(f.role.SyncStateSet, id) {
					ri.InSyncReplicas = append(ri.InSyncReplicas, r)
				} else {
					ri.NotInSyncReplicas = append(ri.NotInSyncReplicas, r)
				}
			}
			info.ReplicasInfoTable[name] = ri
		}
		resp = remoting.NewResponse(req, protocol.Success, "")
		resp.Body, _ = remoting.EncodeBody(req.SerializeType, info)
	case protocol.ControllerAlterSyncStateSet:
		set, err := controller.DecodeSyncStateSet(req.SerializeType, req.Body)
		if err != nil {
			resp = remoting.NewResponse(req, protocol.ControllerInvalidRequest, err.Error())
			break
		}
		select {
		case f.alters <- set.SyncStateSet:
		default:
		}
		code, remark := int16(protocol.Success), ""
		if f.alter != nil {
			code, remark = f.alter(f, set.SyncStateSet, set.SyncStateSetEpoch)
		}
		if code == -1 {
			return // NB: the answer is lost
		}
		if code == protocol.Success {
			f.role.SyncStateSet, f.role.SyncStateSetEpoch = set.SyncStateSet, f.role.SyncStateSetEpoch+1
		}
		resp = remoting.NewResponse(req, code, remark)
		if code == protocol.Success {
			resp.ExtFields = protocol.Ext(&protocol.AlterSyncStateSetResponseHeader{NewSyncStateSetEpoch: f.role.SyncStateSetEpoch})
		}
	default:
		resp = remoting.NewResponse(req, protocol.RequestCodeNotSupported, "fake controller")
	}
	_ = w.Write(resp)
}

// stepClock is a Clock the test moves forward.
type stepClock struct{ off atomic.Int64 }

func (c *stepClock) Now() time.Time       { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *stepClock) step(d time.Duration) { c.off.Add(int64(d)) }

// startLeased starts a controller-mode broker on the given controllers
// and waits until it is master.
func startLeased(t *testing.T, ctl string, opts Options, edit func(*conf.Broker)) *Broker {
	t.Helper()
	ns := startNamesrv(t, "127.0.0.1:0")
	c := ctlConfig(t.TempDir(), ns.Addr(), ctl)
	if edit != nil {
		edit(&c)
	}
	b := startBroker(t, c, opts)
	require.Eventually(t, func() bool { return roleOf(b) == roleMaster }, 20*time.Second, 5*time.Millisecond)
	return b
}

// setOf is the master's SyncStateSet and its epoch.
func setOf(b *Broker) ([]int64, int32) {
	ss := b.ctl.syncSet.Load()
	if ss == nil {
		return nil, 0
	}
	return ss.ids, ss.epoch
}

// TestSyncStateSet_LearntFromHeartbeat: an alter that committed while its
// answer and its notice were lost (the controller leader changed under
// it) is learnt from the next heartbeat answer; before, the master went
// on acknowledging against its smaller set for ever.
func TestSyncStateSet_LearntFromHeartbeat(t *testing.T) {
	f := startFakeCtl(t)
	b := startLeased(t, f.addr(), Options{}, func(c *conf.Broker) { c.HA.MaxCatchupLag = time.Hour })
	ids, epoch := setOf(b)
	require.Equal(t, []int64{1}, ids)
	require.Equal(t, int32(1), epoch)
	f.set(func(f *fakeCtl) { f.role.SyncStateSet, f.role.SyncStateSetEpoch = []int64{1, 2}, 2 })
	require.Eventually(t, func() bool { ids, epoch := setOf(b); return slices.Equal(ids, []int64{1, 2}) && epoch == 2 },
		10*time.Second, 5*time.Millisecond)
	require.Equal(t, []int64{2}, b.inSync().Slaves, "the gate waits for broker 2 now")
}

// TestSyncStateSet_FencedRereads: an alter refused for a stale set epoch
// (FENCED_SYNC_STATE_SET_EPOCH) makes the master read the set again; it
// was only logged, and the master kept its stale set.
func TestSyncStateSet_FencedRereads(t *testing.T) {
	f := startFakeCtl(t)
	f.set(func(f *fakeCtl) {
		// NB: heartbeat answers carry no role, so only a re-read tells.
		f.roleless = true
		// The group's set is {1, 2}: broker 2 never comes, so the
		// master asks to drop it. A change asked at the set's epoch
		// goes unanswered; at another, it is refused as stale.
		f.role = controller.Role{MasterID: 1, MasterEpoch: 1, SyncStateSet: []int64{1, 2}, SyncStateSetEpoch: 1}
		f.alter = func(f *fakeCtl, _ []int64, setEpoch int32) (int16, string) {
			if setEpoch != f.role.SyncStateSetEpoch {
				return protocol.ControllerFencedSyncStateSetEpoch, "stale set epoch"
			}
			return -1, ""
		}
	})
	b := startLeased(t, f.addr(), Options{}, func(c *conf.Broker) { c.HA.MaxCatchupLag = time.Second })
	ids, _ := setOf(b)
	require.Equal(t, []int64{1, 2}, ids)
	// Meanwhile the controllers committed {1, 2, 3} at epoch 3 (its
	// answer and notice lost).
	f.set(func(f *fakeCtl) { f.role.SyncStateSet, f.role.SyncStateSetEpoch = []int64{1, 2, 3}, 3 })
	require.Eventually(t, func() bool { ids, epoch := setOf(b); return slices.Equal(ids, []int64{1, 2, 3}) && epoch == 3 },
		10*time.Second, 5*time.Millisecond)
}

// memReplica is a slave's log that only counts bytes.
type memReplica struct{ end atomic.Int64 }

func (r *memReplica) ApplyReplica(at int64, data []byte) error {
	r.end.Add(int64(len(data)))
	return nil
}
func (r *memReplica) IndexReplica()        {}
func (r *memReplica) ReplicaOffset() int64 { return r.end.Load() }

// TestSyncStateSet_PendingChangeNeedsBothSets: while the master's request
// to add a caught-up slave to the set is unanswered (it may commit), a
// send needs that slave too: before, the master acknowledged against the
// old set alone, and the new set, once committed, could elect a slave
// that lacked an acknowledged send.
func TestSyncStateSet_PendingChangeNeedsBothSets(t *testing.T) {
	f := startFakeCtl(t)
	f.set(func(f *fakeCtl) { f.alter = func(*fakeCtl, []int64, int32) (int16, string) { return -1, "" } })
	b := startLeased(t, f.addr(), Options{}, nil)
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "alone", nil)

	// Broker 2 follows and catches up: the master asks to add it and
	// hears nothing back.
	f.set(func(f *fakeCtl) { f.members[2] = [2]string{"127.0.0.1:1", ""} }) // NB: a member at the peer's address
	s := ha.NewSlave(&memReplica{}, ha.SlaveOptions{Master: func() string { return b.repl.haAddr },
		Hello: func() (int64, int32) { return 2, 1 }, RetryInterval: 10 * time.Millisecond, Logger: quiet()})
	s.Start()
	select {
	case set := <-f.alters:
		require.Equal(t, []int64{1, 2}, set)
	case <-time.After(20 * time.Second):
		t.Fatal("the master never asked to add its caught-up slave")
	}
	rule := b.inSync()
	require.True(t, rule.Changing)
	require.Equal(t, []int64{2}, rule.Pending)
	ids, _ := setOf(b)
	require.Equal(t, []int64{1}, ids, "the set is unchanged until the controllers say")
	// With the slave there, sends are acknowledged; without it, not.
	mustSend(t, c, b.Addr(), "t", 0, "both", nil)
	s.Close()
	resp := send(t, c, b.Addr(), "t", 0, "pending", nil)
	require.Equal(t, protocol.FlushSlaveTimeout, int(resp.Code), "acknowledged without the slave of the pending set: %s", resp.Remark)
}

// TestLease_SteppedClockEndsIt: once no leader has answered a heartbeat
// for the lease (the clock stepped past it), the master answers no send
// SUCCESS and fences itself; it checked the lease only after a heartbeat
// round, and never on the acknowledge path.
func TestLease_SteppedClockEndsIt(t *testing.T) {
	f := startFakeCtl(t)
	clock := &stepClock{}
	b := startLeased(t, f.addr(), Options{Clock: clock}, nil)
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "leased", nil)
	f.set(func(f *fakeCtl) { f.leader = false }) // NB: the leader no longer answers as one
	clock.step(masterLease)
	resp := send(t, c, b.Addr(), "t", 0, "after", nil)
	require.NotEqual(t, protocol.Success, int(resp.Code), "a master past its lease acknowledged a send")
	require.Eventually(t, func() bool { return roleOf(b) == roleNone }, 10*time.Second, 5*time.Millisecond, "it fences itself")
	// The leader answers again: it is master again, and acknowledges.
	f.set(func(f *fakeCtl) { f.leader = true })
	require.Eventually(t, func() bool { return roleOf(b) == roleMaster }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return send(t, c, b.Addr(), "t", 0, "again", nil).Code == protocol.Success },
		10*time.Second, 10*time.Millisecond)
}

// TestLease_HungControllerDelaysNothing: with one controller that takes
// connections and never answers, the lease still runs from when the
// leader's last answered heartbeat was sent: once the leader stops
// answering, no send made a lease later is acknowledged. Heartbeat rounds
// waited for every controller (2 s with the hung one) and stamped the
// lease when they ended, so the master acknowledged for up to twice the
// lease.
func TestLease_HungControllerDelaysNothing(t *testing.T) {
	leader, hung := startFakeCtl(t), startFakeCtl(t)
	hung.set(func(f *fakeCtl) { f.hang = true })
	b := startLeased(t, leader.addr()+";"+hung.addr(), Options{}, nil)
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "leased", nil)
	leader.set(func(f *fakeCtl) { f.hang = true })
	stopped := time.Now()
	for time.Since(stopped) < masterLease+2*time.Second {
		sent := time.Now()
		resp := send(t, c, b.Addr(), "t", 0, "x", nil)
		if resp.Code == protocol.Success {
			require.Less(t, sent.Sub(stopped), masterLease, "a send made %v after the leader stopped answering was acknowledged",
				sent.Sub(stopped).Round(time.Millisecond))
		}
		time.Sleep(10 * time.Millisecond) // NB: pacing, not a wait
	}
}

// TestLease_ClockStepBackEndsIt: a clock that goes back (stepped) ends the
// lease rather than stretch it by the step; heartbeats the leader answers
// afterwards renew it.
func TestLease_ClockStepBackEndsIt(t *testing.T) {
	f := startFakeCtl(t)
	clock := &stepClock{}
	b := startLeased(t, f.addr(), Options{Clock: clock}, nil)
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "leased", nil)
	f.set(func(f *fakeCtl) { f.leader = false })
	clock.step(-time.Hour)
	resp := send(t, c, b.Addr(), "t", 0, "after", nil)
	require.NotEqual(t, protocol.Success, int(resp.Code), "the lease was stretched by the step back")
	f.set(func(f *fakeCtl) { f.leader = true })
	require.Eventually(t, func() bool { return send(t, c, b.Addr(), "t", 0, "again", nil).Code == protocol.Success },
		10*time.Second, 10*time.Millisecond)
}
