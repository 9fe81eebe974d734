package v5_test

import (
	"context"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/broker"
)

// TestPOP_NackWakesParkedReceive: a PushConsumer's nack (a renewed
// handle's ChangeInvisibleDuration to 1 s) makes its message visible again
// in 1 s, and a receive already parked in its long poll takes it then
// (attempt 2), not when its 8 s poll ends: the Node.js SDK's PushConsumer
// got its retry one whole long poll (20 s) after its nack. Failed before
// (answered after 8 s).
func TestPOP_NackWakesParkedReceive(t *testing.T) {
	b := startBrokerWith(t, broker.Options{Logger: quiet()})
	createTopic(t, b, "v5nack", 1, "", "", false)
	c := dial(t, b.GRPCAddr(), false)
	sendOK(t, c, msg("v5nack", "N1", "nack me"))
	req := &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "nackg"}, AutoRenew: true,
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "v5nack"}, Id: 0}, BatchSize: 32,
		LongPollingTimeout: durationpb.New(0)}
	st, got := receive(t, c, callCtx(t, "pn", "", ""), req)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 1)

	ch, err := c.ChangeInvisibleDuration(callCtx(t, "pn", "", ""), &v2.ChangeInvisibleDurationRequest{
		Group: &v2.Resource{Name: "nackg"}, Topic: &v2.Resource{Name: "v5nack"}, MessageId: "N1",
		ReceiptHandle: got[0].GetSystemProperties().GetReceiptHandle(), InvisibleDuration: durationpb.New(time.Second)})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, ch.GetStatus().GetCode(), ch.GetStatus().GetMessage())

	// NB: invisible for 1 s yet: this receive parks (one that started after
	// the second would take the message at once, which passes too).
	req.LongPollingTimeout = durationpb.New(8 * time.Second)
	begin := time.Now()
	st, got = receive(t, c, callCtx(t, "pn", "", ""), req)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 1)
	require.Equal(t, "N1", got[0].GetSystemProperties().GetMessageId())
	require.Equal(t, int32(2), got[0].GetSystemProperties().GetDeliveryAttempt())
	require.Less(t, time.Since(begin), 8*time.Second, "answered when the message was visible again, not at the end of the poll")
}

// TestPOP_ExpiryWakesParkedReceive: a message received for 10 s and not
// acked is taken, attempt 2, by a receive already parked in its 20 s long
// poll once its invisible time is over, not when that poll ends (a
// SimpleConsumer waiting 20 s longer for its redelivery). Failed before
// (answered after the 20 s poll).
func TestPOP_ExpiryWakesParkedReceive(t *testing.T) {
	b := startBrokerWith(t, broker.Options{Logger: quiet()})
	createTopic(t, b, "v5exp", 1, "", "", false)
	c := dial(t, b.GRPCAddr(), false)
	sendOK(t, c, msg("v5exp", "E1", "expire me"))
	req := &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "expg"},
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "v5exp"}, Id: 0}, BatchSize: 32,
		InvisibleDuration: durationpb.New(10 * time.Second), LongPollingTimeout: durationpb.New(0)}
	st, got := receive(t, c, callCtx(t, "se", "", ""), req)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "se")
	req.LongPollingTimeout = durationpb.New(20 * time.Second)
	begin := time.Now()
	st, got = receive(t, c, ctx, req)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 1)
	require.Equal(t, "E1", got[0].GetSystemProperties().GetMessageId())
	require.Equal(t, int32(2), got[0].GetSystemProperties().GetDeliveryAttempt())
	require.Less(t, time.Since(begin), 19*time.Second, "answered when the message was visible again, not at the end of the poll")
}
