package main

import (
	"context"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestProducerConnection lists a 4.x producer group's members and a
// RocketMQ 5 producer, under the topic it publishes to.
func TestProducerConnection(t *testing.T) {
	c := startClusterWith(t, func(b *conf.Broker) { b.GRPC.Listen = "127.0.0.1:0" })
	c.send(t, "orders", 0, []byte("x"), nil)
	c.waitRoute(t, "orders")

	// A 4.x producer of group pg, on its own connection.
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet()})
	t.Cleanup(func() { rc.Close() })
	body, err := remoting.EncodeBody(remoting.SerializeJSON, protocol.HeartbeatData{ClientID: "10.0.0.9@9",
		ProducerDataSet: []protocol.ProducerData{{GroupName: "pg"}}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rc.Invoke(ctx, c.broker, remoting.NewRequest(protocol.HeartBeat, nil, body))
	require.NoError(t, err)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)

	// A RocketMQ 5 producer of topic orders.
	cc, err := grpc.NewClient("passthrough:///"+c.b.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	st, err := v2.NewMessagingServiceClient(cc).Telemetry(metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "v5-producer"))
	require.NoError(t, err)
	kind := v2.ClientType_PRODUCER
	require.NoError(t, st.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{ClientType: &kind,
		UserAgent: &v2.UA{Language: v2.Language_GOLANG, Version: "5.1.4"},
		PubSub:    &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: []*v2.Resource{{Name: "orders"}}}}}}}))
	_, err = st.Recv()
	require.NoError(t, err)
	require.NoError(t, st.CloseSend())

	out := c.ok(t, "producerConnection", "-g", "pg", "-t", "orders")
	require.Equal(t, []string{"GO", "V4_9_8"}, findRow(t, out, "10.0.0.9@9")[2:4])
	out = c.ok(t, "producerConnection", "-g", "orders", "-t", "orders")
	row := findRow(t, out, "v5-producer")
	require.Equal(t, []string{"GO", "V5_1_4"}, row[2:4])
	require.Equal(t, "127.0.0.1", mustAddrPort(t, row[1]).Addr().String())

	stderr := c.fails(t, exitError, "producerConnection", "-g", "nobody", "-t", "orders")
	require.Contains(t, stderr, "producer group nobody has no live client on the brokers of topic orders")
	c.fails(t, exitUsage, "producerConnection", "-g", "pg")
}
