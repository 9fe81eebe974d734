package v5_test

import (
	"context"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker"
	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

const halfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"

// checkEvery is the check tests' transaction timeout and check interval:
// the broker gives a half message up after 15 checks a producer got, so
// a test has 15 of these to answer one.
const checkEvery = 200 * time.Millisecond

func txMsg(topic, id, body string) *v2.Message {
	m := msg(topic, id, body)
	m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
	return m
}

// sendTx sends one transactional message as client and returns its entry.
func sendTx(t *testing.T, c v2.MessagingServiceClient, client string, m *v2.Message) *v2.SendResultEntry {
	t.Helper()
	sr, err := c.SendMessage(callCtx(t, client, "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{m}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode(), sr.GetStatus().GetMessage())
	require.NotEmpty(t, sr.Entries[0].TransactionId)
	return sr.Entries[0]
}

// endTx ends a transaction as client and returns the answer's status.
func endTx(t *testing.T, c v2.MessagingServiceClient, client, topic, id, txID string, r v2.TransactionResolution) *v2.Status {
	t.Helper()
	resp, err := c.EndTransaction(callCtx(t, client, "", ""), &v2.EndTransactionRequest{Topic: &v2.Resource{Name: topic},
		MessageId: id, TransactionId: txID, Resolution: r})
	require.NoError(t, err)
	return resp.GetStatus()
}

// stored returns the messages of topic on all its queues.
func stored(t *testing.T, b *broker.Broker, topic string, queues int32) []message.Record {
	t.Helper()
	var out []message.Record
	for q := range queues {
		out = append(out, readAll(t, b.Store(), topic, q)...)
	}
	return out
}

// TestTransaction_CommitRollback: a TRANSACTION message is stored as a
// half message (the 4.x marks, its topic as its group), invisible in its
// topic until EndTransaction COMMIT stores it there once, as a plain
// message; a ROLLBACK never lets it in, and a later COMMIT of it stores
// nothing; no resolution decides nothing.
func TestTransaction_CommitRollback(t *testing.T) {
	b := startBroker(t, nil)
	createTopic(t, b, "v5tx", 2, "", "", false)
	c := dial(t, b.GRPCAddr(), false)

	e1 := sendTx(t, c, "p1", txMsg("v5tx", "TX1", "commit me"))
	require.Empty(t, stored(t, b, "v5tx", 2), "a half message is not in its topic")
	halves := readAll(t, b.Store(), halfTopic, 0)
	require.Len(t, halves, 1)
	p := message.ParseProperties(string(halves[0].Properties))
	require.Equal(t, "true", p[message.PropTranMsg])
	require.Equal(t, "v5tx", p[message.PropProducerGroup])
	require.Equal(t, "v5tx", p[message.PropRealTopic])
	require.Equal(t, "TX1", p[message.PropUniqKey])
	require.Equal(t, v5.TransactionID(halves[0].PhysicalOffset, halves[0].QueueOffset), e1.TransactionId)

	// A resend of the same message id (the client's retry) is the same
	// half message.
	again := sendTx(t, c, "p1", txMsg("v5tx", "TX1", "commit me"))
	require.Equal(t, e1.TransactionId, again.TransactionId)
	require.Len(t, readAll(t, b.Store(), halfTopic, 0), 1)

	for range 2 {
		st := endTx(t, c, "p1", "v5tx", "TX1", e1.TransactionId, v2.TransactionResolution_COMMIT)
		require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	}
	got := stored(t, b, "v5tx", 2)
	require.Len(t, got, 1, "committed once")
	require.Equal(t, "commit me", string(got[0].Body))
	p = message.ParseProperties(string(got[0].Properties))
	require.Equal(t, "TX1", p[message.PropUniqKey])
	require.NotContains(t, p, message.PropTranMsg, "delivered as a plain message")
	require.NotContains(t, p, message.PropRealTopic)

	e2 := sendTx(t, c, "p1", txMsg("v5tx", "TX2", "roll me back"))
	st := endTx(t, c, "p1", "v5tx", "TX2", e2.TransactionId, v2.TransactionResolution_ROLLBACK)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	st = endTx(t, c, "p1", "v5tx", "TX2", e2.TransactionId, v2.TransactionResolution_COMMIT)
	require.Equal(t, v2.Code_OK, st.GetCode(), "already decided: "+st.GetMessage())
	require.Len(t, stored(t, b, "v5tx", 2), 1, "the rolled-back message never comes in")

	e3 := sendTx(t, c, "p1", txMsg("v5tx", "TX3", "later"))
	st = endTx(t, c, "p1", "v5tx", "TX3", e3.TransactionId, v2.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, stored(t, b, "v5tx", 2), 1, "no resolution: still open")
	st = endTx(t, c, "p1", "v5tx", "TX3", e3.TransactionId, v2.TransactionResolution_COMMIT)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, stored(t, b, "v5tx", 2), 2)
}

// TestEndTransaction_BadInput: an id this broker did not give, or one
// that names another message, topic or offset, is INVALID_TRANSACTION_ID
// and decides nothing; malformed requests get their codes.
func TestEndTransaction_BadInput(t *testing.T) {
	b := startBroker(t, nil)
	createTopic(t, b, "v5txbad", 1, "", "", false)
	createTopic(t, b, "v5other", 1, "", "", false)
	c := dial(t, b.GRPCAddr(), false)
	e := sendTx(t, c, "p1", txMsg("v5txbad", "TXB1", "x"))
	pos, half, ok := v5.ParseTransactionID(e.TransactionId)
	require.True(t, ok)
	sr, err := c.SendMessage(callCtx(t, "p1", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{msg("v5txbad", "N1", "plain")}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode())
	require.Empty(t, sr.Entries[0].TransactionId, "a plain message has no transaction")
	plain := readAll(t, b.Store(), "v5txbad", 0)
	require.Len(t, plain, 1)

	commit := v2.TransactionResolution_COMMIT
	for _, tc := range []struct {
		name, topic, id, txID string
		want                  v2.Code
	}{
		{"garbage id", "v5txbad", "TXB1", "not-an-id", v2.Code_INVALID_TRANSACTION_ID},
		{"empty id", "v5txbad", "TXB1", "", v2.Code_INVALID_TRANSACTION_ID},
		{"a plain message's offset", "v5txbad", "N1", v5.TransactionID(plain[0].PhysicalOffset, 0), v2.Code_INVALID_TRANSACTION_ID},
		{"past the log", "v5txbad", "TXB1", v5.TransactionID(1<<50, half), v2.Code_INVALID_TRANSACTION_ID},
		{"inside a record", "v5txbad", "TXB1", v5.TransactionID(pos+3, half), v2.Code_INVALID_TRANSACTION_ID},
		{"another half offset", "v5txbad", "TXB1", v5.TransactionID(pos, half+1), v2.Code_INVALID_TRANSACTION_ID},
		{"another message id", "v5txbad", "TXB2", e.TransactionId, v2.Code_INVALID_TRANSACTION_ID},
		{"another topic", "v5other", "TXB1", e.TransactionId, v2.Code_INVALID_TRANSACTION_ID},
		{"bad topic", "bad topic!", "TXB1", e.TransactionId, v2.Code_ILLEGAL_TOPIC},
		{"no message id", "v5txbad", "", e.TransactionId, v2.Code_ILLEGAL_MESSAGE_ID},
	} {
		st := endTx(t, c, "p1", tc.topic, tc.id, tc.txID, commit)
		require.Equal(t, tc.want, st.GetCode(), "%s: %s", tc.name, st.GetMessage())
		require.NotEmpty(t, st.GetMessage(), tc.name)
	}
	resp, err := c.EndTransaction(callCtx(t, "p1", "", ""), &v2.EndTransactionRequest{Topic: &v2.Resource{Name: "v5txbad"},
		MessageId: "TXB1", TransactionId: e.TransactionId, Resolution: v2.TransactionResolution(99)})
	require.NoError(t, err)
	require.Equal(t, v2.Code_BAD_REQUEST, resp.GetStatus().GetCode())
	resp, err = c.EndTransaction(callCtx(t, "", "", ""), &v2.EndTransactionRequest{Topic: &v2.Resource{Name: "v5txbad"},
		MessageId: "TXB1", TransactionId: e.TransactionId, Resolution: commit})
	require.NoError(t, err)
	require.Equal(t, v2.Code_CLIENT_ID_REQUIRED, resp.GetStatus().GetCode())
	require.Len(t, readAll(t, b.Store(), "v5txbad", 0), 1, "nothing committed")

	st := endTx(t, c, "p1", "v5txbad", "TXB1", e.TransactionId, commit)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, readAll(t, b.Store(), "v5txbad", 0), 2, "the right id commits")
}

// openProducerStream opens client's Telemetry stream as a producer of
// topics and waits for its settings.
func openProducerStream(t *testing.T, c v2.MessagingServiceClient, client string, topics ...string) v2.MessagingService_TelemetryClient {
	t.Helper()
	ctx, cancel := context.WithCancel(callCtx(t, client, "", ""))
	t.Cleanup(cancel)
	ts, err := c.Telemetry(ctx)
	require.NoError(t, err)
	pt := v2.ClientType_PRODUCER
	var res []*v2.Resource
	for _, tp := range topics {
		res = append(res, &v2.Resource{Name: tp})
	}
	require.NoError(t, ts.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType: &pt, PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: res}}}}}))
	got, err := ts.Recv()
	require.NoError(t, err)
	require.NotNil(t, got.GetSettings())
	return ts
}

