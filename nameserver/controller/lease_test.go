package controller

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Issue 40: the controllers never elect a second master while the first
// may still acknowledge (its lease), unless it gave up; and a master
// learns the SyncStateSet from every heartbeat answer and from the
// leader's notices after any committed change.

// masterOf returns the leader's view of name's master.
func (f *front) masterOf(name string) int64 {
	if g := f.srvs[f.leader()].Node().Group(name); g != nil {
		return g.MasterID
	}
	return NoMaster
}

// TestLease_ClosedMasterIsReplacedAfterItsLease: a master whose
// connection closes (a crash, or a cut link while it still runs) is
// replaced only once the lease it announced ran out since its last
// heartbeat; it was replaced at once before, while it could still
// acknowledge for up to its lease.
func TestLease_ClosedMasterIsReplacedAfterItsLease(t *testing.T) {
	const lease = time.Second
	f := newFront(t, 1)
	b1 := f.leasedBroker("b", "127.0.0.1:10911", lease)
	b2 := f.leasedBroker("b", "127.0.0.1:10921", lease)
	require.True(t, b1.role.IsMaster())
	_, err := b1.cl.AlterSyncStateSet(ctxFor(t), "b", 1, 1, []int64{1, 2}, b1.role.SyncStateSetEpoch)
	require.NoError(t, err)

	b1.kill()
	last := time.Unix(0, b1.lastBeat.Load())
	require.Eventually(t, func() bool { return f.masterOf("b") == 2 }, waitFor, time.Millisecond)
	elected := time.Now()
	require.GreaterOrEqual(t, elected.Sub(last), lease,
		"broker 2 was elected %v after the old master's last heartbeat, within its lease", elected.Sub(last))
	r := b2.waitRole(t, func(r Role) bool { return r.MasterID == 2 })
	require.Equal(t, int32(2), r.MasterEpoch)
}

// TestLease_ResignedMasterIsReplacedAtOnce: a master that gave up
// (Resign: it stopped taking sends) is replaced at once, although its
// lease and its heartbeat timeout are a minute and its connection stays
// open; a heartbeat it still sends in the same epoch does not take the
// resignation back.
func TestLease_ResignedMasterIsReplacedAtOnce(t *testing.T) {
	f := newFront(t, 3)
	b1 := f.leasedBroker("b", "127.0.0.1:10911", time.Minute)
	b2 := f.leasedBroker("b", "127.0.0.1:10921", time.Minute)
	_, err := b1.cl.AlterSyncStateSet(ctxFor(t), "b", 1, 1, []int64{1, 2}, b1.role.SyncStateSetEpoch)
	require.NoError(t, err)
	// NB: the beater stops, its client stays connected.
	close(b1.stop)
	<-b1.done
	require.NoError(t, b1.cl.Resign(ctxFor(t), "c", "b", 1, 1))
	_, err = b1.cl.Heartbeat(ctxFor(t), Heartbeat{Cluster: "c", Name: "b", ID: 1, Epoch: 1, Timeout: aliveFor, Lease: time.Minute})
	require.NoError(t, err)
	r := b2.waitRole(t, func(r Role) bool { return r.MasterID == 2 })
	require.Equal(t, int32(2), r.MasterEpoch)
	b1.cl.Close()
}

// TestLease_HeartbeatAnswerCarriesTheSet: every controller's heartbeat
// answer carries the group's SyncStateSet and its epoch, so a master that
// missed the answer of its alter (the leader changed under it) and its
// notice learns the set at its next heartbeat.
func TestLease_HeartbeatAnswerCarriesTheSet(t *testing.T) {
	f := newFront(t, 3)
	b1 := f.broker("b", "127.0.0.1:10911")
	f.broker("b", "127.0.0.1:10921")
	epoch, err := b1.cl.AlterSyncStateSet(ctxFor(t), "b", 1, 1, []int64{1, 2}, b1.role.SyncStateSetEpoch)
	require.NoError(t, err)
	for _, addr := range b1.cl.Addrs() {
		require.Eventually(t, func() bool {
			a, err := b1.cl.HeartbeatTo(ctxFor(t), addr, Heartbeat{Cluster: "c", Name: "b", ID: 1, Epoch: 1, Timeout: aliveFor})
			return err == nil && a.Known && a.Role.SyncStateSetEpoch == epoch && slices.Equal(a.Role.SyncStateSet, []int64{1, 2})
		}, waitFor, 10*time.Millisecond, "controller %s", addr)
	}
	ack, err := b1.cl.Heartbeat(ctxFor(t), Heartbeat{Cluster: "c", Name: "b", ID: 1, Epoch: 1, Timeout: aliveFor})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, ack.Role.SyncStateSet)
	require.Equal(t, epoch, ack.Role.SyncStateSetEpoch)
}

// TestLease_NewLeaderNotifiesEveryGroup: a new leader tells every member
// the group's role once it is ready, so a change the previous leader
// committed but did not announce (it lost leadership, or its proposer's
// call failed) reaches the brokers by notice too.
func TestLease_NewLeaderNotifiesEveryGroup(t *testing.T) {
	f := newFront(t, 3)
	b1 := f.broker("b", "127.0.0.1:10911")
	b2 := f.broker("b", "127.0.0.1:10921")
	epoch, err := b1.cl.AlterSyncStateSet(ctxFor(t), "b", 1, 1, []int64{1, 2}, b1.role.SyncStateSetEpoch)
	require.NoError(t, err)
	b2.waitRole(t, func(r Role) bool { return r.SyncStateSetEpoch == epoch })
	f.stop(f.leader())
	r := b2.waitRole(t, func(r Role) bool { return r.SyncStateSetEpoch == epoch })
	require.Equal(t, []int64{1, 2}, r.SyncStateSet)
	require.Equal(t, int64(1), r.MasterID)
}

// TestLease_MeasuredOnTheControllersClock: the wait for a closed master's
// lease runs on the node's clock (Config.Now): a step back does not
// shorten it, and once the clock passed the lease the replica is elected
// (a lease of a minute, not waited out in real time).
func TestLease_MeasuredOnTheControllersClock(t *testing.T) {
	var off atomic.Int64
	f := newFrontWith(t, 1, func(c *Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(off.Load())) }
	})
	b1 := f.leasedBroker("b", "127.0.0.1:10911", time.Minute)
	b2 := f.leasedBroker("b", "127.0.0.1:10921", time.Minute)
	_, err := b1.cl.AlterSyncStateSet(ctxFor(t), "b", 1, 1, []int64{1, 2}, b1.role.SyncStateSetEpoch)
	require.NoError(t, err)
	b1.kill()
	off.Add(int64(-time.Hour))
	require.Never(t, func() bool { return f.masterOf("b") != 1 }, 300*time.Millisecond, 10*time.Millisecond,
		"elected while the closed master's lease runs")
	off.Add(int64(time.Hour + time.Minute))
	r := b2.waitRole(t, func(r Role) bool { return r.MasterID == 2 })
	require.Equal(t, int32(2), r.MasterEpoch)
}
