package nameserver

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// codecs are the serialize types the request tests run in: the official
// clients' JSON, Sluice's msgpack, and RocketMQ's binary header (whose
// bodies are JSON).
var codecs = []remoting.SerializeType{remoting.SerializeJSON, remoting.SerializeMsgpack, remoting.SerializeRocketMQ}

// forEachCodec runs f once per serialize type in codecs, as subtests.
func forEachCodec(t *testing.T, f func(t *testing.T, st remoting.SerializeType)) {
	for _, st := range codecs {
		t.Run(st.String(), func(t *testing.T) { f(t, st) })
	}
}

// testLogger logs to t's output until t's cleanup, and drops lines after
// it: a server's disconnect hook may log from a netpoll goroutine after the
// test ended, which the race detector reports as a race on t's output.
func testLogger(t testing.TB) *slog.Logger {
	w := &endedWriter{w: t.Output()}
	t.Cleanup(func() {
		w.mu.Lock()
		w.ended = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type endedWriter struct {
	mu    sync.Mutex
	w     io.Writer // guarded by mu
	ended bool      // guarded by mu
}

func (e *endedWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return len(p), nil
	}
	return e.w.Write(p)
}

// startServer runs a nameserver on 127.0.0.1:0 until the test ends. edit,
// if not nil, changes the default configuration first.
func startServer(t testing.TB, edit func(*conf.Nameserver)) *Server {
	t.Helper()
	cfg := conf.DefaultNameserver()
	cfg.Listen = "127.0.0.1:0"
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg, testLogger(t))
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// nsClient is one remoting client (so one connection) to a nameserver,
// speaking one serialize type.
type nsClient struct {
	t    testing.TB
	c    *remoting.Client
	addr string
	st   remoting.SerializeType
}

func dial(t testing.TB, s *Server, st remoting.SerializeType) *nsClient {
	t.Helper()
	opts := remoting.DefaultClientOptions()
	opts.SerializeType = st
	opts.Logger = testLogger(t)
	c := remoting.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return &nsClient{t: t, c: c, addr: s.Addr(), st: st}
}

// call sends a request with h's fields (h may be nil) and body, and returns
// the response.
func (c *nsClient) call(code int16, h interface{ ToExt(map[string]string) }, body []byte) *remoting.Command {
	c.t.Helper()
	var ext map[string]string
	if h != nil {
		ext = protocol.Ext(h)
	}
	return c.callExt(code, ext, body)
}

func (c *nsClient) callExt(code int16, ext map[string]string, body []byte) *remoting.Command {
	c.t.Helper()
	// NB: a bound for a hung server, not a speed requirement: TestBodyFlood's
	// refused registration took more than 10 s under -race on a loaded
	// machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.c.Invoke(ctx, c.addr, remoting.NewRequest(code, ext, body))
	require.NoError(c.t, err)
	require.Equal(c.t, c.st, resp.SerializeType, "a reply uses the request's serialize type")
	return resp
}

// encode marshals v in the client's body codec.
func (c *nsClient) encode(v any) []byte {
	c.t.Helper()
	b, err := remoting.EncodeBody(c.st, v)
	require.NoError(c.t, err)
	return b
}

// decode unmarshals a successful response's body in the client's codec.
func (c *nsClient) decode(resp *remoting.Command, v any) {
	c.t.Helper()
	require.Equal(c.t, int16(protocol.Success), resp.Code, "remark: %s", resp.Remark)
	require.NoError(c.t, remoting.DecodeBody(c.st, resp.Body, v))
}

// broker describes one REGISTER_BROKER.
type broker struct {
	cluster, name, addr, ha string
	id                      int64
	version                 protocol.DataVersion
	topics                  []protocol.TopicConfig
}

func masterA() broker {
	return broker{cluster: "DefaultCluster", name: "broker-a", addr: "127.0.0.1:10911", ha: "127.0.0.1:10912",
		version: protocol.DataVersion{Timestamp: 1700000000000, Counter: 1}}
}

func topic(name string, queues int32) protocol.TopicConfig {
	return protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: "SINGLE_TAG"}
}

func (b broker) header() *protocol.RegisterBrokerRequestHeader {
	return &protocol.RegisterBrokerRequestHeader{BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster,
		HAServerAddr: b.ha, BrokerID: b.id}
}

func (b broker) body() protocol.RegisterBrokerBody {
	table := make(map[string]protocol.TopicConfig, len(b.topics))
	for _, tc := range b.topics {
		table[tc.TopicName] = tc
	}
	return protocol.RegisterBrokerBody{
		TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{TopicConfigTable: table, DataVersion: b.version},
		FilterServerList:            []string{},
	}
}

// register sends b's registration with a correct bodyCrc32 and returns the
// response, whatever its code.
func (c *nsClient) register(b broker) *remoting.Command {
	c.t.Helper()
	body := c.encode(b.body())
	h := b.header()
	h.BodyCrc32 = message.BodyCRC(body)
	return c.call(protocol.RegisterBroker, h, body)
}

// mustRegister registers b and requires SUCCESS.
func (c *nsClient) mustRegister(b broker) *remoting.Command {
	c.t.Helper()
	resp := c.register(b)
	require.Equal(c.t, int16(protocol.Success), resp.Code, "register %s: %s", b.name, resp.Remark)
	return resp
}

func (c *nsClient) unregister(b broker) {
	c.t.Helper()
	resp := c.call(protocol.UnregisterBroker, &protocol.UnregisterBrokerRequestHeader{
		BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster, BrokerID: b.id}, nil)
	require.Equal(c.t, int16(protocol.Success), resp.Code, resp.Remark)
}

// routeResp asks for topic's route.
func (c *nsClient) routeResp(topic string) *remoting.Command {
	c.t.Helper()
	return c.call(protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic}, nil)
}

// route returns topic's route, requiring SUCCESS.
func (c *nsClient) route(topic string) protocol.TopicRouteData {
	c.t.Helper()
	var rd protocol.TopicRouteData
	c.decode(c.routeResp(topic), &rd)
	return rd
}

// noRoute requires TOPIC_NOT_EXIST for topic.
func (c *nsClient) noRoute(topic string) {
	c.t.Helper()
	resp := c.routeResp(topic)
	require.Equal(c.t, int16(protocol.TopicNotExist), resp.Code, "route of %q: %s", topic, resp.Remark)
}

// routeGone reports whether topic has no route (for require.Eventually).
func (c *nsClient) routeGone(topic string) bool {
	return c.routeResp(topic).Code == protocol.TopicNotExist
}

func (c *nsClient) clusterInfo() protocol.ClusterInfo {
	c.t.Helper()
	var ci protocol.ClusterInfo
	c.decode(c.call(protocol.GetBrokerClusterInfo, nil, nil), &ci)
	return ci
}

func (c *nsClient) topicList(code int16, h interface{ ToExt(map[string]string) }) []string {
	c.t.Helper()
	var tl protocol.TopicList
	c.decode(c.call(code, h, nil), &tl)
	return tl.TopicList
}

// qd is the queue data a registration of tc by brokerName produces.
func qd(brokerName string, tc protocol.TopicConfig) protocol.QueueData {
	return protocol.QueueData{BrokerName: brokerName, ReadQueueNums: tc.ReadQueueNums,
		WriteQueueNums: tc.WriteQueueNums, Perm: tc.Perm, TopicSysFlag: tc.TopicSysFlag}
}

// bd is a broker name's entry in a route.
func bd(cluster, name string, addrs map[int64]string) protocol.BrokerData {
	return protocol.BrokerData{Cluster: cluster, BrokerName: name, BrokerAddrs: addrs}
}