// TestTransaction_CheckBack: a half message left undecided past the
// transaction timeout is sent to a producer of its topic on its Telemetry
// stream (recover_orphaned_transaction_command: the message under its
// real topic, its id, body and transaction id); the producer's
// EndTransaction (source SERVER_CHECK) commits it.
func TestTransaction_CheckBack(t *testing.T) {
	b := startBrokerWith(t, broker.Options{Logger: quiet(), TransactionCheckInterval: checkEvery,
		TransactionTimeout: checkEvery})
	createTopic(t, b, "v5txc", 2, "", "", false)
	c := dial(t, b.GRPCAddr(), false)
	ts := openProducerStream(t, c, "p1", "v5txc")

	// Another client sends it: a check goes to any producer of the topic.
	m := txMsg("v5txc", "TXC1", "check me")
	m.UserProperties = map[string]string{"color": "red"}
	e := sendTx(t, c, "p2", m)
	got, err := ts.Recv()
	require.NoError(t, err)
	rc := got.GetRecoverOrphanedTransactionCommand()
	require.NotNil(t, rc, "got %v", got)
	require.Equal(t, e.TransactionId, rc.GetTransactionId())
	cm := rc.GetMessage()
	require.Equal(t, "v5txc", cm.GetTopic().GetName())
	require.Equal(t, "TXC1", cm.GetSystemProperties().GetMessageId())
	require.Equal(t, v2.MessageType_TRANSACTION, cm.GetSystemProperties().GetMessageType())
	require.Equal(t, "check me", string(cm.GetBody()))
	require.Equal(t, map[string]string{"color": "red"}, cm.GetUserProperties(), "no system property leaks")
	require.Nil(t, cm.GetSystemProperties().ReceiptHandle)
	require.Empty(t, stored(t, b, "v5txc", 2))

	resp, err := c.EndTransaction(callCtx(t, "p1", "", ""), &v2.EndTransactionRequest{Topic: cm.GetTopic(),
		MessageId: cm.GetSystemProperties().GetMessageId(), TransactionId: rc.GetTransactionId(),
		Resolution: v2.TransactionResolution_COMMIT, Source: v2.TransactionSource_SOURCE_SERVER_CHECK})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	recs := stored(t, b, "v5txc", 2)
	require.Len(t, recs, 1)
	require.Equal(t, "check me", string(recs[0].Body))
}

