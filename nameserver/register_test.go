package nameserver

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

func TestRegister_Route(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		b := masterA()
		t1, t2 := topic("TopicTest", 4), topic("TBW102", 8)
		t2.Perm = protocol.PermRead | protocol.PermWrite | protocol.PermInherit
		t2.TopicSysFlag = 1
		b.topics = []protocol.TopicConfig{t1, t2}

		resp := c.mustRegister(b)
		require.Empty(t, resp.ExtFields["masterAddr"], "a master gets no master address")
		require.Empty(t, resp.ExtFields["haServerAddr"])
		require.Empty(t, resp.Body, "no ORDER_TOPIC_CONFIG yet")

		for _, tc := range b.topics {
			require.Equal(t, protocol.TopicRouteData{
				QueueDatas:        []protocol.QueueData{qd("broker-a", tc)},
				BrokerDatas:       []protocol.BrokerData{bd("DefaultCluster", "broker-a", map[int64]string{0: "127.0.0.1:10911"})},
				FilterServerTable: map[string][]string{},
			}, c.route(tc.TopicName), tc.TopicName)
		}
	})
}

// TestRoute_CompactJSON pins the bytes of a route body: the spec 5.1
// example, compact, with brokerAddrs quoted and free of whitespace (the Go
// client parses brokerAddrs by hand).
func TestRoute_CompactJSON(t *testing.T) {
	c := dial(t, startServer(t, nil), remoting.SerializeJSON)
	b := masterA()
	b.topics = []protocol.TopicConfig{topic("TopicTest", 4)}
	c.mustRegister(b)

	resp := c.routeResp("TopicTest")
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	const want = `{"queueDatas":[{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],` +
		`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:10911"}}],` +
		`"filterServerTable":{}}`
	require.Equal(t, want, string(resp.Body))

	const specExample = `{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],
	 "filterServerTable":{},
	 "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
	require.JSONEq(t, specExample, string(resp.Body))
}

func TestRoute_UnknownTopic(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		resp := c.routeResp("NoSuchTopic")
		require.Equal(t, int16(protocol.TopicNotExist), resp.Code)
		require.Contains(t, resp.Remark, `"NoSuchTopic"`)
		require.Empty(t, resp.Body)
	})
}

func TestRegister_NewDataVersionUpdatesQueues(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		b := masterA()
		b.topics = []protocol.TopicConfig{topic("T", 4)}
		c.mustRegister(b)

		// Same data version: the table is not read again (spec 5.2 step 3).
		b.topics = []protocol.TopicConfig{topic("T", 16)}
		c.mustRegister(b)
		require.Equal(t, []protocol.QueueData{qd("broker-a", topic("T", 4))}, c.route("T").QueueDatas)

		b.version.Counter++
		c.mustRegister(b)
		require.Equal(t, []protocol.QueueData{qd("broker-a", topic("T", 16))}, c.route("T").QueueDatas)
	})
}

func TestRegister_MissingTopicsStay(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		b := masterA()
		b.topics = []protocol.TopicConfig{topic("Old", 2), topic("Kept", 2)}
		c.mustRegister(b)

		b.version.Counter++
		b.topics = []protocol.TopicConfig{topic("Kept", 3), topic("New", 1)}
		c.mustRegister(b)
		require.Equal(t, []protocol.QueueData{qd("broker-a", topic("Old", 2))}, c.route("Old").QueueDatas)
		require.Equal(t, []protocol.QueueData{qd("broker-a", topic("Kept", 3))}, c.route("Kept").QueueDatas)
		require.Equal(t, []protocol.QueueData{qd("broker-a", topic("New", 1))}, c.route("New").QueueDatas)
	})
}

func TestRegister_TwoBrokersOneCluster(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		a, b := masterA(), masterA()
		b.name, b.addr = "broker-b", "127.0.0.1:10915"
		a.topics = []protocol.TopicConfig{topic("Shared", 4), topic("OnlyA", 1)}
		b.topics = []protocol.TopicConfig{topic("Shared", 2)}
		// Registered out of order: routes are sorted by broker name.
		c.mustRegister(b)
		c.mustRegister(a)

		require.Equal(t, protocol.TopicRouteData{
			QueueDatas: []protocol.QueueData{qd("broker-a", topic("Shared", 4)), qd("broker-b", topic("Shared", 2))},
			BrokerDatas: []protocol.BrokerData{
				bd("DefaultCluster", "broker-a", map[int64]string{0: a.addr}),
				bd("DefaultCluster", "broker-b", map[int64]string{0: b.addr}),
			},
			FilterServerTable: map[string][]string{},
		}, c.route("Shared"))
		require.Len(t, c.route("OnlyA").BrokerDatas, 1)
		require.Equal(t, map[string][]string{"DefaultCluster": {"broker-a", "broker-b"}}, c.clusterInfo().ClusterAddrTable)
	})
}

func TestRegister_Slave(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		m := masterA()
		m.topics = []protocol.TopicConfig{topic("T", 4)}
		s := m
		s.id, s.addr, s.ha = 1, "127.0.0.1:10921", "127.0.0.1:10922"
		s.topics = []protocol.TopicConfig{topic("T", 99), topic("SlaveOnly", 1)}

		// A slave before its master: no master address to give.
		resp := c.mustRegister(s)
		require.Empty(t, resp.ExtFields["masterAddr"])
		c.mustRegister(m)
		resp = c.mustRegister(s)
		require.Equal(t, "127.0.0.1:10911", resp.ExtFields["masterAddr"])
		require.Equal(t, "127.0.0.1:10912", resp.ExtFields["haServerAddr"])

		rd := c.route("T")
		require.Equal(t, []protocol.QueueData{qd("broker-a", topic("T", 4))}, rd.QueueDatas, "a slave's topics are ignored")
		require.Equal(t, map[int64]string{0: m.addr, 1: s.addr}, rd.BrokerDatas[0].BrokerAddrs)
		c.noRoute("SlaveOnly")

		// The master leaves: the slave keeps the broker name (and its
		// routes) alive; when it leaves too, everything goes.
		c.unregister(m)
		require.Equal(t, map[int64]string{1: s.addr}, c.route("T").BrokerDatas[0].BrokerAddrs)
		c.unregister(s)
		c.noRoute("T")
		require.Empty(t, c.clusterInfo().BrokerAddrTable)
	})
}

func TestUnregister(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		a, b := masterA(), masterA()
		b.name, b.addr = "broker-b", "127.0.0.1:10915"
		a.topics = []protocol.TopicConfig{topic("Shared", 4), topic("OnlyA", 1)}
		b.topics = []protocol.TopicConfig{topic("Shared", 2)}
		c.mustRegister(a)
		c.mustRegister(b)

		c.unregister(a)
		c.noRoute("OnlyA")
		rd := c.route("Shared")
		require.Equal(t, []protocol.QueueData{qd("broker-b", topic("Shared", 2))}, rd.QueueDatas)
		require.Equal(t, []string{"Shared"}, c.topicList(protocol.GetAllTopicListFromNameServer, nil))
		require.Equal(t, map[string][]string{"DefaultCluster": {"broker-b"}}, c.clusterInfo().ClusterAddrTable)

		// Unregistering again, or an unknown broker, still succeeds.
		c.unregister(a)
		c.unregister(b)
		c.noRoute("Shared")
		require.Empty(t, c.clusterInfo().ClusterAddrTable)
	})
}

func TestRegister_BadCRC(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		b := masterA()
		b.topics = []protocol.TopicConfig{topic("T", 4)}
		body := c.encode(b.body())
		h := b.header()
		h.BodyCrc32 = message.BodyCRC(body) ^ 1
		resp := c.call(protocol.RegisterBroker, h, body)
		require.Equal(t, int16(protocol.SystemError), resp.Code)
		require.Contains(t, resp.Remark, "crc32 not match")
		c.noRoute("T")

		h.BodyCrc32 = 0 // 0 = do not check
		resp = c.call(protocol.RegisterBroker, h, body)
		require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
		c.route("T")
	})
}

func TestRegister_BadRequests(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		good := masterA()
		good.topics = []protocol.TopicConfig{topic("T", 4)}
		goodBody := c.encode(good.body())
		withTable := func(table map[string]protocol.TopicConfig) []byte {
			b := good.body()
			b.TopicConfigSerializeWrapper.TopicConfigTable = table
			return c.encode(b)
		}
		neg := topic("T", 4)
		neg.ReadQueueNums = -1
		header := func(edit func(h *protocol.RegisterBrokerRequestHeader)) map[string]string {
			h := good.header()
			if edit != nil {
				edit(h)
			}
			return protocol.Ext(h)
		}
		for _, tc := range []struct {
			name   string
			ext    map[string]string
			body   []byte
			remark string
		}{
			{"garbage body", header(nil), []byte("\xc1{not a body"), "body is not a valid"},
			{"wrong body shape", header(nil), c.encode([]string{"x"}), "body is not a valid"},
			{"missing brokerName", map[string]string{"brokerAddr": good.addr, "clusterName": "c", "haServerAddr": "", "brokerId": "0"},
				goodBody, `"brokerName"`},
			{"bad brokerId", map[string]string{"brokerName": "b", "brokerAddr": good.addr, "clusterName": "c", "haServerAddr": "", "brokerId": "zero"},
				goodBody, `"brokerId"`},
			{"empty brokerName", header(func(h *protocol.RegisterBrokerRequestHeader) { h.BrokerName = "" }), goodBody, "brokerName is empty"},
			{"empty clusterName", header(func(h *protocol.RegisterBrokerRequestHeader) { h.ClusterName = "" }), goodBody, "clusterName is empty"},
			{"bad brokerAddr", header(func(h *protocol.RegisterBrokerRequestHeader) { h.BrokerAddr = "localhost" }), goodBody, "is not ip:port"},
			{"negative brokerId", header(func(h *protocol.RegisterBrokerRequestHeader) { h.BrokerID = -1 }), goodBody, "negative"},
			{"compressed", header(func(h *protocol.RegisterBrokerRequestHeader) { h.Compressed = true }), goodBody, "compressed"},
			{"key and name differ", header(nil), withTable(map[string]protocol.TopicConfig{"A": topic("B", 1)}), `holds the config of topic "B"`},
			{"negative queues", header(nil), withTable(map[string]protocol.TopicConfig{"T": neg}), "negative queue count"},
			{"empty topic name", header(nil), withTable(map[string]protocol.TopicConfig{"": topic("", 1)}), "empty topic name"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := c.callExt(protocol.RegisterBroker, tc.ext, tc.body)
				require.Equal(t, int16(protocol.SystemError), resp.Code)
				require.Contains(t, resp.Remark, tc.remark)
				c.noRoute("T")
				require.Empty(t, c.clusterInfo().BrokerAddrTable)
			})
		}
	})
}

// TestRegister_EmptyBody registers a broker without touching queue data,
// as Java does for a body-less registration.
func TestRegister_EmptyBody(t *testing.T) {
	c := dial(t, startServer(t, nil), remoting.SerializeJSON)
	b := masterA()
	b.topics = []protocol.TopicConfig{topic("T", 4)}
	c.mustRegister(b)
	resp := c.call(protocol.RegisterBroker, b.header(), nil)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.Equal(t, []protocol.QueueData{qd("broker-a", topic("T", 4))}, c.route("T").QueueDatas)

	other := masterA()
	other.name, other.addr = "broker-z", "127.0.0.1:10999"
	resp = c.call(protocol.RegisterBroker, other.header(), nil)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.Contains(t, c.clusterInfo().BrokerAddrTable, "broker-z")
}

// TestRegister_OldSenderBody: senders below V3_0_11 send the bare
// TopicConfigSerializeWrapper.
func TestRegister_OldSenderBody(t *testing.T) {
	c := dial(t, startServer(t, nil), remoting.SerializeJSON)
	b := masterA()
	b.topics = []protocol.TopicConfig{topic("T", 3)}
	req := remoting.NewRequest(protocol.RegisterBroker, protocol.Ext(b.header()),
		c.encode(b.body().TopicConfigSerializeWrapper))
	req.Version = protocol.Version3011 - 1
	resp, err := c.c.Invoke(t.Context(), c.addr, req)
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.Equal(t, []protocol.QueueData{qd("broker-a", topic("T", 3))}, c.route("T").QueueDatas)
}

func TestRegister_OrderTopicConfigBody(t *testing.T) {
	forEachCodec(t, func(t *testing.T, st remoting.SerializeType) {
		c := dial(t, startServer(t, nil), st)
		resp := c.call(protocol.PutKVConfig, &protocol.KVConfigRequestHeader{
			Namespace: "ORDER_TOPIC_CONFIG", Key: "Orders", Value: "broker-a:4"}, nil)
		require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)

		var table kvTable
		c.decode(c.mustRegister(masterA()), &table)
		require.Equal(t, map[string]string{"Orders": "broker-a:4"}, table.Table)
	})
}
