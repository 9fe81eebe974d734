package controller

import (
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

func TestCluster_LeaderElection(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	for i, n := range c.nodes {
		require.Eventually(t, func() bool {
			id, addr := n.Leader()
			return id == c.peers[l].ID && addr == c.nodes[l].cfg.Advertise
		}, waitFor, 10*time.Millisecond, "node %d does not know the leader", i)
		if i != l {
			_, err := n.ReplicaInfo("b")
			require.ErrorIs(t, err, ErrNotLeader)
		}
	}
}

func TestCluster_RegisterGroup(t *testing.T) {
	c := newCluster(t, 3, nil)
	r1 := c.register("b", "127.0.0.1:10911")
	require.Equal(t, int64(1), r1.BrokerID)
	require.True(t, r1.IsMaster(), "the first broker of a new group is its master")
	require.Equal(t, int32(1), r1.MasterEpoch)
	require.Equal(t, []int64{1}, r1.SyncStateSet)
	c.beat("b", 1, 0)

	r2 := c.register("b", "127.0.0.1:10921")
	r3 := c.register("b", "127.0.0.1:10931")
	require.Equal(t, []int64{2, 3}, []int64{r2.BrokerID, r3.BrokerID})
	require.False(t, r2.IsMaster())
	require.Equal(t, "127.0.0.1:10911", r2.MasterAddr)
	require.Equal(t, int32(1), r3.MasterEpoch)

	again := c.register("b", "127.0.0.1:10921")
	require.Equal(t, int64(2), again.BrokerID, "a broker registering again keeps its id")

	// Every node's FSM holds the same group. NB: no broker heartbeats
	// here, so the master may be declared dead meanwhile: compare with
	// the leader's group, not with a fixed master.
	for i := range c.nodes {
		require.Eventually(t, func() bool {
			g := c.nodes[i].Group("b")
			return g != nil && len(g.Members) == 3 && reflect.DeepEqual(g, c.nodes[c.leader()].Group("b"))
		}, waitFor, 5*time.Millisecond, "node %d", i)
	}
}

// startGroup registers brokers 1, 2, 3 of "b" (1 master), heartbeats them
// and puts 2 in the SyncStateSet.
func startGroup(t *testing.T, c *cluster, inSync []int64) map[int64]*beater {
	beats := map[int64]*beater{}
	for id := int64(1); id <= 3; id++ {
		role := c.register("b", "127.0.0.1:1"+string(rune('0'+id))+"911")
		require.Equal(t, id, role.BrokerID)
		beats[id] = c.beat("b", id, 100*id)
	}
	c.eventually(func(n *Node) error {
		g := n.Group("b")
		_, err := n.AlterSyncStateSet("b", 1, g.MasterEpoch, inSync, g.SyncStateSetEpoch)
		return err
	})
	c.group("b", func(g *Group) bool { return slices.Equal(g.SyncStateSet, inSync) })
	return beats
}

func TestCluster_MasterTimeoutElectsInSyncReplica(t *testing.T) {
	c := newCluster(t, 3, nil)
	beats := startGroup(t, c, []int64{1, 2})
	before := c.group("b", func(*Group) bool { return true })

	beats[1].halt()
	g := c.group("b", func(g *Group) bool { return g.MasterID != 1 })
	require.Equal(t, int64(2), g.MasterID, "the in-sync replica is elected, not 3 (out of sync, larger offset)")
	require.Equal(t, before.MasterEpoch+1, g.MasterEpoch)
	require.Equal(t, []int64{2}, g.SyncStateSet)
	require.Equal(t, before.SyncStateSetEpoch+1, g.SyncStateSetEpoch)

	// The old master's epoch is fenced: it can no longer change the set.
	l := c.nodes[c.leader()]
	_, err := l.AlterSyncStateSet("b", 1, before.MasterEpoch, []int64{1, 2}, before.SyncStateSetEpoch)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int16(protocol.ControllerFencedMasterEpoch), ce.Code)
}

