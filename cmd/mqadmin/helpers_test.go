package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// cluster is an in-process nameserver and broker on loopback.
type cluster struct {
	ns     string // nameserver address
	broker string // broker address
	b      *broker.Broker
	rc     *remoting.Client // raw requests from the test
}

// startCluster starts a nameserver and a broker registered with it, and
// waits until the nameserver knows the broker.
func startCluster(t *testing.T) *cluster { return startClusterWith(t, func(*conf.Broker) {}) }

// startClusterWith is startCluster with the broker's configuration
// changed by set.
func startClusterWith(t *testing.T, set func(*conf.Broker)) *cluster {
	t.Helper()
	ncfg := conf.DefaultNameserver()
	ncfg.Listen = "127.0.0.1:0"
	ns, err := nameserver.New(ncfg, quiet())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })

	bcfg := conf.DefaultBroker()
	bcfg.Listen = "127.0.0.1:0"
	bcfg.Store.Dir = t.TempDir()
	bcfg.Store.SegmentSize = 8 << 20
	bcfg.Store.ConsumeQueueEntries = 1000
	bcfg.NamesrvAddr = ns.Addr()
	bcfg.RegisterInterval = 100 * time.Millisecond
	set(&bcfg)
	b, err := broker.New(bcfg, broker.Options{Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })

	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet()})
	t.Cleanup(func() { rc.Close() })
	c := &cluster{ns: ns.Addr(), broker: b.Addr(), b: b, rc: rc}
	c.waitRoute(t, "TBW102")
	return c
}

// invoke sends a raw request and requires an answer.
func (c *cluster) invoke(t *testing.T, addr string, code int16, h interface{ ToExt(map[string]string) }, body []byte) *remoting.Command {
	t.Helper()
	var ext map[string]string
	if h != nil {
		ext = protocol.Ext(h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.rc.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
	require.NoError(t, err)
	return resp
}

// waitRoute waits until the nameserver has a route for topic.
func (c *cluster) waitRoute(t *testing.T, topic string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp := c.invoke(t, c.ns, protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic}, nil)
		return resp.Code == protocol.Success
	}, 10*time.Second, 10*time.Millisecond, "route of %s", topic)
}

// waitIndexed waits until every stored message is dispatched.
func (c *cluster) waitIndexed(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return c.b.Store().DispatchLag() == 0 }, 10*time.Second, time.Millisecond)
}

// send stores one message in a queue with a raw SEND_MESSAGE and returns
// the broker's answer.
func (c *cluster) send(t *testing.T, topic string, qid int32, body []byte, props map[string]string) protocol.SendMessageResponseHeader {
	t.Helper()
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: qid, BornTimestamp: time.Now().UnixMilli(), Properties: string(message.AppendProperties(nil, props))}
	resp := c.invoke(t, c.broker, protocol.SendMessage, h, body)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var rh protocol.SendMessageResponseHeader
	require.NoError(t, rh.FromExt(resp.ExtFields))
	return rh
}

// commit stores a group's offset for a queue.
func (c *cluster) commit(t *testing.T, group, topic string, qid int32, off int64) {
	t.Helper()
	resp := c.invoke(t, c.broker, protocol.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{
		ConsumerGroup: group, Topic: topic, QueueID: qid, CommitOffset: off}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
}

// heartbeat registers a consumer of group with the given subscriptions
// (topic → tag expression) over its own connection, kept open until the
// test ends.
func (c *cluster) heartbeat(t *testing.T, clientID, group string, subs map[string]string) {
	t.Helper()
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet()})
	t.Cleanup(func() { rc.Close() })
	cd := protocol.ConsumerData{GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
		ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET"}
	for topic, expr := range subs {
		typ := "TAG"
		if e, ok := strings.CutPrefix(expr, "SQL92:"); ok {
			typ, expr = "SQL92", e
		}
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, protocol.SubscriptionData{Topic: topic, SubString: expr,
			ExpressionType: typ})
	}
	body, err := remoting.EncodeBody(remoting.SerializeJSON, protocol.HeartbeatData{ClientID: clientID,
		ConsumerDataSet: []protocol.ConsumerData{cd}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rc.Invoke(ctx, c.broker, remoting.NewRequest(protocol.HeartBeat, nil, body))
	require.NoError(t, err)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
}

// result is one mqadmin run.
type result struct {
	code           int
	stdout, stderr string
}

// mq runs mqadmin against the cluster's nameserver.
func (c *cluster) mq(t *testing.T, args ...string) result {
	t.Helper()
	return mqRaw(t, append([]string{"-n", c.ns}, args...)...)
}

// mqRaw runs mqadmin with exactly args.
func mqRaw(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok runs mqadmin and requires exit status 0.
func (c *cluster) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := c.mq(t, args...)
	require.Equal(t, exitOK, r.code, "mqadmin %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	return r.stdout
}

// okJSON runs mqadmin with --json, requires success and decodes stdout
// into v.
func (c *cluster) okJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := c.ok(t, append([]string{"--json"}, args...)...)
	require.NoError(t, json.Unmarshal([]byte(out), v), out)
}

// fails runs mqadmin and requires exit status code with a one-line error
// on stderr.
func (c *cluster) fails(t *testing.T, code int, args ...string) string {
	t.Helper()
	r := c.mq(t, args...)
	require.Equal(t, code, r.code, "mqadmin %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	if code == exitError {
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	}
	return r.stderr
}

// rows returns the table lines of out split into fields.
func rows(out string) [][]string {
	var rs [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rs = append(rs, strings.Fields(l))
	}
	return rs
}

// findRow returns the first row whose leading fields equal prefix.
func findRow(t *testing.T, out string, prefix ...string) []string {
	t.Helper()
next:
	for _, r := range rows(out) {
		if len(r) < len(prefix) {
			continue
		}
		for i, p := range prefix {
			if r[i] != p {
				continue next
			}
		}
		return r
	}
	t.Fatalf("no row starting with %v in:\n%s", prefix, out)
	return nil
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	require.NoError(t, err)
	return ap
}
