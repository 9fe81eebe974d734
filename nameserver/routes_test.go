package nameserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// reg builds a master registration of name at addr in cluster with the
// given topics, over connection connID.
func reg(cluster, name, addr string, id int64, connID uint64, topics ...protocol.TopicConfig) registration {
	r := registration{cluster: cluster, brokerName: name, brokerAddr: addr, brokerID: id, connID: connID,
		topics: make(map[string]protocol.TopicConfig)}
	for _, tc := range topics {
		r.topics[tc.TopicName] = tc
	}
	return r
}

// checkInvariants asserts the routeTable invariants documented on the type.
func checkInvariants(t *testing.T, rt *routeTable) {
	t.Helper()
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	seen := map[string]string{}
	for name, e := range rt.brokers {
		require.NotEmpty(t, e.addrs, "broker %s has no address", name)
		require.Contains(t, rt.clusters[e.cluster], name, "broker %s missing from cluster %s", name, e.cluster)
		for _, addr := range e.addrs {
			require.NotContains(t, seen, addr, "address %s under %s and %s", addr, seen[addr], name)
			seen[addr] = name
		}
	}
	for cluster, set := range rt.clusters {
		require.NotEmpty(t, set, "cluster %s is empty", cluster)
		for name := range set {
			require.Equal(t, cluster, rt.brokers[name].cluster, "broker %s in cluster %s", name, cluster)
		}
	}
	for topic, byBroker := range rt.topics {
		require.NotEmpty(t, byBroker, "topic %s has no queue data", topic)
		for name := range byBroker {
			require.Contains(t, rt.brokers, name, "topic %s has queue data of unknown broker %s", topic, name)
		}
	}
}

func TestRouteTable_RemovalCascade(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name   string
		remove func(rt *routeTable)
	}{
		{"unregister", func(rt *routeTable) { rt.unregister("a0") }},
		{"disconnect", func(rt *routeTable) { require.Len(t, rt.dropConn(1), 1) }},
		{"expiry", func(rt *routeTable) {
			// Only a0 is old enough.
			require.Len(t, rt.expire(now.Add(100*time.Second), 99*time.Second), 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRouteTable()
			rt.register(reg("c1", "a", "a0", 0, 1, topic("OnlyA", 1), topic("Shared", 2)), now, nil)
			rt.register(reg("c1", "b", "b0", 0, 2, topic("Shared", 3)), now.Add(10*time.Second), nil)
			rt.register(reg("c2", "c", "c0", 0, 3, topic("OnlyC", 1)), now.Add(10*time.Second), nil)
			checkInvariants(t, rt)

			tc.remove(rt)
			checkInvariants(t, rt)
			_, found := rt.route("OnlyA")
			require.False(t, found)
			rd, found := rt.route("Shared")
			require.True(t, found)
			require.Equal(t, []protocol.QueueData{qd("b", topic("Shared", 3))}, rd.QueueDatas)
			require.Equal(t, map[string][]string{"c1": {"b"}, "c2": {"c"}}, rt.clusterInfo().ClusterAddrTable)
			require.Equal(t, []string{"OnlyC", "Shared"}, rt.topicList())
			require.NotContains(t, rt.live, "a0")
		})
	}
}

func TestRouteTable_DropConnOnlyItsBrokers(t *testing.T) {
	rt := newRouteTable()
	rt.register(reg("c", "a", "a0", 0, 1, topic("T", 1)), time.Now(), nil)
	rt.register(reg("c", "b", "b0", 0, 0, topic("T", 1)), time.Now(), nil) // no connection
	require.Empty(t, rt.dropConn(2), "a connection that registered nothing")
	require.Empty(t, rt.dropConn(0), "0 is no connection")
	rd, _ := rt.route("T")
	require.Len(t, rd.BrokerDatas, 2)
	require.Len(t, rt.dropConn(1), 1)
	rd, _ = rt.route("T")
	require.Equal(t, "b", rd.BrokerDatas[0].BrokerName)
	checkInvariants(t, rt)
}