func TestCluster_NoUncleanElection(t *testing.T) {
	c := newCluster(t, 3, nil)
	beats := startGroup(t, c, []int64{1})
	beats[1].halt()
	// The master is cleared (the decision that no one could be elected),
	// and no one else becomes master although 2 and 3 are alive.
	g := c.group("b", func(g *Group) bool { return g.MasterID == NoMaster })
	require.Equal(t, int32(1), g.MasterEpoch)
	require.Equal(t, []int64{1}, g.SyncStateSet)
	l := c.nodes[c.leader()]
	_, err := l.ElectMaster("b", 2)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int16(protocol.ControllerElectMasterFailed), ce.Code)
	require.Contains(t, ce.Remark, "elect_unclean")
	_, err = l.ElectMaster("b", NoMaster)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int16(protocol.ControllerMasterNotAvailable), ce.Code)

	// The in-sync replica comes back: it is master again, in a new epoch.
	beats[1] = c.beat("b", 1, 100)
	g = c.group("b", func(g *Group) bool { return g.MasterID == 1 })
	require.Equal(t, int32(2), g.MasterEpoch)
}

func TestCluster_UncleanElection(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.ElectUnclean = true })
	beats := startGroup(t, c, []int64{1})
	beats[1].halt()
	g := c.group("b", func(g *Group) bool { return g.MasterID != 1 && g.MasterID != NoMaster })
	require.Equal(t, int64(3), g.MasterID, "the replica with the larger offset")
	require.Equal(t, int32(2), g.MasterEpoch)
}

func TestCluster_PlannedSwitchover(t *testing.T) {
	c := newCluster(t, 3, nil)
	startGroup(t, c, []int64{1, 2})
	var role Role
	c.eventually(func(n *Node) error {
		var err error
		role, err = n.ElectMaster("b", 2)
		return err
	})
	require.Equal(t, int64(2), role.MasterID)
	require.Equal(t, int32(2), role.MasterEpoch)
	require.Equal(t, "127.0.0.1:12911", role.MasterAddr)

	l := c.nodes[c.leader()]
	for _, tc := range []struct {
		id   int64
		code int16
	}{
		{2, protocol.ControllerMasterStillExist},
		{3, protocol.ControllerElectMasterFailed},
		{9, protocol.ControllerBrokerMetadataNotExist},
	} {
		_, err := l.ElectMaster("b", tc.id)
		var ce *Error
		require.ErrorAs(t, err, &ce, "id %d", tc.id)
		require.Equal(t, tc.code, ce.Code, "id %d: %s", tc.id, ce.Remark)
	}
	_, err := l.ElectMaster("nope", 1)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int16(protocol.ControllerBrokerNeedToBeRegistered), ce.Code)
}

func TestCluster_LeaderCloseKeepsServing(t *testing.T) {
	c := newCluster(t, 3, nil)
	startGroup(t, c, []int64{1, 2})
	before := c.group("b", func(*Group) bool { return true })
	old := c.leader()
	c.close(old)
	l := c.leader()
	require.NotEqual(t, old, l)
	g := c.group("b", func(*Group) bool { return true })
	require.Equal(t, before, g, "state intact after the leader left")
	r := c.register("b", "127.0.0.1:14911")
	require.Equal(t, int64(4), r.BrokerID)
	require.Equal(t, int64(1), r.MasterID)
}

func TestCluster_RestartRestoresState(t *testing.T) {
	c := newCluster(t, 3, nil)
	startGroup(t, c, []int64{1, 2})
	for _, n := range c.nodes {
		require.NoError(t, n.Snapshot())
	}
	// Entries after the snapshot: restored from the log.
	c.register("x", "127.0.0.1:20911")
	c.beat("x", 1, 0)
	c.eventually(func(n *Node) error {
		_, err := n.ElectMaster("b", 2)
		return err
	})
	want := map[string]*Group{"b": c.group("b", func(g *Group) bool { return g.MasterID == 2 }),
		"x": c.group("x", func(*Group) bool { return true })}
	// Wait until every node applied everything, then restart them all.
	for i := range c.nodes {
		require.Eventually(t, func() bool {
			g := c.nodes[i].Group("b")
			return g != nil && g.MasterID == 2 && c.nodes[i].Group("x") != nil
		}, waitFor, 5*time.Millisecond)
	}
	c.closeAll()
	for i := range c.nodes {
		c.open(i, nil)
	}
	for name, g := range want {
		require.Equal(t, g, c.group(name, func(*Group) bool { return true }))
	}
	// And one node alone comes back with the same state from its dir.
	c.close(0)
	c.open(0, nil)
	require.Eventually(t, func() bool {
		g := c.nodes[0].Group("b")
		return g != nil && g.MasterEpoch == want["b"].MasterEpoch
	}, waitFor, 5*time.Millisecond)
}

