package compat

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"
)

// The official RocketMQ 5 Go SDK (github.com/apache/rocketmq-clients/golang/v5,
// v5.1.4) against the broker's gRPC port, read back by the official 4.x
// client.

var (
	v5Once     sync.Once
	v5Endpoint string
)

// grpcEndpoint is the broker's gRPC address, from its log (its port is
// picked at start: --listen 127.0.0.1:0).
func grpcEndpoint(t *testing.T) string {
	t.Helper()
	v5Once.Do(func() {
		logBytes, err := os.ReadFile(brokerLog)
		require.NoError(t, err)
		m := regexp.MustCompile(`serving RocketMQ 5 clients \(gRPC\)" grpc=(\S+)`).FindSubmatch(logBytes)
		require.NotNil(t, m, "the broker logs its gRPC address")
		v5Endpoint = string(m[1])
		// NB: the SDK logs under ~/logs unless told; its TLS switch is a
		// package variable (per-client options have no effect in v5.1.4).
		// Its logs go in the run's directory, removed at the end (a
		// directory of their own was left in /tmp by every run).
		os.Setenv("rocketmq.client.logRoot", filepath.Join(workDir, "v5-sdk-logs"))
		rmq.ResetLogger()
		rmq.EnableSsl = overTLS
	})
	require.NotEmpty(t, v5Endpoint)
	return v5Endpoint
}

// newV5Producer starts an official v5 producer for topics, signed with
// the admin account.
func newV5Producer(t *testing.T, topics ...string) rmq.Producer {
	t.Helper()
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: grpcEndpoint(t),
		Credentials: &credentials.SessionCredentials{AccessKey: adminCreds.AccessKey, AccessSecret: adminCreds.SecretKey}},
		rmq.WithTopics(topics...))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.GracefulStop() })
	return p
}

// TestV5Producer_NormalFIFODelay: the official v5 producer sends normal,
// FIFO and delayed messages; a 4.x push consumer receives each once, with
// the v5 message id as its id, a FIFO group's messages on one queue in
// order, a delayed one not before its time.
func TestV5Producer_NormalFIFODelay(t *testing.T) {
	topic := name(t, "topic")
	createTopic(t, topic, 4)
	p := newV5Producer(t, topic)
	in := consumeAll(t, topic)

	msgIDs := map[string]string{} // compat id → v5 message id
	send := func(id string, edit func(m *rmq.Message)) {
		t.Helper()
		m := &rmq.Message{Topic: topic, Body: []byte("body of " + id)}
		m.SetTag("TagA")
		m.SetKeys("key-" + id)
		m.AddProperty(idProperty, id)
		if edit != nil {
			edit(m)
		}
		rs, err := p.Send(waitContext(t, patience), m)
		require.NoError(t, err, id)
		require.Len(t, rs, 1)
		require.NotEmpty(t, rs[0].MessageID)
		msgIDs[id] = rs[0].MessageID
	}
	var want []string
	for i := range 4 {
		id := "normal-" + strconv.Itoa(i)
		send(id, nil)
		want = append(want, id)
	}
	var fifo []string
	for i := range 5 {
		id := "fifo-" + strconv.Itoa(i)
		send(id, func(m *rmq.Message) { m.SetMessageGroup("order-7") })
		fifo = append(fifo, id)
	}
	want = append(want, fifo...)
	deliverAt := time.Now().Add(2 * time.Second)
	send("delay-0", func(m *rmq.Message) { m.SetDelayTimestamp(deliverAt) })
	want = append(want, "delay-0")

	got := in.waitIDs(t, want)
	byID := map[string][]delivery{}
	for _, d := range got {
		id := d.msg.GetProperty(idProperty)
		byID[id] = append(byID[id], d)
	}
	for _, id := range want {
		require.Len(t, byID[id], 1, "%s delivered once", id)
		m := byID[id][0].msg
		require.Equal(t, msgIDs[id], m.MsgId, "%s: the 4.x id is the v5 message id (UNIQ_KEY)", id)
		require.Equal(t, "body of "+id, string(m.Body))
		require.Equal(t, "TagA", m.GetTags())
		require.Equal(t, "key-"+id, m.GetKeys())
	}
	q := byID[fifo[0]][0].msg.Queue.QueueId
	for i, id := range fifo {
		m := byID[id][0].msg
		require.Equal(t, q, m.Queue.QueueId, "%s: one group, one queue", id)
		if i > 0 {
			require.Greater(t, m.QueueOffset, byID[fifo[i-1]][0].msg.QueueOffset, "%s after %s", id, fifo[i-1])
		}
	}
	// NB: a correctness bound, not a speed one: the timer delivers within
	// 500 ms of its time, never a second early.
	require.True(t, byID["delay-0"][0].at.After(deliverAt.Add(-time.Second)),
		"delivered at %s, due at %s", byID["delay-0"][0].at, deliverAt)
}

