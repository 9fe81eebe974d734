package nameserver

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// twoClusters registers broker-a (c1: T, OnlyA), broker-b (c1: T) and
// broker-c (c2: T, OnlyC).
func twoClusters(c *nsClient) (a, b, x broker) {
	a, b, x = masterA(), masterA(), masterA()
	a.cluster, b.cluster, x.cluster = "c1", "c1", "c2"
	b.name, b.addr = "broker-b", "127.0.0.1:10915"
	x.name, x.addr = "broker-c", "127.0.0.1:10919"
	a.topics = []protocol.TopicConfig{topic("T", 1), topic("OnlyA", 1)}
	b.topics = []protocol.TopicConfig{topic("T", 2)}
	x.topics = []protocol.TopicConfig{topic("T", 3), topic("OnlyC", 1)}
	for _, br := range []broker{x, b, a} {
		c.mustRegister(br)
	}
	return a, b, x
}

func TestClusterInfo(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		require.Equal(t, protocol.ClusterInfo{
			BrokerAddrTable: map[string]protocol.BrokerData{}, ClusterAddrTable: map[string][]string{},
		}, c.clusterInfo())

		a, b, x := twoClusters(c)
		slave := a
		slave.id, slave.addr = 1, "127.0.0.1:10921"
		c.mustRegister(slave)
		require.Equal(t, protocol.ClusterInfo{
			BrokerAddrTable: map[string]protocol.BrokerData{
				"broker-a": bd("c1", "broker-a", map[int64]string{0: a.addr, 1: slave.addr}),
				"broker-b": bd("c1", "broker-b", map[int64]string{0: b.addr}),
				"broker-c": bd("c2", "broker-c", map[int64]string{0: x.addr}),
			},
			ClusterAddrTable: map[string][]string{"c1": {"broker-a", "broker-b"}, "c2": {"broker-c"}},
		}, c.clusterInfo())
	})
}

// TestClusterInfo_JSON pins the shape mqadmin and the Go admin API read.
func TestClusterInfo_JSON(t *testing.T) {
	c := dial(t, startServer(t, nil), remoting.SerializeJSON)
	c.mustRegister(masterA())
	resp := c.call(protocol.GetBrokerClusterInfo, nil, nil)
	require.Equal(t, `{"brokerAddrTable":{"broker-a":{"cluster":"DefaultCluster","brokerName":"broker-a",`+
		`"brokerAddrs":{"0":"127.0.0.1:10911"}}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}`, string(resp.Body))
}

func TestTopicLists(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		require.Empty(t, c.topicList(protocol.GetAllTopicListFromNameServer, nil))
		twoClusters(c)
		require.Equal(t, []string{"OnlyA", "OnlyC", "T"}, c.topicList(protocol.GetAllTopicListFromNameServer, nil))

		byCluster := func(cluster string) []string {
			return c.topicList(protocol.GetTopicsByCluster, &protocol.GetTopicsByClusterRequestHeader{Cluster: cluster})
		}
		require.Equal(t, []string{"OnlyA", "T"}, byCluster("c1"))
		require.Equal(t, []string{"OnlyC", "T"}, byCluster("c2"))
		require.Empty(t, byCluster("nope"))

		resp := c.call(protocol.GetTopicsByCluster, nil, nil)
		require.Equal(t, int16(protocol.SystemError), resp.Code)
		require.Contains(t, resp.Remark, `"cluster"`)
	})
}

// TestTopicList_JSON: an empty list is [], not null.
func TestTopicList_JSON(t *testing.T) {
	c := dial(t, startServer(t, nil), remoting.SerializeJSON)
	require.Equal(t, `{"topicList":[]}`, string(c.call(protocol.GetAllTopicListFromNameServer, nil, nil).Body))
}

func TestDeleteTopic(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		twoClusters(c)
		del := func(topic, cluster string) {
			t.Helper()
			resp := c.call(protocol.DeleteTopicInNamesrv,
				&protocol.DeleteTopicFromNamesrvRequestHeader{Topic: topic, ClusterName: cluster}, nil)
			require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
		}
		del("T", "c1")
		rd := c.route("T")
		require.Equal(t, []protocol.QueueData{qd("broker-c", topic("T", 3))}, rd.QueueDatas)
		require.Len(t, rd.BrokerDatas, 1)
		c.route("OnlyA")

		del("T", "")
		c.noRoute("T")
		del("NeverExisted", "")
		require.Equal(t, []string{"OnlyA", "OnlyC"}, c.topicList(protocol.GetAllTopicListFromNameServer, nil))
	})
}

