package broker

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// popClock is a POP clock the tests step, shared by a group's brokers.
type popClock struct{ skew atomic.Int64 }

func (c *popClock) now() time.Time      { return time.Now().Add(time.Duration(c.skew.Load())) }
func (c *popClock) add(d time.Duration) { c.skew.Add(int64(d)) }

// popped is what a receive got: body → attempt, and body → handle.
type popped struct {
	attempts map[string]int32
	handles  map[string]string
}

func popAll(t *testing.T, b *Broker, group, topicName string) popped {
	t.Helper()
	ps, st := grpcBackend{b}.Pop(context.Background(), v5PopRequest(group, topicName))
	require.Nil(t, st)
	out := popped{attempts: map[string]int32{}, handles: map[string]string{}}
	for _, p := range ps {
		body := string(p.Rec.Body)
		_, dup := out.attempts[body]
		require.False(t, dup, "%s twice in one receive", body)
		out.attempts[body], out.handles[body] = p.Attempt, p.Handle
	}
	return out
}

func (p popped) bodies() []string {
	var out []string
	for b := range p.attempts {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}

func ackOK(t *testing.T, b *Broker, group, topicName, handle string) {
	t.Helper()
	require.Nil(t, grpcBackend{b}.Ack(group, topicName, handle), "ack")
}

// popTestGroups puts the groups and topics of the failover tests on b: g
// unordered, f orderly (FIFO per message group).
func popTestGroups(t *testing.T, b *Broker) {
	t.Helper()
	for _, n := range []string{"pt", "pf"} {
		_, err := b.ensureTopic(n, 1)
		require.NoError(t, err)
	}
	for _, g := range []protocol.SubscriptionGroupConfig{
		{GroupName: "g", ConsumeEnable: true, RetryMaxTimes: 16},
		{GroupName: "f", ConsumeEnable: true, RetryMaxTimes: 16, ConsumeMessageOrderly: true},
	} {
		require.NoError(t, b.groupCfgs.Put(g))
	}
}

// popBefore is what the failover tests' old master handed out.
type popBefore struct{ second, f1 popped }

// popOnMaster sends and receives on a group's master: unordered, 10
// received, m-0..m-4 acked, m-5 nacked for a minute, m-6..m-9 expired and
// received again (attempt 2), m-6 and m-7 acked, m-8 and m-9 left in
// flight; FIFO, A1 and B1 first, A1 acked lets A2 through, B1 holds B2.
// It waits until every replica in slaves applied every record.
func popOnMaster(t *testing.T, master *Broker, clock *popClock, slaves ...*Broker) popBefore {
	t.Helper()
	popTestGroups(t, master)
	c := newClient(t, remoting.SerializeJSON)
	for _, body := range seq("m", 10) {
		mustSend(t, c, master.Addr(), "pt", 0, body, nil)
	}
	for _, body := range []string{"A1", "B1", "A2", "B2", "A3", "B3"} {
		mustSend(t, c, master.Addr(), "pf", 0, body, map[string]string{"__SHARDINGKEY": body[:1]})
	}
	waitIndexed(t, master)

	first := popAll(t, master, "g", "pt")
	require.Equal(t, seq("m", 10), first.bodies())
	for _, body := range seq("m", 5) {
		ackOK(t, master, "g", "pt", first.handles[body])
	}
	_, st := grpcBackend{master}.Change("g", "pt", first.handles["m-5"], time.Minute)
	require.Nil(t, st)
	clock.add(11 * time.Second) // T+11
	second := popAll(t, master, "g", "pt")
	require.Equal(t, map[string]int32{"m-6": 2, "m-7": 2, "m-8": 2, "m-9": 2}, second.attempts)
	ackOK(t, master, "g", "pt", second.handles["m-6"])
	ackOK(t, master, "g", "pt", second.handles["m-7"])

	f1 := popAll(t, master, "f", "pf")
	require.Equal(t, map[string]int32{"A1": 1, "B1": 1}, f1.attempts)
	ackOK(t, master, "f", "pf", f1.handles["A1"])
	f2 := popAll(t, master, "f", "pf")
	require.Equal(t, map[string]int32{"A2": 1}, f2.attempts)

	for _, s := range slaves {
		require.Eventually(t, func() bool { return s.pop.Pos() == master.pop.Pos() }, 10*time.Second, time.Millisecond,
			"the slave applied every record")
		require.Positive(t, s.pop.Pos())
		_, st := grpcBackend{s}.Pop(context.Background(), v5PopRequest("g", "pt"))
		require.Equal(t, v2.Code_FORBIDDEN, st.GetCode(), "a slave does not serve POP")
	}
	return popBefore{second: second, f1: f1}
}

// popOnNewMaster goes on on the group's new master from where
// popOnMaster left at T+11: everything is in flight still; a handle of
// the old master acks; expired offsets come again with their attempts;
// the nack's minute holds; FIFO groups keep their order.
func popOnNewMaster(t *testing.T, nm *Broker, clock *popClock, was popBefore) {
	t.Helper()
	popTestGroups(t, nm) // NB: the slave's metadata copy may not have run yet
	require.Empty(t, popAll(t, nm, "g", "pt").attempts, "acked or in flight")
	require.Empty(t, popAll(t, nm, "f", "pf").attempts, "A2 and B1 in flight, the rest wait")
	ackOK(t, nm, "g", "pt", was.second.handles["m-8"]) // NB: a handle of the old master
	ackOK(t, nm, "f", "pf", was.f1.handles["B1"])
	require.Equal(t, map[string]int32{"B2": 1}, popAll(t, nm, "f", "pf").attempts, "B1 acked lets B2 through")

	clock.add(11 * time.Second) // T+22: m-9 (and A2, B2) expired
	third := popAll(t, nm, "g", "pt")
	require.Equal(t, map[string]int32{"m-9": 3}, third.attempts)
	ackOK(t, nm, "g", "pt", third.handles["m-9"])
	f3 := popAll(t, nm, "f", "pf")
	require.Equal(t, map[string]int32{"A2": 2, "B2": 2}, f3.attempts, "each group's head again, not what waits behind it")
	ackOK(t, nm, "f", "pf", f3.handles["A2"])
	ackOK(t, nm, "f", "pf", f3.handles["B2"])
	require.Equal(t, map[string]int32{"A3": 1, "B3": 1}, popAll(t, nm, "f", "pf").attempts)

	clock.add(40 * time.Second) // T+62: the nack's minute is over
	require.Equal(t, map[string]int32{"m-5": 2}, popAll(t, nm, "g", "pt").attempts)
}

// TestPOPFailover_SlavePromoted: a SYNC_MASTER's POP state reaches its
// slave with the log; the slave, promoted (restarted as the master, as an
// operator does when the master's machine is gone), goes on where the
// master was (popOnNewMaster). Without the records the slave has no POP
// state and delivers the acked messages again.
func TestPOPFailover_SlavePromoted(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	mc, sc := groupConfigs(t, ns.Addr(), conf.RoleSyncMaster)
	clock := &popClock{}
	opts := Options{PopClock: clock.now}
	master := startBroker(t, mc, opts)
	slave := startBroker(t, sc, opts)
	require.Eventually(t, func() bool {
		st := master.repl.master.Load().Status()
		return len(st.Slaves) == 1 && st.Slaves[0].Acked == int64(master.Store().Log().Next())
	}, 10*time.Second, time.Millisecond)
	was := popOnMaster(t, master, clock, slave)
	require.NoError(t, master.Close())
	require.NoError(t, slave.Close())
	nc := sc
	nc.Role, nc.BrokerID = conf.RoleAsyncMaster, 0
	popOnNewMaster(t, startBroker(t, nc, opts), clock, was)
}

// TestPOPFailover_ControllerMode: the same in controller mode: the
// master closes, the controllers elect its in-sync slave, which goes on
// where the master was (popOnNewMaster). Without the records it delivers
// the acked messages again.
func TestPOPFailover_ControllerMode(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	ctl := startController(t)
	clock := &popClock{}
	opts := Options{PopClock: clock.now}
	var bs []*Broker
	for range 2 {
		bs = append(bs, startBroker(t, ctlConfig(t.TempDir(), ns.Addr(), ctl.Addr()), opts))
	}
	m := waitGroup(t, bs...)
	require.Eventually(t, func() bool { ss := m.ctl.syncSet.Load(); return ss != nil && len(ss.ids) == 2 }, 20*time.Second, 10*time.Millisecond)
	var slave *Broker
	for _, b := range bs {
		if b != m {
			slave = b
		}
	}
	was := popOnMaster(t, m, clock, slave)
	require.NoError(t, m.Close())
	require.Equal(t, slave, waitGroup(t, slave))
	popOnNewMaster(t, slave, clock, was)
}

// TestPOPFailover_KilledMasterKeepsAcks: a master killed (kill -9) after
// an ack and before its POP state file was saved again does not deliver
// the acked message again after its restart: it applies the ack's record
// from its log. The kill is played by putting back the state file of the
// last save before the ack (a real kill -9 leaves the log in the page
// cache, as Close leaves it here). Without the records the acked
// messages come again once their invisible time is over.
func TestPOPFailover_KilledMasterKeepsAcks(t *testing.T) {
	cfg := testConfig(t.TempDir())
	clock := &popClock{}
	opts := Options{PopClock: clock.now}
	b := startBroker(t, cfg, opts)
	popTestGroups(t, b)
	c := newClient(t, remoting.SerializeJSON)
	for _, body := range seq("m", 4) {
		mustSend(t, c, b.Addr(), "pt", 0, body, nil)
	}
	waitIndexed(t, b)
	got := popAll(t, b, "g", "pt")
	require.Len(t, got.attempts, 4)
	require.NoError(t, b.pop.Persist())
	path := filepath.Join(cfg.Store.Dir, "config", "pop")
	saved, err := os.ReadFile(path)
	require.NoError(t, err)
	ackOK(t, b, "g", "pt", got.handles["m-0"])
	ackOK(t, b, "g", "pt", got.handles["m-1"])
	require.NoError(t, b.Close())
	require.NoError(t, os.WriteFile(path, saved, 0o644))

	b = startBroker(t, cfg, opts)
	clock.add(time.Minute)
	require.Equal(t, map[string]int32{"m-2": 2, "m-3": 2}, popAll(t, b, "g", "pt").attempts)
}

// v5PopRequest receives up to 32 messages of topicName for group, each
// invisible for 10 s.
func v5PopRequest(group, topicName string) v5.PopRequest {
	return v5.PopRequest{Group: group, Topic: topicName, Queue: -1, Max: 32, Invisible: 10 * time.Second}
}

// TestPOP_WaitsForItsRecords: a broker that has not read the POP state
// records of its log (its dispatcher still indexing it after a restart
// past popOpenWait) answers POP calls INTERNAL_SERVER_ERROR, which clients
// retry, and serves them once popInit has read the records: the ack made
// before is then known.
func TestPOP_WaitsForItsRecords(t *testing.T) {
	cfg := testConfig(t.TempDir())
	b := startBroker(t, cfg, Options{})
	popTestGroups(t, b)
	c := newClient(t, remoting.SerializeJSON)
	for _, body := range seq("m", 2) {
		mustSend(t, c, b.Addr(), "pt", 0, body, nil)
	}
	waitIndexed(t, b)
	got := popAll(t, b, "g", "pt")
	ackOK(t, b, "g", "pt", got.handles["m-0"])
	pos := b.pop.Pos()
	b.pop.Clear() // NB: as a state file older than every record
	b.popReady.Store(false)
	_, st := grpcBackend{b}.Pop(context.Background(), v5PopRequest("g", "pt"))
	require.Equal(t, v2.Code_INTERNAL_SERVER_ERROR, st.GetCode())
	require.Equal(t, v2.Code_INTERNAL_SERVER_ERROR, grpcBackend{b}.Ack("g", "pt", got.handles["m-1"]).GetCode())
	require.True(t, b.popInit())
	require.Equal(t, pos, b.pop.Pos())
	require.Nil(t, grpcBackend{b}.Ack("g", "pt", got.handles["m-1"]), "in flight, from the records")
	require.Empty(t, popAll(t, b, "g", "pt").attempts, "m-0 acked, from the records")
}
