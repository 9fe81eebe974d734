package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// quiet is the tests' logger: silent unless SLUICE_TEST_LOG is set.
func quiet() *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func testConfig(dir string) conf.Broker {
	c := conf.DefaultBroker()
	c.Listen = "127.0.0.1:0"
	c.Store.Dir = dir
	c.Store.SegmentSize = 8 << 20
	c.Store.ConsumeQueueEntries = 1000
	c.EmbeddedNamesrv.Listen = "127.0.0.1:0"
	return c
}

// startBroker starts a broker on a free loopback port with its store in dir.
func startBroker(t testing.TB, c conf.Broker, opts Options) *Broker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	b, err := New(c, opts)
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })
	return b
}

func newClient(t *testing.T, st remoting.SerializeType) *remoting.Client {
	t.Helper()
	c := remoting.NewClient(remoting.ClientOptions{SerializeType: st, Logger: quiet()})
	t.Cleanup(func() { c.Close() })
	return c
}

// rawExt is an ext header given as a map (for malformed requests).
type rawExt map[string]string

func (r rawExt) ToExt(ext map[string]string) {
	for k, v := range r {
		ext[k] = v
	}
}

func invoke(t *testing.T, c *remoting.Client, addr string, code int16, h interface{ ToExt(map[string]string) }, body []byte) *remoting.Command {
	t.Helper()
	var ext map[string]string
	if h != nil {
		ext = protocol.Ext(h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
	require.NoError(t, err)
	return resp
}

func send(t *testing.T, c *remoting.Client, addr, topic string, qid int32, body string, props map[string]string) *remoting.Command {
	t.Helper()
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: qid, BornTimestamp: time.Now().UnixMilli(), Properties: string(message.AppendProperties(nil, props))}
	return invoke(t, c, addr, protocol.SendMessage, h, []byte(body))
}

func mustSend(t *testing.T, c *remoting.Client, addr, topic string, qid int32, body string, props map[string]string) protocol.SendMessageResponseHeader {
	t.Helper()
	resp := send(t, c, addr, topic, qid, body, props)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var h protocol.SendMessageResponseHeader
	require.NoError(t, h.FromExt(resp.ExtFields))
	return h
}

func heartbeat(t *testing.T, c *remoting.Client, st remoting.SerializeType, addr, clientID, grp string, subs map[string]string) {
	t.Helper()
	cd := protocol.ConsumerData{GroupName: grp, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
		ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET"}
	for topic, expr := range subs {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, protocol.SubscriptionData{Topic: topic, SubString: expr, ExpressionType: "TAG"})
	}
	body, err := remoting.EncodeBody(st, protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []protocol.ConsumerData{cd}})
	require.NoError(t, err)
	resp := invoke(t, c, addr, protocol.HeartBeat, nil, body)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
}

func pullHeader(grp, topic string, qid int32, off int64, sysFlag int32) *protocol.PullMessageRequestHeader {
	return &protocol.PullMessageRequestHeader{ConsumerGroup: grp, Topic: topic, QueueID: qid, QueueOffset: off,
		MaxMsgNums: 32, SysFlag: sysFlag, SuspendTimeoutMillis: 20000, ExpressionType: "TAG"}
}

// decodeRecords splits a pull body.
func decodeRecords(t *testing.T, body []byte) []message.Record {
	t.Helper()
	var out []message.Record
	for len(body) > 0 {
		r, err := message.Decode(body)
		require.NoError(t, err)
		out = append(out, r)
		body = body[r.TotalSize:]
	}
	return out
}

func recordBodies(t *testing.T, body []byte) []string {
	var out []string
	for _, r := range decodeRecords(t, body) {
		out = append(out, string(r.Body))
	}
	return out
}

func pullExt(t *testing.T, resp *remoting.Command) protocol.PullMessageResponseHeader {
	t.Helper()
	var h protocol.PullMessageResponseHeader
	require.NoError(t, h.FromExt(resp.ExtMap()), "code %d remark %s", resp.Code, resp.Remark)
	return h
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// waitIndexed waits until every stored message is dispatched (pulls see it).
func waitIndexed(t *testing.T, b *Broker) {
	t.Helper()
	require.Eventually(t, func() bool { return b.Store().DispatchLag() == 0 }, 10*time.Second, time.Millisecond)
}