// TestRouteTable_AddressMoves: an address is in the table once, whatever
// re-registers it.
func TestRouteTable_AddressMoves(t *testing.T) {
	now := time.Now()
	t.Run("slave becomes master", func(t *testing.T) {
		rt := newRouteTable()
		rt.register(reg("c", "a", "a1", 1, 0), now, nil)
		rt.register(reg("c", "a", "a1", 0, 0, topic("T", 2)), now, nil)
		rd, found := rt.route("T")
		require.True(t, found)
		require.Equal(t, map[int64]string{0: "a1"}, rd.BrokerDatas[0].BrokerAddrs)
		checkInvariants(t, rt)
	})
	t.Run("address reused by another broker name", func(t *testing.T) {
		rt := newRouteTable()
		rt.register(reg("c", "old", "x", 0, 0, topic("OldTopic", 1)), now, nil)
		rt.register(reg("c", "new", "x", 0, 0, topic("NewTopic", 1)), now, nil)
		_, found := rt.route("OldTopic")
		require.False(t, found, "the old name lost its only address, and its queue data")
		require.NotContains(t, rt.clusterInfo().BrokerAddrTable, "old")
		checkInvariants(t, rt)
	})
	t.Run("broker moves cluster", func(t *testing.T) {
		rt := newRouteTable()
		rt.register(reg("c1", "a", "a0", 0, 0, topic("T", 1)), now, nil)
		rt.register(reg("c2", "a", "a0", 0, 0, topic("T", 1)), now, nil)
		require.Equal(t, map[string][]string{"c2": {"a"}}, rt.clusterInfo().ClusterAddrTable)
		require.Equal(t, []string{"T"}, rt.topicsByCluster("c2"))
		require.Empty(t, rt.topicsByCluster("c1"))
		checkInvariants(t, rt)
	})
	t.Run("stale unregister of a moved id", func(t *testing.T) {
		rt := newRouteTable()
		rt.register(reg("c", "a", "old-host:1", 0, 0, topic("T", 1)), now, nil)
		rt.register(reg("c", "a", "new-host:1", 0, 0, topic("T", 1)), now, nil)
		rt.unregister("old-host:1")
		rd, found := rt.route("T")
		require.True(t, found, "the new instance is not removed by the old one's unregister")
		require.Equal(t, map[int64]string{0: "new-host:1"}, rd.BrokerDatas[0].BrokerAddrs)
		checkInvariants(t, rt)
	})
}

func TestRouteTable_QueryDataVersionRefreshesLiveness(t *testing.T) {
	rt := newRouteTable()
	t0 := time.Unix(1000, 0)
	r := reg("c", "a", "a0", 0, 0, topic("T", 1))
	r.dataVersion = protocol.DataVersion{Timestamp: 5, Counter: 2}
	rt.register(r, t0, nil)

	changed, have, known := rt.queryDataVersion("a0", protocol.DataVersion{Timestamp: 5, Counter: 3}, t0.Add(90*time.Second))
	require.True(t, changed)
	require.True(t, known)
	require.Equal(t, r.dataVersion, have)
	require.Empty(t, rt.expire(t0.Add(100*time.Second), 120*time.Second))
	// A changed version does not count as a registration...
	require.Len(t, rt.expire(t0.Add(121*time.Second), 120*time.Second), 1)

	// ...an unchanged one does.
	rt.register(r, t0, nil)
	changed, _, _ = rt.queryDataVersion("a0", r.dataVersion, t0.Add(90*time.Second))
	require.False(t, changed)
	require.Empty(t, rt.expire(t0.Add(121*time.Second), 120*time.Second))
	require.Len(t, rt.expire(t0.Add(211*time.Second), 120*time.Second), 1)

	changed, _, known = rt.queryDataVersion("unknown", r.dataVersion, t0)
	require.True(t, changed)
	require.False(t, known)
}

func TestRouteTable_DeleteTopic(t *testing.T) {
	rt := newRouteTable()
	rt.register(reg("c1", "a", "a0", 0, 0, topic("T", 1), topic("U", 1)), time.Now(), nil)
	rt.register(reg("c2", "b", "b0", 0, 0, topic("T", 2)), time.Now(), nil)

	require.Zero(t, rt.deleteTopic("T", "no-such-cluster"))
	require.Equal(t, 1, rt.deleteTopic("T", "c1"))
	rd, found := rt.route("T")
	require.True(t, found)
	require.Equal(t, []protocol.QueueData{qd("b", topic("T", 2))}, rd.QueueDatas)
	require.Equal(t, 1, rt.deleteTopic("T", ""))
	_, found = rt.route("T")
	require.False(t, found)
	require.Zero(t, rt.deleteTopic("T", ""))
	require.Equal(t, []string{"U"}, rt.topicList())
	checkInvariants(t, rt)
}
