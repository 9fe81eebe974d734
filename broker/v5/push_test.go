package v5_test

import (
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/internal/protocol"
)

// TestPush_ForwardToDeadLetterQueue: on a broker, a FIFO PushConsumer's
// ForwardMessageToDeadLetterQueue stores the message in %DLQ%group with
// the broker's count of its deliveries (reconsume times 0 after one
// delivery, whatever delivery_attempt the client sends) and acks it, so
// its message group's next comes; forwarding it again is
// INVALID_RECEIPT_HANDLE. An auto_renew receive pops with 60 s. Before,
// the RPC answered codes.Unimplemented and auto_renew NOT_IMPLEMENTED.
func TestPush_ForwardToDeadLetterQueue(t *testing.T) {
	b := startBrokerWith(t, broker.Options{Logger: quiet()})
	createTopic(t, b, "v5push", 1, "", "", false)
	gc := protocol.DefaultSubscriptionGroupConfig("pushg")
	gc.ConsumeMessageOrderly, gc.RetryMaxTimes = true, 2
	putGroup(t, b, gc)
	c := dial(t, b.GRPCAddr(), false)
	for _, id := range []string{"A1", "A2"} {
		sendOK(t, c, fifoMsg("v5push", id, "A"))
	}
	attempt := "first"
	req := &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "pushg"}, AutoRenew: true, AttemptId: &attempt,
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "v5push"}, Id: 0}, BatchSize: 32, LongPollingTimeout: durationpb.New(0)}
	st, got := receive(t, c, callCtx(t, "pc", "", ""), req)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Equal(t, []string{"A1@1"}, bodies(got))
	require.Equal(t, int64(60), got[0].GetSystemProperties().GetInvisibleDuration().GetSeconds())
	st, again := receive(t, c, callCtx(t, "pc", "", ""), req)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Equal(t, got[0].GetSystemProperties().GetReceiptHandle(), again[0].GetSystemProperties().GetReceiptHandle(), "same attempt id")

	fwd := func() *v2.Status {
		t.Helper()
		r, err := c.ForwardMessageToDeadLetterQueue(callCtx(t, "pc", "", ""), &v2.ForwardMessageToDeadLetterQueueRequest{
			Group: &v2.Resource{Name: "pushg"}, Topic: &v2.Resource{Name: "v5push"}, MessageId: "A1",
			ReceiptHandle: got[0].GetSystemProperties().GetReceiptHandle(), DeliveryAttempt: 3, MaxDeliveryAttempts: 3})
		require.NoError(t, err)
		return r.GetStatus()
	}
	require.Equal(t, v2.Code_OK, fwd().GetCode())
	dead := readAll(t, b.Store(), "%DLQ%pushg", 0)
	require.Len(t, dead, 1)
	require.Equal(t, "A1", string(dead[0].Body))
	require.Equal(t, int32(0), dead[0].ReconsumeTimes, "the broker delivered it once")
	require.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, fwd().GetCode(), "acked by the forward")

	next := "second"
	req.AttemptId = &next
	st, got = receive(t, c, callCtx(t, "pc", "", ""), req)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Equal(t, []string{"A2@1"}, bodies(got), "A1 dead-lettered: A2 is next")
	res, err := c.AckMessage(callCtx(t, "pc", "", ""), &v2.AckMessageRequest{Group: &v2.Resource{Name: "pushg"},
		Topic: &v2.Resource{Name: "v5push"}, Entries: []*v2.AckMessageEntry{{ReceiptHandle: got[0].GetSystemProperties().GetReceiptHandle()}}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, res.GetStatus().GetCode(), res.GetStatus().GetMessage())
}