func TestKVConfig(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		kv := func(code int16, ns, key, value string) *remoting.Command {
			return c.call(code, &protocol.KVConfigRequestHeader{Namespace: ns, Key: key, Value: value}, nil)
		}
		list := func(ns string) *remoting.Command {
			return c.call(protocol.GetKVListByNamespace, &protocol.GetKVListByNamespaceRequestHeader{Namespace: ns}, nil)
		}

		resp := kv(protocol.GetKVConfig, "ns", "k", "")
		require.Equal(t, int16(protocol.QueryNotFound), resp.Code)
		require.Contains(t, resp.Remark, `"k"`)
		require.Equal(t, int16(protocol.QueryNotFound), list("ns").Code)

		require.Equal(t, int16(protocol.Success), kv(protocol.PutKVConfig, "ns", "k", "v1").Code)
		require.Equal(t, int16(protocol.Success), kv(protocol.PutKVConfig, "ns", "k", "v2").Code)
		require.Equal(t, int16(protocol.Success), kv(protocol.PutKVConfig, "ns", "k2", "").Code)
		require.Equal(t, int16(protocol.Success), kv(protocol.PutKVConfig, "other", "k", "o").Code)

		resp = kv(protocol.GetKVConfig, "ns", "k", "")
		require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
		var got protocol.GetKVConfigResponseHeader
		require.NoError(t, got.FromExt(resp.ExtFields))
		require.Equal(t, "v2", got.Value)

		var table kvTable
		c.decode(list("ns"), &table)
		require.Equal(t, map[string]string{"k": "v2", "k2": ""}, table.Table)

		require.Equal(t, int16(protocol.Success), kv(protocol.DeleteKVConfig, "ns", "k", "").Code)
		require.Equal(t, int16(protocol.Success), kv(protocol.DeleteKVConfig, "ns", "missing", "").Code)
		require.Equal(t, int16(protocol.QueryNotFound), kv(protocol.GetKVConfig, "ns", "k", "").Code)
		require.Equal(t, int16(protocol.Success), kv(protocol.DeleteKVConfig, "ns", "k2", "").Code)
		require.Equal(t, int16(protocol.QueryNotFound), list("ns").Code)
		require.Equal(t, int16(protocol.Success), kv(protocol.GetKVConfig, "other", "k", "").Code)

		resp = c.callExt(protocol.PutKVConfig, map[string]string{"key": "k"}, nil)
		require.Equal(t, int16(protocol.SystemError), resp.Code)
		require.Contains(t, resp.Remark, `"namespace"`)
	})
}

func TestQueryDataVersion(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		b := masterA()
		query := func(dv protocol.DataVersion) *remoting.Command {
			return c.call(protocol.QueryDataVersion, &protocol.QueryDataVersionRequestHeader{
				BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster}, c.encode(dv))
		}
		changed := func(resp *remoting.Command) bool {
			t.Helper()
			require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
			var h protocol.QueryDataVersionResponseHeader
			require.NoError(t, h.FromExt(resp.ExtFields))
			return h.Changed
		}

		resp := query(b.version)
		require.True(t, changed(resp), "unknown broker")
		require.Empty(t, resp.Body)

		c.mustRegister(b)
		resp = query(b.version)
		require.False(t, changed(resp))
		var have protocol.DataVersion
		c.decode(resp, &have)
		require.Equal(t, b.version, have)

		resp = query(protocol.DataVersion{Timestamp: b.version.Timestamp, Counter: b.version.Counter + 1})
		require.True(t, changed(resp))
		c.decode(resp, &have)
		require.Equal(t, b.version, have)

		resp = c.call(protocol.QueryDataVersion, &protocol.QueryDataVersionRequestHeader{
			BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster}, nil)
		require.Equal(t, int16(protocol.SystemError), resp.Code)
		require.Contains(t, resp.Remark, "empty body")
	})
}

