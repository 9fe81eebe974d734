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
)

// putGroup stores a subscription group config on b over remoting.
func putGroup(t *testing.T, b *broker.Broker, gc protocol.SubscriptionGroupConfig) {
	t.Helper()
	body, err := json.Marshal(gc)
	require.NoError(t, err)
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})
	defer rc.Close()
	resp, err := rc.Invoke(callCtx(t, "", "", ""), b.Addr(), remoting.NewRequest(protocol.UpdateAndCreateSubscriptionGroup, nil, body))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
}

// sendOK sends m and requires it stored.
func sendOK(t *testing.T, c v2.MessagingServiceClient, m *v2.Message) {
	t.Helper()
	sr, err := c.SendMessage(callCtx(t, "cs", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{m}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode(), sr.GetStatus().GetMessage())
}

func fifoMsg(topic, id, group string) *v2.Message {
	m := msg(topic, id, id)
	m.SystemProperties.MessageGroup = &group
	m.SystemProperties.MessageType = v2.MessageType_FIFO
	return m
}

// bodies is the received messages' bodies by delivery attempt ("A1@1").
func bodies(ms []*v2.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body)+"@"+itoa(int(m.GetSystemProperties().GetDeliveryAttempt())))
	}
	return out
}

// TestPOP_FIFOPerMessageGroup: for an orderly group, a message group's
// next message is received only once the one before it is acked (or
// dead-lettered past the group's max attempts), also across a redelivery
// after the invisible time, while another message group of the same
// queue keeps flowing; a group that is not orderly receives them all at
// once.
func TestPOP_FIFOPerMessageGroup(t *testing.T) {
	var skew atomic.Int64
	b := startBrokerWith(t, broker.Options{Logger: quiet(), PopClock: func() time.Time {
		return time.Now().Add(time.Duration(skew.Load()))
	}})
	createTopic(t, b, "v5ord", 1, "", "", false)
	gc := protocol.DefaultSubscriptionGroupConfig("ordg")
	gc.ConsumeMessageOrderly, gc.RetryMaxTimes = true, 1
	putGroup(t, b, gc)
	c := dial(t, b.GRPCAddr(), false)
	for _, id := range []string{"A1", "B1", "A2", "B2", "A3"} {
		sendOK(t, c, fifoMsg("v5ord", id, id[:1]))
	}
	req := func(group string) *v2.ReceiveMessageRequest {
		return &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: group},
			MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "v5ord"}}, BatchSize: 32,
			InvisibleDuration: durationpb.New(10 * time.Second), LongPollingTimeout: durationpb.New(0)}
	}
	// NB: no long poll: one pop, so what one receive gets is what one
	// pop (with its own re-pops) takes.
	recv := func(group string) []*v2.Message {
		t.Helper()
		st, got := receive(t, c, callCtx(t, "c9", "", ""), req(group))
		if st.GetCode() == v2.Code_MESSAGE_NOT_FOUND {
			return nil
		}
		require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
		return got
	}
	ack := func(m *v2.Message) {
		t.Helper()
		res, err := c.AckMessage(callCtx(t, "c9", "", ""), &v2.AckMessageRequest{Group: &v2.Resource{Name: "ordg"},
			Topic: &v2.Resource{Name: "v5ord"}, Entries: []*v2.AckMessageEntry{{MessageId: m.GetSystemProperties().GetMessageId(),
				ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()}}})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, res.GetStatus().GetCode(), res.GetStatus().GetMessage())
	}

	require.ElementsMatch(t, []string{"A1@1", "B1@1", "A2@1", "B2@1", "A3@1"}, bodies(recv("plain")), "not orderly: all at once")

	got := recv("ordg")
	require.Equal(t, []string{"A1@1", "B1@1"}, bodies(got), "each group's head only")
	require.Empty(t, recv("ordg"))
	a1 := got[0]
	ack(got[1])
	got = recv("ordg")
	require.Equal(t, []string{"B2@1"}, bodies(got), "B flows while A1 is not acked")
	ack(got[0])

	skew.Add(int64(11 * time.Second))
	got = recv("ordg")
	require.Equal(t, []string{"A1@2"}, bodies(got), "A1 again, A2 still waits")
	require.NotEqual(t, a1.GetSystemProperties().GetReceiptHandle(), got[0].GetSystemProperties().GetReceiptHandle())
	ack(got[0])
	got = recv("ordg")
	require.Equal(t, []string{"A2@1"}, bodies(got), "A2 once A1 is acked")
	require.Equal(t, "A", got[0].GetSystemProperties().GetMessageGroup())
	require.Equal(t, v2.MessageType_FIFO, got[0].GetSystemProperties().GetMessageType())

	// A2 is never acked: after its max attempts (2) it is dead-lettered,
	// and A3 comes.
	skew.Add(int64(11 * time.Second))
	require.Equal(t, []string{"A2@2"}, bodies(recv("ordg")))
	skew.Add(int64(11 * time.Second))
	got = recv("ordg")
	require.Equal(t, []string{"A3@1"}, bodies(got), "A2 dead-lettered: A3 is next, in the same receive")
	dead := readAll(t, b.Store(), "%DLQ%ordg", 0)
	require.Len(t, dead, 1)
	require.Equal(t, "A2", string(dead[0].Body))
	ack(got[0])
	require.Empty(t, recv("ordg"))
}

