package console

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/client"
)

// v5Consumer is a RocketMQ 5 simple consumer of group speaking the gRPC
// protocol to the env's broker, as the SDKs do.
type v5Consumer struct {
	t     testing.TB
	ctx   context.Context
	mc    v2.MessagingServiceClient
	group string
}

// newV5Consumer connects and heartbeats, as the SDKs do first: the
// broker then keeps a config for the group (which the console lists
// groups by).
func newV5Consumer(t testing.TB, e *env, group string) *v5Consumer {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+e.b.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "v5-"+group, "x-mq-language", "GO", "x-mq-protocol", "v2")
	c := &v5Consumer{t: t, ctx: ctx, mc: v2.NewMessagingServiceClient(cc), group: group}
	hb, err := c.mc.Heartbeat(ctx, &v2.HeartbeatRequest{Group: &v2.Resource{Name: group}, ClientType: v2.ClientType_SIMPLE_CONSUMER})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, hb.GetStatus().GetCode())
	return c
}

// receive pops up to 8 messages of topic's queue 0 and returns their
// receipt handles; autoRenew holds them as a PushConsumer does.
func (c *v5Consumer) receive(topic string, autoRenew bool) []string {
	c.t.Helper()
	rs, err := c.mc.ReceiveMessage(c.ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: c.group},
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: topic}, Id: 0}, BatchSize: 8,
		FilterExpression:  &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
		InvisibleDuration: durationpb.New(time.Minute), LongPollingTimeout: durationpb.New(time.Second), AutoRenew: autoRenew})
	require.NoError(c.t, err)
	var handles []string
	for {
		r, err := rs.Recv()
		if err == io.EOF {
			return handles
		}
		require.NoError(c.t, err)
		if m := r.GetMessage(); m != nil {
			handles = append(handles, m.GetSystemProperties().GetReceiptHandle())
		}
	}
}

func (c *v5Consumer) ack(topic, handle string) {
	c.t.Helper()
	ar, err := c.mc.AckMessage(c.ctx, &v2.AckMessageRequest{Group: &v2.Resource{Name: c.group}, Topic: &v2.Resource{Name: topic},
		Entries: []*v2.AckMessageEntry{{ReceiptHandle: handle}}})
	require.NoError(c.t, err)
	require.Equal(c.t, v2.Code_OK, ar.GetEntries()[0].GetStatus().GetCode())
}

// nack makes a message visible again at once, as a PushConsumer holding
// it with auto_renew may.
func (c *v5Consumer) nack(topic, handle string) {
	c.t.Helper()
	cr, err := c.mc.ChangeInvisibleDuration(c.ctx, &v2.ChangeInvisibleDurationRequest{Group: &v2.Resource{Name: c.group},
		Topic: &v2.Resource{Name: topic}, ReceiptHandle: handle, InvisibleDuration: durationpb.New(0)})
	require.NoError(c.t, err)
	require.Equal(c.t, v2.Code_OK, cr.GetStatus().GetCode())
}

// TestAPI_PopGroup: a group consuming by POP (a RocketMQ 5 client) shows
// on the console: its queues with the messages in flight and redelivered
// (GET /api/groups/{group}), its in-flight count in the groups list, and
// in-flight and redelivery series in its history.
func TestAPI_PopGroup(t *testing.T) {
	e := startEnv(t, Options{})
	e.createTopic(t, "orders", 1)
	p := e.producer(t)
	for _, b := range []string{"a", "b", "c"} {
		_, err := p.Send(context.Background(), &client.Message{Topic: "orders", Body: []byte(b)})
		require.NoError(t, err)
	}
	c := newV5Consumer(t, e, "popg")
	handles := c.receive("orders", true)
	require.Len(t, handles, 3)
	c.ack("orders", handles[0])
	c.nack("orders", handles[1])
	require.Len(t, c.receive("orders", false), 1, "the nacked message, redelivered")

	var gv groupView
	require.Eventually(t, func() bool {
		if e.do(t, "GET", "/api/groups/popg", nil, &gv) != 200 || len(gv.History) == 0 {
			return false
		}
		last := gv.History[len(gv.History)-1]
		return last.InFlight == 2 && last.Redeliveries == 1
	}, 10*time.Second, 20*time.Millisecond, "the sampled in-flight and redelivery figures: %+v", &gv)
	require.Len(t, gv.Pop, 1)
	q := gv.Pop[0]
	require.Equal(t, popRow{Topic: "orders", BrokerName: "broker-a", QueueID: 0, InFlight: 2, OldestInFlightMs: q.OldestInFlightMs,
		Redeliveries: 1}, q)
	require.GreaterOrEqual(t, q.OldestInFlightMs, int64(0))

	var rows []groupRow
	require.Equal(t, 200, e.do(t, "GET", "/api/groups", nil, &rows))
	i := slices.IndexFunc(rows, func(r groupRow) bool { return r.Group == "popg" })
	require.GreaterOrEqual(t, i, 0, "the POP group is listed")
	require.Equal(t, int64(2), rows[i].InFlight)
}
