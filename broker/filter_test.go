package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

// sqlHeartbeat registers clientID in grp with one subscription of type typ
// and returns the broker's answer.
func sqlHeartbeat(t *testing.T, c *remoting.Client, addr, clientID, grp, topic, typ, expr string, version int64) *remoting.Command {
	t.Helper()
	cd := protocol.ConsumerData{GroupName: grp, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
		ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET", SubscriptionDataSet: []protocol.SubscriptionData{
			{Topic: topic, SubString: expr, ExpressionType: typ, SubVersion: version},
			{Topic: "%RETRY%" + grp, SubString: "*", ExpressionType: "TAG", SubVersion: version}}}
	body, err := remoting.EncodeBody(remoting.SerializeJSON, protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []protocol.ConsumerData{cd}})
	require.NoError(t, err)
	return invoke(t, c, addr, protocol.HeartBeat, nil, body)
}

// pullBodies pulls queue 0 of topic from offset 0 and returns the code and
// the bodies.
func pullBodies(t *testing.T, c *remoting.Client, addr string, h *protocol.PullMessageRequestHeader) (int16, string, []string) {
	t.Helper()
	resp := invoke(t, c, addr, protocol.PullMessage, h, nil)
	if resp.Code != protocol.Success {
		return resp.Code, resp.Remark, nil
	}
	return resp.Code, resp.Remark, recordBodies(t, resp.Body)
}

// sendOrders sends n messages to topic t, queue 0: body i, amount i*10,
// region eu, us or none in turn.
func sendOrders(t *testing.T, c *remoting.Client, addr, topic string, n int) {
	t.Helper()
	for i := range n {
		props := map[string]string{"amount": fmt.Sprint(i * 10), message.PropTags: "T" + fmt.Sprint(i%2)}
		if r := []string{"eu", "us", ""}[i%3]; r != "" {
			props["region"] = r
		}
		mustSend(t, c, addr, topic, 0, fmt.Sprint(i), props)
	}
}

// TestPull_SQL92 filters pulls with the group's registered SQL92
// subscription (the official Go push consumer's pulls carry none), with
// the pull's own expression, and refuses bad expressions at heartbeat and
// pull time with RocketMQ's codes.
func TestPull_SQL92(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	addr := b.Addr()
	sendOrders(t, c, addr, "orders", 12)
	waitIndexed(t, b)

	resp := sqlHeartbeat(t, c, addr, "c1", "g", "orders", "SQL92", "amount BETWEEN 20 AND 80 AND (region = 'eu' OR region IS NULL)", 1)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	h := pullHeader("g", "orders", 0, 0, pullSuspend)
	code, remark, got := pullBodies(t, c, addr, h)
	require.Equal(t, protocol.Success, int(code), remark)
	require.Equal(t, []string{"2", "3", "5", "6", "8"}, got, "messages lacking region match IS NULL")

	// The pull's own expression wins (sysFlag subscription bit).
	own := pullHeader("g", "orders", 0, 0, pullSubscription)
	own.ExpressionType, own.Subscription = "SQL92", "amount >= 90 AND TAGS = 'T1'"
	_, _, got = pullBodies(t, c, addr, own)
	require.Equal(t, []string{"9", "11"}, got)
	// The official Go pull consumer repeats its registered SQL92
	// expression labelled TAG.
	own.ExpressionType, own.Subscription = "TAG", "amount BETWEEN 20 AND 80 AND (region = 'eu' OR region IS NULL)"
	_, _, got = pullBodies(t, c, addr, own)
	require.Equal(t, []string{"2", "3", "5", "6", "8"}, got)
	// A bad expression in a pull: SUBSCRIPTION_PARSE_FAILED with where.
	own.ExpressionType, own.Subscription = "SQL92", "amount > 'x'"
	code, remark, _ = pullBodies(t, c, addr, own)
	require.Equal(t, protocol.SubscriptionParseFailed, int(code))
	require.Contains(t, remark, `column 10, at "'x'"`)

	// A newer version of the subscription filters the next pull.
	resp = sqlHeartbeat(t, c, addr, "c1", "g", "orders", "sql92", "region = 'us'", 2)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	_, _, got = pullBodies(t, c, addr, h)
	require.Equal(t, []string{"1", "4", "7", "10"}, got)
	// A pull newer than the registered version: SUBSCRIPTION_NOT_LATEST.
	h.SubVersion = 3
	code, remark, _ = pullBodies(t, c, addr, h)
	require.Equal(t, protocol.SubscriptionNotLatest, int(code), remark)
	h.SubVersion = 0

	// A bad expression in a heartbeat is refused and not registered: the
	// group's pulls find no subscription.
	resp = sqlHeartbeat(t, c, addr, "c2", "bad", "orders", "SQL92", "amount BETWEEN 9 AND 1", 1)
	require.Equal(t, protocol.SubscriptionParseFailed, int(resp.Code))
	require.Contains(t, resp.Remark, "group bad")
	require.Contains(t, resp.Remark, "below its lower bound")
	code, _, _ = pullBodies(t, c, addr, pullHeader("bad", "orders", 0, 0, 0))
	require.Equal(t, protocol.SubscriptionNotExist, int(code))
	resp = sqlHeartbeat(t, c, addr, "c2", "bad", "orders", "XPATH", "a", 1)
	require.Equal(t, protocol.SubscriptionParseFailed, int(resp.Code))
	require.Contains(t, resp.Remark, "TAG or SQL92")
}