// TestPOP_SQLFilter: a receive with a SQL92 filter gets the messages whose
// properties match (the others are acked and skipped); a bad expression
// is ILLEGAL_FILTER_EXPRESSION with the parser's message; a broker that
// does not filter by properties refuses SQL92 receives.
func TestPOP_SQLFilter(t *testing.T) {
	b := startBroker(t, nil)
	createTopic(t, b, "v5sql", 2, "", "", false)
	c := dial(t, b.GRPCAddr(), false)
	for i := range 6 {
		m := msg("v5sql", "SQL"+itoa(i), "s"+itoa(i))
		m.UserProperties = map[string]string{"n": itoa(i)}
		sendOK(t, c, m)
	}
	req := func(expr string) *v2.ReceiveMessageRequest {
		return &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "sqlg"},
			MessageQueue:     &v2.MessageQueue{Topic: &v2.Resource{Name: "v5sql"}},
			FilterExpression: &v2.FilterExpression{Type: v2.FilterType_SQL, Expression: expr},
			BatchSize:        32, InvisibleDuration: durationpb.New(10 * time.Second),
			LongPollingTimeout: durationpb.New(100 * time.Millisecond)}
	}
	st, got := receive(t, c, callCtx(t, "c10", "", ""), req("n >= 3 AND n < 5"))
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.ElementsMatch(t, []string{"s3@1", "s4@1"}, bodies(got))

	st, _ = receive(t, c, callCtx(t, "c10", "", ""), req("n >>> 3"))
	require.Equal(t, v2.Code_ILLEGAL_FILTER_EXPRESSION, st.GetCode())
	require.Contains(t, st.GetMessage(), "SQL92 expression")
	require.Contains(t, st.GetMessage(), "column", "the parser's message, with the position")

	off := startBroker(t, func(cfg *conf.Broker) { cfg.Filter.PropertyEnabled = false })
	createTopic(t, off, "v5sql", 1, "", "", false)
	st, _ = receive(t, dial(t, off.GRPCAddr(), false), callCtx(t, "c10", "", ""), req("n > 1"))
	require.Equal(t, v2.Code_NOT_IMPLEMENTED, st.GetCode())
	require.Contains(t, st.GetMessage(), "filter.property_enabled")
}

// updateTopic sends UPDATE_AND_CREATE_TOPIC with attribute changes and
// returns the answer.
func updateTopic(t *testing.T, b *broker.Broker, name, attrs string) *remoting.Command {
	t.Helper()
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})
	defer rc.Close()
	h := protocol.CreateTopicRequestHeader{Topic: name, DefaultTopic: "TBW102", ReadQueueNums: 2, WriteQueueNums: 2,
		Perm: 6, TopicFilterType: "SINGLE_TAG", Attributes: attrs}
	resp, err := rc.Invoke(callCtx(t, "", "", ""), b.Addr(), remoting.NewRequest(protocol.UpdateAndCreateTopic, protocol.Ext(&h), nil))
	require.NoError(t, err)
	return resp
}