// TestTransaction_CheckBackAfterReconnect: a producer known only by its
// transactional sends (its settings name no topic) gets the checks on
// its stream; once that stream is gone, the producer's new stream gets
// them; a 4.x producer's half message of a group no v5 producer serves
// is not sent to v5 streams.
func TestTransaction_CheckBackAfterReconnect(t *testing.T) {
	b := startBrokerWith(t, broker.Options{Logger: quiet(), TransactionCheckInterval: checkEvery,
		TransactionTimeout: checkEvery})
	createTopic(t, b, "v5txr", 1, "", "", false)
	c := dial(t, b.GRPCAddr(), false)

	// A 4.x half message of group g4 on the same topic.
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})
	defer rc.Close()
	props := string(message.AppendProperties(nil, map[string]string{message.PropTranMsg: "true",
		message.PropProducerGroup: "g4", message.PropUniqKey: "OLD4X"}))
	h := protocol.SendMessageRequestHeader{ProducerGroup: "g4", Topic: "v5txr", QueueID: 0,
		SysFlag: message.TxPrepared, BornTimestamp: time.Now().UnixMilli(), Properties: props}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rc.Invoke(ctx, b.Addr(), remoting.NewRequest(protocol.SendMessage, protocol.Ext(&h), []byte("4x")))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)

	sctx, stop := context.WithCancel(callCtx(t, "p1", "", ""))
	first, err := c.Telemetry(sctx)
	require.NoError(t, err)
	pt := v2.ClientType_PRODUCER
	require.NoError(t, first.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType: &pt, PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{}}}}}))
	_, err = first.Recv()
	require.NoError(t, err)
	e := sendTx(t, c, "p1", txMsg("v5txr", "TXR1", "again"))
	got, err := first.Recv()
	require.NoError(t, err)
	require.Equal(t, e.TransactionId, got.GetRecoverOrphanedTransactionCommand().GetTransactionId(), "got %v", got)
	stop()

	// The new stream names the topic; the checks it gets are for TXR1,
	// never the 4.x group's message.
	second := openProducerStream(t, c, "p1", "v5txr")
	for range 2 {
		got, err = second.Recv()
		require.NoError(t, err)
		require.Equal(t, "TXR1", got.GetRecoverOrphanedTransactionCommand().GetMessage().GetSystemProperties().GetMessageId())
	}
	st := endTx(t, c, "p1", "v5txr", "TXR1", e.TransactionId, v2.TransactionResolution_ROLLBACK)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Empty(t, readAll(t, b.Store(), "v5txr", 0))
}