// TestPull_SQL92TooDeep: a SQL92 expression of a million parentheses, in a
// heartbeat or in a pull, is refused with SUBSCRIPTION_PARSE_FAILED. It
// overflowed the parser's stack: a fatal error, which took the broker down.
func TestPull_SQL92TooDeep(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	sendOrders(t, c, b.Addr(), "orders", 1)
	for _, deep := range []string{
		strings.Repeat("(", 1_000_000) + "amount = 1" + strings.Repeat(")", 1_000_000),
		strings.Repeat("(", 300) + "amount = 1" + strings.Repeat(")", 300),
	} {
		resp := sqlHeartbeat(t, c, b.Addr(), "c1", "g", "orders", "SQL92", deep, 1)
		require.Equal(t, protocol.SubscriptionParseFailed, int(resp.Code), resp.Remark)
		own := pullHeader("g", "orders", 0, 0, pullSubscription)
		own.ExpressionType, own.Subscription = "SQL92", deep
		code, remark, _ := pullBodies(t, c, b.Addr(), own)
		require.Equal(t, protocol.SubscriptionParseFailed, int(code), remark)
		require.Less(t, len(remark), 512, "the remark names the limit, not the expression")
	}
}

// TestPull_SQL92Disabled: with filter.property_enabled off, SQL92
// subscriptions are refused with a remark saying how to turn it on.
func TestPull_SQL92Disabled(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Filter.PropertyEnabled = false
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	sendOrders(t, c, b.Addr(), "orders", 1)
	resp := sqlHeartbeat(t, c, b.Addr(), "c1", "g", "orders", "SQL92", "a = 1", 1)
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "filter.property_enabled: true")
	resp = sqlHeartbeat(t, c, b.Addr(), "c1", "g", "orders", "TAG", "*", 1)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	own := pullHeader("g", "orders", 0, 0, pullSubscription)
	own.ExpressionType, own.Subscription = "SQL92", "a = 1"
	code, remark, _ := pullBodies(t, c, b.Addr(), own)
	require.Equal(t, protocol.SystemError, int(code))
	require.Contains(t, remark, "SLUICE_FILTER_PROPERTY_ENABLED=true")
}

// TestPull_SQL92Retry filters a group's retry topic with the SQL92
// subscription of each message's original topic (RETRY_TOPIC).
func TestPull_SQL92Retry(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	addr := b.Addr()
	resp := sqlHeartbeat(t, c, addr, "c1", "g", "orders", "SQL92", "amount > 50", 1)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	for i, p := range []map[string]string{
		{message.PropRetryTopic: "orders", "amount": "10"},
		{message.PropRetryTopic: "orders", "amount": "60"},
		{message.PropRetryTopic: "other", "amount": "10"}, // no SQL92 subscription to other
		{"amount": "10"}, // not a retried message
	} {
		mustSend(t, c, addr, "%RETRY%g", 0, fmt.Sprint(i), p)
	}
	waitIndexed(t, b)
	_, remark, got := pullBodies(t, c, addr, pullHeader("g", "%RETRY%g", 0, 0, 0))
	require.Equal(t, []string{"1", "2", "3"}, got, remark)
}

// TestPull_SQL92LongPoll: a parked pull wakes only for a message that
// passes its filter.
func TestPull_SQL92LongPoll(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	addr := b.Addr()
	sendOrders(t, c, addr, "orders", 1) // creates the topic; offset 1 is next
	resp := sqlHeartbeat(t, c, addr, "c1", "g", "orders", "SQL92", "region = 'us'", 1)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	waitIndexed(t, b)

	type answer struct {
		code   int16
		bodies []string
	}
	out := make(chan answer, 1)
	go func() {
		code, _, got := pullBodies(t, c, addr, pullHeader("g", "orders", 0, 1, pullSuspend))
		out <- answer{code, got}
	}()
	require.Eventually(t, func() bool { return b.hold.Parked() == 1 }, 10*time.Second, time.Millisecond)
	mustSend(t, c, addr, "orders", 0, "eu", map[string]string{"region": "eu"})
	mustSend(t, c, addr, "orders", 0, "none", nil)
	waitIndexed(t, b) // NB: the dispatcher told the hold of both before this returns
	require.Equal(t, int64(1), b.hold.Parked(), "messages that do not match leave the pull parked")
	mustSend(t, c, addr, "orders", 0, "us", map[string]string{"region": "us"})
	a := <-out
	require.Equal(t, answer{protocol.Success, []string{"us"}}, a)
}