// TestMessageType_RouteAndSend: a topic's message.type attribute
// (updateTopic -a) gives QueryRoute's accept_message_types, and a message
// of another type is refused with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (as
// RocketMQ's proxy); an update without -a keeps the attribute, a bad one
// is refused naming the values, a removal makes the topic MIXED again.
func TestMessageType_RouteAndSend(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b.GRPCAddr(), false)
	route := func() []v2.MessageType {
		t.Helper()
		r, err := c.QueryRoute(callCtx(t, "c11", "", ""), &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "v5typed"}})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, r.GetStatus().GetCode(), r.GetStatus().GetMessage())
		return r.GetMessageQueues()[0].GetAcceptMessageTypes()
	}
	send := func(m *v2.Message) *v2.Status {
		t.Helper()
		sr, err := c.SendMessage(callCtx(t, "c11", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{m}})
		require.NoError(t, err)
		return sr.GetEntries()[0].GetStatus()
	}

	resp := updateTopic(t, b, "v5typed", "+message.type=FIFO")
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.Equal(t, []v2.MessageType{v2.MessageType_FIFO}, route())
	st := send(msg("v5typed", "T1", "normal"))
	require.Equal(t, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, st.GetCode())
	require.Contains(t, st.GetMessage(), "topic v5typed takes FIFO messages only")
	require.Equal(t, v2.Code_OK, send(fifoMsg("v5typed", "T2", "g")).GetCode())

	resp = updateTopic(t, b, "v5typed", "")
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.Equal(t, []v2.MessageType{v2.MessageType_FIFO}, route(), "an update without attributes keeps them")

	resp = updateTopic(t, b, "v5typed", "+message.type=QUEUE")
	require.Equal(t, int16(protocol.SystemError), resp.Code)
	require.Contains(t, resp.Remark, "want one of NORMAL, FIFO, DELAY, TRANSACTION, MIXED")
	require.Equal(t, []v2.MessageType{v2.MessageType_FIFO}, route(), "a refused change changes nothing")

	resp = updateTopic(t, b, "v5typed", "+message.type=NORMAL")
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.Equal(t, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, send(fifoMsg("v5typed", "T3", "g")).GetCode())
	require.Equal(t, v2.Code_OK, send(msg("v5typed", "T4", "n")).GetCode())

	resp = updateTopic(t, b, "v5typed", "-message.type")
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.Len(t, route(), 4, "MIXED: every type")
	require.Equal(t, v2.Code_OK, send(fifoMsg("v5typed", "T5", "g")).GetCode())
}

// TestSettings_OrderlyGroup: a group made orderly (updateSubGroup -o true)
// with retryMaxTimes 4 gets fifo and 5 max attempts in its Telemetry
// settings.
func TestSettings_OrderlyGroup(t *testing.T) {
	b := startBroker(t, nil)
	gc := protocol.DefaultSubscriptionGroupConfig("fifog")
	gc.ConsumeMessageOrderly, gc.RetryMaxTimes = true, 4
	putGroup(t, b, gc)
	c := dial(t, b.GRPCAddr(), false)
	ts, err := c.Telemetry(callCtx(t, "c12", "", ""))
	require.NoError(t, err)
	st := v2.ClientType_SIMPLE_CONSUMER
	require.NoError(t, ts.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType: &st, PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "fifog"}}}}}}))
	got, err := ts.Recv()
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, got.GetStatus().GetCode())
	require.True(t, got.GetSettings().GetSubscription().GetFifo())
	require.Equal(t, int32(5), got.GetSettings().GetBackoffPolicy().GetMaxAttempts())
	require.NoError(t, ts.CloseSend())
}
