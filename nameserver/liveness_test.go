package nameserver

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// eventually is the patience for state the server reaches in the
// background (a scan, a disconnect hook). Tests assert what happens, never
// how fast.
const eventually = 10 * time.Second

func TestExpiry(t *testing.T) {
	s := startServer(t, func(c *conf.Nameserver) {
		// NB: long enough that the route lookups right after a
		// registration come before the expiry.
		c.BrokerExpiry = time.Second
		c.ScanInterval = 20 * time.Millisecond
	})
	c := dial(t, s, remoting.SerializeJSON)
	b := masterA()
	b.topics = []protocol.TopicConfig{topic("T", 4)}
	c.mustRegister(b)

	// The broker stays connected but stops registering.
	require.Eventually(t, func() bool { return c.routeGone("T") }, eventually, 10*time.Millisecond)
	require.Empty(t, c.clusterInfo().BrokerAddrTable)
	require.Empty(t, c.clusterInfo().ClusterAddrTable)
	require.Empty(t, c.topicList(protocol.GetAllTopicListFromNameServer, nil))

	// It comes back with its next registration.
	c.mustRegister(b)
	c.route("T")
}

// TestDisconnect: a broker whose connection closes leaves the routes at
// once, long before BrokerExpiry; brokers on other connections stay.
func TestDisconnect(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		s := startServer(t, nil) // expiry 120 s: only the disconnect can remove
		brokerConn, other := dial(t, s, st), dial(t, s, st)
		a, b := masterA(), masterA()
		b.name, b.addr = "broker-b", "127.0.0.1:10915"
		a.topics = []protocol.TopicConfig{topic("OnlyA", 2), topic("Shared", 2)}
		b.topics = []protocol.TopicConfig{topic("Shared", 4)}
		brokerConn.mustRegister(a)
		other.mustRegister(b)
		other.route("OnlyA")

		require.NoError(t, brokerConn.c.Close())
		require.Eventually(t, func() bool { return other.routeGone("OnlyA") }, eventually, 5*time.Millisecond)
		require.Equal(t, []protocol.QueueData{qd("broker-b", topic("Shared", 4))}, other.route("Shared").QueueDatas)
		require.Equal(t, map[string][]string{"DefaultCluster": {"broker-b"}}, other.clusterInfo().ClusterAddrTable)
	})
}

// TestRegister_ClosedConnection: a registration applied after its
// connection closed (and so after the disconnect cleanup) would live until
// expiry; it is refused instead.
func TestRegister_ClosedConnection(t *testing.T) {
	rt := newRouteTable()
	b := masterA()
	b.topics = []protocol.TopicConfig{topic("T", 1)}
	r := registration{cluster: b.cluster, brokerName: b.name, brokerAddr: b.addr, connID: 7,
		topics: map[string]protocol.TopicConfig{"T": topic("T", 1)}}
	res := rt.register(r, time.Now(), func() bool { return false })
	require.False(t, res.registered)
	_, found := rt.route("T")
	require.False(t, found)
	require.Empty(t, rt.live)

	res = rt.register(r, time.Now(), func() bool { return true })
	require.True(t, res.registered)
	require.Len(t, rt.dropConn(7), 1)
	_, found = rt.route("T")
	require.False(t, found)
}

func TestLifecycle(t *testing.T) {
	cfg := conf.DefaultNameserver()
	cfg.Listen = "127.0.0.1:0"
	s, err := New(cfg, testLogger(t))
	require.NoError(t, err)
	require.Empty(t, s.Addr(), "no address before Start")
	require.NoError(t, s.Start())
	require.ErrorIs(t, s.Start(), ErrStarted)
	host, port, err := net.SplitHostPort(s.Addr())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	require.NotEqual(t, "0", port)

	// A second server on the same port fails to start, with the address.
	cfg2 := cfg
	cfg2.Listen = s.Addr()
	s2, err := New(cfg2, testLogger(t))
	require.NoError(t, err)
	err = s2.Start()
	require.Error(t, err)
	require.Contains(t, err.Error(), s.Addr())
	require.NoError(t, s2.Close())

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	require.ErrorIs(t, s.Start(), ErrClosed)

	// Close without Start.
	s3, err := New(cfg, nil)
	require.NoError(t, err)
	require.NoError(t, s3.Close())
	require.ErrorIs(t, s3.Start(), ErrClosed)
}

func TestNew_InvalidConfig(t *testing.T) {
	cfg := conf.DefaultNameserver()
	cfg.ScanInterval = time.Hour // > broker_expiry
	_, err := New(cfg, nil)
	require.ErrorIs(t, err, conf.ErrInvalid)
	require.Contains(t, err.Error(), "scan_interval")
}

// TestClose_ClosesConnections: Close drops every connection; clients see
// their calls fail instead of hanging.
func TestClose_ClosesConnections(t *testing.T) {
	cfg := conf.DefaultNameserver()
	cfg.Listen = "127.0.0.1:0"
	s, err := New(cfg, testLogger(t))
	require.NoError(t, err)
	require.NoError(t, s.Start())
	c := dial(t, s, remoting.SerializeMsgpack)
	c.mustRegister(masterA())
	require.NoError(t, s.Close())
	_, err = c.c.Invoke(t.Context(), c.addr, remoting.NewRequest(protocol.GetBrokerClusterInfo, nil, nil))
	require.Error(t, err)
}