// TestCluster_FailoverTime REPORTS (does not assert) how long the leader
// takes to elect a new master after the master's last heartbeat, and how
// long a new controller leader takes to serve after the old one closed.
func TestCluster_FailoverTime(t *testing.T) {
	if testing.Short() {
		t.Skip("timing report")
	}
	c := newCluster(t, 3, nil)
	beats := startGroup(t, c, []int64{1, 2, 3})
	var elect []time.Duration
	master := int64(1)
	for round := range 10 {
		// Put everyone back in sync so that each round has candidates.
		c.eventually(func(n *Node) error {
			g := n.Group("b")
			_, err := n.AlterSyncStateSet("b", master, g.MasterEpoch, []int64{1, 2, 3}, g.SyncStateSetEpoch)
			return err
		})
		beats[master].halt()
		stopped := time.Now()
		g := c.group("b", func(g *Group) bool { return g.MasterID != master })
		elect = append(elect, time.Since(stopped))
		require.NotEqual(t, NoMaster, g.MasterID, "round %d", round)
		beats[master] = c.beat("b", master, 100*master)
		master = g.MasterID
	}
	var lead []time.Duration
	for range 5 {
		old := c.leader()
		start := time.Now()
		c.close(old)
		c.leader()
		lead = append(lead, time.Since(start))
		c.open(old, nil)
	}
	t.Logf("master election after the last heartbeat (master timeout %v): %s", testMasterTimeout, quantiles(elect))
	t.Logf("controller leader failover (raft heartbeat/election timeout %v): %s", testRaftTimeout, quantiles(lead))
}

func quantiles(ds []time.Duration) string {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return "n=" + itoa(int64(len(s))) + " p50=" + s[len(s)/2].Round(time.Millisecond).String() +
		" max=" + s[len(s)-1].Round(time.Millisecond).String()
}

// TestCluster_PartitionedLeader cuts the leader off from the others: it
// stops serving (Raft's leader lease), the majority elects a leader that
// takes writes, a write sent to the cut-off node is never applied, and
// after the heal every node holds the majority's state.
func TestCluster_PartitionedLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	startGroup(t, c, []int64{1, 2})
	old := c.leader()
	cut := c.nodes[old]
	cut.stream.partition(true)
	require.Eventually(t, func() bool { return !cut.IsLeader() }, waitFor, 10*time.Millisecond,
		"a leader cut off from its majority kept serving")
	_, err := cut.Register(Registration{Cluster: "c", Name: "minority", ID: NoMaster, Addr: "127.0.0.1:30911"}, nil, 0)
	require.ErrorIs(t, err, ErrNotLeader)

	var l int
	require.Eventually(t, func() bool {
		for i, n := range c.nodes {
			if i != old && n.IsLeader() {
				l = i
				return true
			}
		}
		return false
	}, waitFor, 10*time.Millisecond, "the majority elected no leader")
	_, err = c.nodes[l].Register(Registration{Cluster: "c", Name: "majority", ID: NoMaster, Addr: "127.0.0.1:31911"}, nil, 0)
	require.NoError(t, err)

	cut.stream.partition(false)
	require.Eventually(t, func() bool { return cut.Group("majority") != nil }, waitFor, 10*time.Millisecond,
		"the healed node never caught up")
	require.Nil(t, cut.Group("minority"))
	require.Equal(t, c.nodes[l].Group("b"), cut.Group("b"))
}