func TestWritePerm(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		twoClusters(c)
		perm := func(code int16, name, key string) int {
			t.Helper()
			resp := c.call(code, &protocol.BrokerPermRequestHeader{BrokerName: name}, nil)
			require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
			n, err := strconv.Atoi(resp.ExtFields[key])
			require.NoError(t, err, "ext %s", key)
			return n
		}
		permOf := func(topic, name string) int32 {
			for _, q := range c.route(topic).QueueDatas {
				if q.BrokerName == name {
					return q.Perm
				}
			}
			t.Fatalf("no queue data of %s in %s", name, topic)
			return 0
		}

		require.Equal(t, 2, perm(protocol.WipeWritePermOfBroker, "broker-a", "wipeTopicCount"))
		require.Equal(t, int32(protocol.PermRead), permOf("T", "broker-a"))
		require.Equal(t, int32(protocol.PermRead), permOf("OnlyA", "broker-a"))
		require.Equal(t, int32(protocol.PermRead|protocol.PermWrite), permOf("T", "broker-b"))

		require.Equal(t, 2, perm(protocol.AddWritePermOfBroker, "broker-a", "addTopicCount"))
		require.Equal(t, int32(protocol.PermRead|protocol.PermWrite), permOf("T", "broker-a"))
		require.Equal(t, 0, perm(protocol.WipeWritePermOfBroker, "no-such-broker", "wipeTopicCount"))
	})
}

func TestUnknownRequestCode(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		resp := c.call(protocol.SendMessage, nil, []byte("x"))
		require.Equal(t, int16(protocol.RequestCodeNotSupported), resp.Code)
		require.NotEmpty(t, resp.Remark)
	})
}

// TestMetrics_Scrape: the nameserver's series, read with the Prometheus
// text parser, count what its route table holds: brokers, topics,
// clusters, and open connections.
func TestMetrics_Scrape(t *testing.T) {
	s := startServer(t, func(n *conf.Nameserver) { n.MetricsListen = "127.0.0.1:0" })
	values := func() map[string]float64 {
		resp, err := http.Get("http://" + s.MetricsAddr() + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.LegacyValidation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		require.NoError(t, err)
		out := map[string]float64{}
		for name, f := range families {
			if strings.HasPrefix(name, "sluice_namesrv_") {
				require.Len(t, f.GetMetric(), 1, name)
				out[name] = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return out
	}
	require.Equal(t, map[string]float64{"sluice_namesrv_brokers": 0, "sluice_namesrv_topics": 0,
		"sluice_namesrv_clusters": 0, "sluice_namesrv_connections": 0}, values())

	c := dial(t, s, remoting.SerializeJSON)
	a := masterA()
	a.topics = []protocol.TopicConfig{topic("orders", 4), topic("payments", 2)}
	c.mustRegister(a)
	other := broker{cluster: "OtherCluster", name: "broker-z", addr: "127.0.0.1:20911", ha: "127.0.0.1:20912",
		version: protocol.DataVersion{Timestamp: 1700000000000, Counter: 1}, topics: []protocol.TopicConfig{topic("orders", 4)}}
	c.mustRegister(other)
	require.Equal(t, map[string]float64{"sluice_namesrv_brokers": 2, "sluice_namesrv_topics": 2,
		"sluice_namesrv_clusters": 2, "sluice_namesrv_connections": 1}, values())
}

// TestRoute_OrderTopicConf: with order_message_enable a route carries its
// topic's ORDER_TOPIC_CONFIG value; without it (RocketMQ's default) never.
func TestRoute_OrderTopicConf(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		c := dial(t, startServer(t, func(n *conf.Nameserver) { n.OrderMessageEnable = enabled }), remoting.SerializeJSON)
		b := masterA()
		b.topics = []protocol.TopicConfig{topic("Ordered", 4), topic("Plain", 4)}
		c.mustRegister(b)
		resp := c.call(protocol.PutKVConfig, &protocol.KVConfigRequestHeader{Namespace: protocol.OrderTopicConfigNamespace,
			Key: "Ordered", Value: "broker-a:4;broker-z:4"}, nil)
		require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
		want := ""
		if enabled {
			want = "broker-a:4;broker-z:4"
		}
		require.Equal(t, want, c.route("Ordered").OrderTopicConf, "enabled %t", enabled)
		require.Empty(t, c.route("Plain").OrderTopicConf)
		require.NotContains(t, string(c.routeResp("Plain").Body), "orderTopicConf", "left out, not empty")
	}
}
