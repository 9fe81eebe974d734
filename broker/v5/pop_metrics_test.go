package v5_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/servermetrics"
)

// TestPOP_MetricsAndStatus: receives, acks, a nack, an expired handle, the
// redeliveries past the invisible time and the dead letters past the
// group's max attempts each show in the group's Prometheus counters, the
// in-flight gauge follows the messages delivered and not acked, and
// POP_STATUS (mqadmin popStatus) answers the queue's in-flight count, the
// oldest in-flight message's age on the POP clock, its redeliveries and
// dead letters. Deleting the group takes its series away.
func TestPOP_MetricsAndStatus(t *testing.T) {
	var skew atomic.Int64
	b := startBrokerEdit(t, func(c *conf.Broker) { c.MetricsListen = "127.0.0.1:0" }, broker.Options{Logger: quiet(),
		PopClock: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	createTopic(t, b, "v5m", 1, "", "", false)
	gc := protocol.DefaultSubscriptionGroupConfig("mg")
	gc.RetryMaxTimes = 1 // NB: 2 deliveries, the third goes to %DLQ%mg
	body, err := json.Marshal(gc)
	require.NoError(t, err)
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})
	defer rc.Close()
	resp, err := rc.Invoke(callCtx(t, "", "", ""), b.Addr(), remoting.NewRequest(protocol.UpdateAndCreateSubscriptionGroup, nil, body))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)

	c := dial(t, b.GRPCAddr(), false)
	for i := range 4 {
		sr, err := c.SendMessage(callCtx(t, "cm", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{msg("v5m", "M"+itoa(i), "m")}})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode())
	}
	req := &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "mg"},
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "v5m"}}, BatchSize: 32,
		InvisibleDuration: durationpb.New(10 * time.Second), LongPollingTimeout: durationpb.New(time.Second)}
	ack := func(h string) v2.Code {
		t.Helper()
		r, err := c.AckMessage(callCtx(t, "cm", "", ""), &v2.AckMessageRequest{Group: &v2.Resource{Name: "mg"},
			Topic: &v2.Resource{Name: "v5m"}, Entries: []*v2.AckMessageEntry{{ReceiptHandle: h}}})
		require.NoError(t, err)
		return r.GetEntries()[0].GetStatus().GetCode()
	}
	metric := func(name string) float64 {
		t.Helper()
		v, err := servermetrics.Scrape(b.MetricsAddr())
		require.NoError(t, err)
		f, ok := v.Lookup(name, map[string]string{"group": "mg"})
		require.True(t, ok, "%s{group=mg} exported", name)
		return f
	}
	counters := func() map[string]float64 {
		t.Helper()
		out := map[string]float64{}
		for _, n := range []string{"receives", "redeliveries", "acks", "nacks", "invalid_handles", "dlq"} {
			out[n] = metric("sluice_pop_" + n + "_total")
		}
		out["inflight"] = metric("sluice_pop_inflight_messages")
		return out
	}
	status := func() protocol.PopQueueStatus {
		t.Helper()
		resp, err := rc.Invoke(callCtx(t, "", "", ""), b.Addr(), remoting.NewRequest(protocol.PopStatus,
			map[string]string{"consumerGroup": "mg", "topic": "v5m"}, nil))
		require.NoError(t, err)
		require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
		var st protocol.PopStatusBody
		require.NoError(t, json.Unmarshal(resp.Body, &st))
		require.Equal(t, "mg", st.Group)
		require.Len(t, st.Queues, 1)
		return st.Queues[0]
	}

	st, got := receive(t, c, callCtx(t, "cm", "", ""), req)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 4)
	h := func(i int) string { return got[i].GetSystemProperties().GetReceiptHandle() }
	require.Equal(t, v2.Code_OK, ack(h(0)))
	require.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, ack(h(0)), "acked twice")
	ch, err := c.ChangeInvisibleDuration(callCtx(t, "cm", "", ""), &v2.ChangeInvisibleDurationRequest{Group: &v2.Resource{Name: "mg"},
		Topic: &v2.Resource{Name: "v5m"}, ReceiptHandle: h(1), InvisibleDuration: durationpb.New(20 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, ch.GetStatus().GetCode())
	require.Equal(t, v2.Code_OK, ack(h(2)))
	require.Equal(t, map[string]float64{"receives": 4, "redeliveries": 0, "acks": 2, "nacks": 1, "invalid_handles": 1, "dlq": 0,
		"inflight": 2}, counters())
	q := status()
	require.Equal(t, protocol.PopQueueStatus{MessageQueue: protocol.MessageQueue{Topic: "v5m", BrokerName: q.BrokerName, QueueID: 0},
		InFlight: 2, OldestInFlightAgeMs: q.OldestInFlightAgeMs}, q)
	require.GreaterOrEqual(t, q.OldestInFlightAgeMs, int64(0))
	require.Less(t, q.OldestInFlightAgeMs, int64(30_000))

	// The nacked message (20 s) and the one never acked (10 s) are
	// visible again 30 s on: the latter's handle has expired, and the next
	// receive delivers both again.
	skew.Add(int64(30 * time.Second))
	require.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, ack(h(3)), "expired")
	st, got = receive(t, c, callCtx(t, "cm", "", ""), req)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 2)
	for _, m := range got {
		require.Equal(t, int32(2), m.GetSystemProperties().GetDeliveryAttempt())
	}
	require.Equal(t, map[string]float64{"receives": 6, "redeliveries": 2, "acks": 2, "nacks": 1, "invalid_handles": 2, "dlq": 0,
		"inflight": 2}, counters())
	q = status()
	require.Equal(t, 2, q.InFlight)
	require.Equal(t, int64(2), q.Redeliveries)
	require.GreaterOrEqual(t, q.OldestInFlightAgeMs, int64(30_000), "aged on the POP clock")

	// Past the group's 2 attempts both go to its dead-letter topic.
	skew.Add(int64(30 * time.Second))
	st, got = receive(t, c, callCtx(t, "cm", "", ""), req)
	require.Equal(t, v2.Code_MESSAGE_NOT_FOUND, st.GetCode(), st.GetMessage())
	require.Empty(t, got)
	require.Equal(t, map[string]float64{"receives": 6, "redeliveries": 2, "acks": 2, "nacks": 1, "invalid_handles": 2, "dlq": 2,
		"inflight": 0}, counters())
	q = status()
	require.Equal(t, protocol.PopQueueStatus{MessageQueue: protocol.MessageQueue{Topic: "v5m", BrokerName: q.BrokerName, QueueID: 0},
		OldestInFlightAgeMs: -1, Redeliveries: 2, DLQ: 2}, q)
	require.NotEmpty(t, q.BrokerName)

	// Deleting the group takes its series away.
	resp, err = rc.Invoke(callCtx(t, "", "", ""), b.Addr(), remoting.NewRequest(protocol.DeleteSubscriptionGroup,
		protocol.Ext(&protocol.DeleteSubscriptionGroupRequestHeader{GroupName: "mg"}), nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	v, err := servermetrics.Scrape(b.MetricsAddr())
	require.NoError(t, err)
	for _, n := range []string{"sluice_pop_receives_total", "sluice_pop_dlq_total", "sluice_pop_inflight_messages"} {
		_, ok := v.Lookup(n, map[string]string{"group": "mg"})
		require.False(t, ok, "%s{group=mg} after the group's deletion", n)
	}

	resp, err = rc.Invoke(callCtx(t, "", "", ""), b.Addr(), remoting.NewRequest(protocol.PopStatus, nil, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.SystemError), resp.Code, "no group: a clear error")
	require.Contains(t, resp.Remark, "consumerGroup")
}
