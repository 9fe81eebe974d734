package compat

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"
)

// The official RocketMQ 5 Go SDK's SimpleConsumer (v5.1.4) on the
// consumption features of issue 41: FIFO per message group for an
// orderly group, SQL92 receives, and the topic attribute message.type.

// newV5SimpleConsumer starts an official SimpleConsumer of group on topic
// with filter, signed with the admin account.
func newV5SimpleConsumer(t *testing.T, group, topic string, filter *rmq.FilterExpression) rmq.SimpleConsumer {
	t.Helper()
	sc, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: grpcEndpoint(t), ConsumerGroup: group,
		Credentials: &credentials.SessionCredentials{AccessKey: adminCreds.AccessKey, AccessSecret: adminCreds.SecretKey}},
		rmq.WithSimpleAwaitDuration(time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: filter}))
	require.NoError(t, err)
	require.NoError(t, sc.Start())
	t.Cleanup(func() { _ = sc.GracefulStop() })
	return sc
}

// mqadminOK runs mqadmin with the cluster's arguments and requires success.
func mqadminOK(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(mqadmin, mqadminArgs(args...)...).CombinedOutput()
	require.NoError(t, err, "mqadmin %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// v5IDs is the received messages' compat ids, sorted, with each one's
// delivery attempt ("A1@2").
func v5IDs(mvs []*rmq.MessageView) []string {
	var out []string
	for _, mv := range mvs {
		out = append(out, mv.GetProperties()[idProperty]+"@"+strconv.Itoa(int(mv.GetDeliveryAttempt())))
	}
	slices.Sort(out)
	return out
}

// TestV5SimpleConsumer_FIFOPerMessageGroup: for a group made orderly with
// mqadmin updateSubGroup -o true, two message groups on one queue: group
// B keeps flowing while A's first message is not acked; A's next waits,
// A1 is redelivered after its invisible time (attempt 2) before A2, and
// A2 and A3 follow, in order, once A1 is acked.
func TestV5SimpleConsumer_FIFOPerMessageGroup(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 1) // NB: one queue: both message groups share it
	require.Contains(t, mqadminOK(t, "updateSubGroup", "-g", group, "-b", brokerAddr, "-o", "true"), "consumeMessageOrderly=true")
	p := newV5Producer(t, topic)
	for _, id := range []string{"A1", "B1", "A2", "B2", "B3", "A3"} {
		m := &rmq.Message{Topic: topic, Body: []byte(id)}
		m.SetMessageGroup(id[:1])
		m.AddProperty(idProperty, id)
		_, err := p.Send(waitContext(t, patience), m)
		require.NoError(t, err, id)
	}
	sc := newV5SimpleConsumer(t, group, topic, rmq.SUB_ALL)
	// receive is one receive (MESSAGE_NOT_FOUND is an error in the Go
	// SDK: nothing this time); each message carries its group.
	receive := func() []*rmq.MessageView {
		t.Helper()
		mvs, _ := sc.Receive(waitContext(t, patience), 16, 10*time.Second)
		for _, mv := range mvs {
			id := mv.GetProperties()[idProperty]
			require.NotNil(t, mv.GetMessageGroup(), id)
			require.Equal(t, id[:1], *mv.GetMessageGroup(), id)
		}
		return mvs
	}
	ack := func(mv *rmq.MessageView) { t.Helper(); require.NoError(t, sc.Ack(waitContext(t, patience), mv)) }
	byID := func(mvs []*rmq.MessageView, id string) *rmq.MessageView {
		for _, mv := range mvs {
			if mv.GetProperties()[idProperty] == id {
				return mv
			}
		}
		t.Fatalf("%s not among %v", id, v5IDs(mvs))
		return nil
	}

	heads := receive()
	require.Equal(t, []string{"A1@1", "B1@1"}, v5IDs(heads), "each group's first message only")
	ack(byID(heads, "B1"))
	for _, next := range []string{"B2", "B3"} {
		got := receive()
		require.Equal(t, []string{next + "@1"}, v5IDs(got), "B flows while A1 is not acked")
		ack(got[0])
	}
	// A1's invisible time (10 s) runs out: it comes again, A2 still waits.
	var again []*rmq.MessageView
	deadline := time.Now().Add(patience)
	for len(again) == 0 {
		require.True(t, time.Now().Before(deadline), "waiting for A1's redelivery")
		again = receive()
	}
	require.Equal(t, []string{"A1@2"}, v5IDs(again), "A1 again, before A2")
	ack(again[0])
	for _, next := range []string{"A2", "A3"} {
		got := receive()
		require.Equal(t, []string{next + "@1"}, v5IDs(got), "A's next once the one before is acked")
		ack(got[0])
	}
	require.Empty(t, receive(), "nothing left")
}

// TestV5SimpleConsumer_SQL92: a SimpleConsumer subscribed with a SQL92
// expression receives exactly the messages whose properties match; one
// with an expression that does not parse gets an error naming
// ILLEGAL_FILTER_EXPRESSION.
func TestV5SimpleConsumer_SQL92(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	p := newV5Producer(t, topic)
	var want []string
	for i := range 6 {
		id := "m-" + strconv.Itoa(i)
		m := &rmq.Message{Topic: topic, Body: []byte(id)}
		m.SetTag("T")
		m.AddProperty(idProperty, id)
		if i != 5 { // NB: no property: does not match
			m.AddProperty("n", strconv.Itoa(i))
		}
		_, err := p.Send(waitContext(t, patience), m)
		require.NoError(t, err, id)
		if i >= 3 && i != 5 {
			want = append(want, id+"@1")
		}
	}
	sc := newV5SimpleConsumer(t, name(t, "group"), topic, rmq.NewFilterExpressionWithType("n >= 3 AND TAGS = 'T'", rmq.SQL92))
	var got []*rmq.MessageView
	deadline := time.Now().Add(patience)
	for len(got) < len(want) {
		require.True(t, time.Now().Before(deadline), "waiting for the matching messages; got %v", v5IDs(got))
		mvs, _ := sc.Receive(waitContext(t, patience), 16, 10*time.Second)
		got = append(got, mvs...)
	}
	require.Equal(t, want, v5IDs(got))
	for _, mv := range got {
		require.NoError(t, sc.Ack(waitContext(t, patience), mv))
	}
	mvs, _ := sc.Receive(waitContext(t, patience), 16, 10*time.Second)
	require.Empty(t, v5IDs(mvs), "the others do not match")

	bad := newV5SimpleConsumer(t, name(t, "bad"), topic, rmq.NewFilterExpressionWithType("n >>> 3", rmq.SQL92))
	_, err := bad.Receive(waitContext(t, patience), 16, 10*time.Second)
	require.Error(t, err)
	require.Contains(t, err.Error(), "ILLEGAL_FILTER_EXPRESSION")
}

// TestV5Producer_MessageTypeAttribute: a topic made FIFO with mqadmin
// updateTopic -a +message.type=FIFO takes the SDK's FIFO messages and not
// its normal ones (the route's accept_message_types, which the SDK
// checks before it sends; the broker refuses them too, see broker/v5's
// TestMessageType_RouteAndSend); -message.type makes it take both again.
func TestV5Producer_MessageTypeAttribute(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	mqadminOK(t, "updateTopic", "-t", topic, "-b", brokerAddr, "-r", "2", "-w", "2", "-a", "+message.type=FIFO")
	p := newV5Producer(t, topic)
	fifo := &rmq.Message{Topic: topic, Body: []byte("f")}
	fifo.SetMessageGroup("g")
	_, err := p.Send(waitContext(t, patience), fifo)
	require.NoError(t, err)
	_, err = p.Send(waitContext(t, patience), &rmq.Message{Topic: topic, Body: []byte("n")})
	require.ErrorContains(t, err, "message type not match")

	mqadminOK(t, "updateTopic", "-t", topic, "-b", brokerAddr, "-r", "2", "-w", "2", "-a", "-message.type")
	// NB: the SDK refreshes its route every 30 s: a new producer sees the
	// change at once.
	p2 := newV5Producer(t, topic)
	_, err = p2.Send(waitContext(t, patience), &rmq.Message{Topic: topic, Body: []byte("n")})
	require.NoError(t, err)
}
