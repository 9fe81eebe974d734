package main

import (
	"context"
	"io"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
)

// TestPopStatus: after a RocketMQ 5 consumer received two messages of a
// queue and acked one, popStatus shows that queue with one message in
// flight (and its age), none waiting, redelivered or dead-lettered, and
// the topic's other queues (popped, empty) with nothing in flight, in a
// table and in JSON; a group that received nothing by POP is a clear
// error, and -g is required.
func TestPopStatus(t *testing.T) {
	c := startClusterWith(t, func(b *conf.Broker) { b.GRPC.Listen = "127.0.0.1:0" })
	c.send(t, "orders", 1, []byte("a"), nil)
	c.send(t, "orders", 1, []byte("b"), nil)
	c.waitRoute(t, "orders")

	cc, err := grpc.NewClient("passthrough:///"+c.b.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	mc := v2.NewMessagingServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "v5-consumer", "x-mq-language", "GO", "x-mq-protocol", "v2")
	rs, err := mc.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "popg"},
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "orders"}, Id: 1}, BatchSize: 8,
		FilterExpression:  &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
		InvisibleDuration: durationpb.New(time.Minute), LongPollingTimeout: durationpb.New(time.Second)})
	require.NoError(t, err)
	var handles []string
	for {
		r, err := rs.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if m := r.GetMessage(); m != nil {
			handles = append(handles, m.GetSystemProperties().GetReceiptHandle())
		}
	}
	require.Len(t, handles, 2)
	ar, err := mc.AckMessage(ctx, &v2.AckMessageRequest{Group: &v2.Resource{Name: "popg"}, Topic: &v2.Resource{Name: "orders"},
		Entries: []*v2.AckMessageEntry{{ReceiptHandle: handles[0]}}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, ar.GetEntries()[0].GetStatus().GetCode())

	out := c.ok(t, "popStatus", "-g", "popg", "-t", "orders")
	require.Equal(t, []string{"#Topic", "#Broker", "Name", "#QID", "#In", "Flight", "#Waiting", "#Oldest", "In", "Flight",
		"#Redeliveries", "#DLQ"}, rows(out)[0])
	row := findRow(t, out, "orders", "broker-a", "1")
	require.Len(t, row, 8)
	require.Equal(t, []string{"1", "0"}, row[3:5], "in flight, waiting")
	require.NotEqual(t, "-", row[5], "the oldest in flight's age")
	require.Equal(t, []string{"0", "0"}, row[6:8], "redeliveries, DLQ")
	require.Regexp(t, `In Flight: 1  Waiting: 0  Oldest In Flight: \d\S*  Redeliveries: 0  DLQ: 0`, out)

	// consumerProgress adds the POP totals under the offsets.
	out = c.ok(t, "consumerProgress", "-g", "popg")
	require.Regexp(t, `POP \(RocketMQ 5 consumers, per queue: popStatus\): In Flight: 1  Waiting: 0  Oldest In Flight: \d\S*  Redeliveries: 0  DLQ: 0`, out)
	var pv struct {
		Pop *struct {
			InFlight         int64  `json:"inFlight"`
			OldestInFlightMs *int64 `json:"oldestInFlightMs"`
		} `json:"pop"`
	}
	c.okJSON(t, &pv, "consumerProgress", "-g", "popg")
	require.NotNil(t, pv.Pop)
	require.Equal(t, int64(1), pv.Pop.InFlight)
	require.NotNil(t, pv.Pop.OldestInFlightMs)

	var v popStatusView
	c.okJSON(t, &v, "popStatus", "-g", "popg")
	require.Len(t, v.Queues, 4, "a receive pops every queue of the topic from the one it names on")
	for i, q := range v.Queues {
		require.Equal(t, "orders", q.Topic)
		require.Equal(t, int32(i), q.QueueID)
		if i != 1 {
			require.Equal(t, protocol.PopQueueStatus{MessageQueue: q.MessageQueue, OldestInFlightAgeMs: -1}, q, "nothing in flight")
			continue
		}
		require.Equal(t, 1, q.InFlight)
		require.GreaterOrEqual(t, q.OldestInFlightAgeMs, int64(0))
	}

	stderr := c.fails(t, exitError, "popStatus", "-g", "nobody", "-t", "orders")
	require.Contains(t, stderr, "consumer group nobody has received nothing by POP")
	c.fails(t, exitUsage, "popStatus", "-t", "orders")
}

// TestTopicRoute_GrpcEndpoint: a broker serving RocketMQ 5 clients shows
// its gRPC endpoint in topicRoute, in the table and in JSON (grpcAddrs by
// broker id), where v5 SDKs are to be pointed; one with grpc.listen off
// shows "-" and no grpcAddrs.
func TestTopicRoute_GrpcEndpoint(t *testing.T) {
	type route struct {
		Brokers []struct {
			GrpcAddrs map[string]string `json:"grpcAddrs"`
		} `json:"brokers"`
	}
	c := startClusterWith(t, func(b *conf.Broker) { b.GRPC.Listen = "127.0.0.1:0" })
	c.send(t, "orders", 1, []byte("a"), nil)
	c.waitRoute(t, "orders")
	grpcAddr := c.b.GRPCAddr()
	require.NotEmpty(t, grpcAddr)
	out := c.ok(t, "topicRoute", "-t", "orders")
	require.Equal(t, []string{"DefaultCluster", "broker-a", "0", c.broker, grpcAddr}, findRow(t, out, "DefaultCluster"))
	var r route
	c.okJSON(t, &r, "topicRoute", "-t", "orders")
	require.Len(t, r.Brokers, 1)
	require.Equal(t, map[string]string{"0": grpcAddr}, r.Brokers[0].GrpcAddrs)

	off := startClusterWith(t, func(b *conf.Broker) { b.GRPC.Listen = conf.GRPCOff })
	off.send(t, "orders", 1, []byte("a"), nil)
	off.waitRoute(t, "orders")
	out = off.ok(t, "topicRoute", "-t", "orders")
	require.Equal(t, []string{"DefaultCluster", "broker-a", "0", off.broker, "-"}, findRow(t, out, "DefaultCluster"))
	r = route{}
	off.okJSON(t, &r, "topicRoute", "-t", "orders")
	require.Len(t, r.Brokers, 1)
	require.Nil(t, r.Brokers[0].GrpcAddrs)
}