// TestV5SimpleConsumer_ReceiveAckRedeliver: messages a 4.x producer sent
// are received by the official v5 SimpleConsumer; the acked ones do not
// come back, the one left un-acked comes back after its invisible time
// (10 s) with delivery attempt 2, and its changed handle acks it.
func TestV5SimpleConsumer_ReceiveAckRedeliver(t *testing.T) {
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	p := newProducer(t, "p")
	var want []string
	for i := range 3 {
		id := "m-" + strconv.Itoa(i)
		sendSync(t, p, id, newMessage(topic, id, "TagA"))
		want = append(want, id)
	}
	sc, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: grpcEndpoint(t), ConsumerGroup: name(t, "group"),
		Credentials: &credentials.SessionCredentials{AccessKey: adminCreds.AccessKey, AccessSecret: adminCreds.SecretKey}},
		rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.NewFilterExpression("TagA")}))
	require.NoError(t, err)
	require.NoError(t, sc.Start())
	t.Cleanup(func() { _ = sc.GracefulStop() })

	// receiveUntil receives until done says so (MESSAGE_NOT_FOUND is an
	// error in the Go SDK: nothing this time).
	receiveUntil := func(what string, done func(got []*rmq.MessageView) bool) []*rmq.MessageView {
		t.Helper()
		var got []*rmq.MessageView
		deadline := time.Now().Add(patience)
		for !done(got) {
			require.True(t, time.Now().Before(deadline), "waiting for %s; got %d", what, len(got))
			mvs, _ := sc.Receive(waitContext(t, patience), 16, 10*time.Second)
			got = append(got, mvs...)
		}
		return got
	}
	first := receiveUntil("3 messages", func(got []*rmq.MessageView) bool { return len(got) >= 3 })
	require.Len(t, first, 3)
	byID := map[string]*rmq.MessageView{}
	for _, mv := range first {
		id := mv.GetProperties()[idProperty]
		require.NotContains(t, byID, id, "delivered once")
		byID[id] = mv
		require.Equal(t, int32(1), mv.GetDeliveryAttempt())
		require.Equal(t, "body of "+id, string(mv.GetBody()))
	}
	for _, id := range want {
		require.Contains(t, byID, id)
	}
	require.NoError(t, sc.Ack(waitContext(t, patience), byID["m-0"]))
	require.NoError(t, sc.Ack(waitContext(t, patience), byID["m-1"]))

	again := receiveUntil("the un-acked message again", func(got []*rmq.MessageView) bool { return len(got) >= 1 })
	require.Len(t, again, 1, "only the un-acked message comes back")
	mv := again[0]
	require.Equal(t, "m-2", mv.GetProperties()[idProperty])
	require.Equal(t, int32(2), mv.GetDeliveryAttempt())
	require.NoError(t, sc.ChangeInvisibleDuration(mv, time.Minute))
	require.NoError(t, sc.Ack(waitContext(t, patience), mv))
	mvs, _ := sc.Receive(waitContext(t, patience), 16, 10*time.Second)
	require.Empty(t, mvs, "nothing left")
}
