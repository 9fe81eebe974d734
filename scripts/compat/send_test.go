package compat

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"
)

// TestSendModes creates a topic with the admin API, sends with SendSync,
// SendAsync, SendOneWay and a batch SendSync of 10, and consumes
// everything with a clustering push consumer from the first offset.
func TestSendModes(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 4)
	p := newProducer(t, "producer")
	want := map[string]sent{}

	for i := range 5 {
		id := fmt.Sprintf("sync-%d", i)
		want[id] = sendSync(t, p, id, newMessage(topic, id, "TagSync"))
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 5 {
		id := fmt.Sprintf("async-%d", i)
		m := newMessage(topic, id, "TagAsync")
		before := time.Now()
		wg.Add(1)
		require.NoError(t, p.SendAsync(context.Background(), func(_ context.Context, res *primitive.SendResult, err error) {
			defer wg.Done()
			after := time.Now()
			if !assertNoError(t, err, id) || res.Status != primitive.SendOK {
				t.Errorf("send %s: %v", id, res)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			want[id] = sent{id: id, msg: m, before: before, after: after, known: true, msgID: res.MsgID,
				offsetMsgID: res.OffsetMsgID, queueID: res.MessageQueue.QueueId, queueOffset: res.QueueOffset}
		}, m))
	}
	waitGroup(t, &wg, "SendAsync callbacks")
	require.Len(t, want, 10)

	oneway := map[string]bool{}
	for i := range 5 {
		id := fmt.Sprintf("oneway-%d", i)
		m := newMessage(topic, id, "TagOneWay")
		before := time.Now()
		require.NoError(t, p.SendOneWay(waitContext(t, patience), m))
		// Without a reply, the acknowledgement bound is the delivery.
		want[id] = sent{id: id, msg: m, before: before, after: time.Now().Add(patience),
			msgID: m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)}
		require.NotEmpty(t, want[id].msgID)
		oneway[id] = true
	}

	// A batch: one SEND_BATCH_MESSAGE, one queue, consecutive offsets.
	var batch []*primitive.Message
	for i := range 10 {
		batch = append(batch, newMessage(topic, fmt.Sprintf("batch-%d", i), "TagBatch"))
	}
	before := time.Now()
	res, err := p.SendSync(waitContext(t, patience), batch...)
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status)
	after := time.Now()
	offsetIDs := strings.Split(res.OffsetMsgID, ",")
	require.Len(t, offsetIDs, 10, "one offset message id per batch member: %q", res.OffsetMsgID)
	for i, m := range batch {
		id := fmt.Sprintf("batch-%d", i)
		// Batch members carry no UNIQ_KEY, so their id is the offset id.
		want[id] = sent{id: id, msg: m, before: before, after: after, known: true, msgID: offsetIDs[i],
			offsetMsgID: offsetIDs[i], queueID: res.MessageQueue.QueueId, queueOffset: res.QueueOffset + int64(i)}
	}

	in := consumeAll(t, topic)
	in.waitIDs(t, ids(want))
	got := in.quiet()
	idx := byID(t, got, want)
	for id, s := range want {
		require.Len(t, idx[id], 1, "deliveries of %s", id)
		d := idx[id][0]
		if oneway[id] {
			s.after = d.at
		}
		requireDelivered(t, s, d)
		require.Zero(t, d.msg.ReconsumeTimes, id)
	}
}

// TestCompressedBody sends bodies above the client's 4 KiB compression
// threshold; they arrive intact and flagged as compressed.
func TestCompressedBody(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	p := newProducer(t, "producer")
	want := map[string]sent{}
	for i := range 3 {
		id := fmt.Sprintf("big-%d", i)
		var body bytes.Buffer
		for body.Len() < 64<<10*(i+1) {
			fmt.Fprintf(&body, "%s line %d: the quick brown fox jumps over the lazy dog\n", id, body.Len())
		}
		m := newMessage(topic, id, "TagBig")
		m.Body = body.Bytes()
		want[id] = sendSync(t, p, id, m)
	}
	in := consumeAll(t, topic)
	in.waitIDs(t, ids(want))
	got := in.quiet()
	requireExactlyOnce(t, got, want)
	for _, d := range got {
		require.NotZero(t, d.msg.SysFlag&primitive.FlagCompressed, "%s was stored compressed", d.msg.GetProperty(idProperty))
	}
}

// waitGroup waits for wg, failing the test after patience.
func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatalf("waiting for %s: gave up after %v", what, patience)
	}
}

// assertNoError reports err as a test error (not fatal: it runs on a
// client goroutine) and tells whether it was nil.
func assertNoError(t *testing.T, err error, what string) bool {
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return false
	}
	return true
}

// TestAutoCreateTopic: a producer sends to a topic nobody created (the
// broker makes it from TBW102), and a new group that consumes from the
// last offset, the client's default, still sees those first messages
// because the topic is young (spec 8.6).
func TestAutoCreateTopic(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	p := newProducer(t, "producer")
	want := map[string]sent{}
	for i := range 8 {
		id := fmt.Sprintf("auto-%d", i)
		want[id] = sendSync(t, p, id, newMessage(topic, id, "TagAuto"))
	}
	mqs, err := topicAdmin.FetchPublishMessageQueues(waitContext(t, patience), topic)
	require.NoError(t, err)
	require.NotEmpty(t, mqs)
	in := newInbox()
	startPushConsumer(t, topic, "*", in, "c1", consumerOptions(name(t, "group"), name(t, "c1"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromLastOffset)))
	in.waitIDs(t, ids(want))
	requireExactlyOnce(t, in.quiet(), want)
}

// TestRequestReply: an official-client requester's Request gets the reply
// an official-client responder sends (SEND_REPLY_MESSAGE, long header
// names) to the cluster's reply topic; the broker pushes it on the
// requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT). The reply is
// built by hand as Java's MessageUtil.createReplyMessage does: the Go
// client's CreateReplyMessage parses the body as properties and loses it.
func TestRequestReply(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 2)
	responder := newProducer(t, "responder")
	c, err := rocketmq.NewPushConsumer(consumerOptions(group, name(t, "c1"))...)
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				r := primitive.NewMessage(m.GetProperty(primitive.PropertyCluster)+"_REPLY_TOPIC", append([]byte("re:"), m.Body...))
				r.WithProperty(primitive.PropertyMsgType, "reply")
				r.WithProperty(primitive.PropertyCorrelationID, m.GetProperty(primitive.PropertyCorrelationID))
				r.WithProperty(primitive.PropertyMessageReplyToClient, m.GetProperty(primitive.PropertyMessageReplyToClient))
				r.WithProperty(primitive.PropertyMessageTTL, m.GetProperty(primitive.PropertyMessageTTL))
				if _, err := responder.SendSync(ctx, r); err != nil {
					return consumer.ConsumeRetryLater, err
				}
			}
			return consumer.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })

	requester := newProducer(t, "requester")
	reply, err := requester.Request(waitContext(t, patience), 20*time.Second, primitive.NewMessage(topic, []byte("ping")))
	require.NoError(t, err)
	require.Equal(t, "re:ping", string(reply.Body))
	require.Equal(t, "reply", reply.GetProperty(primitive.PropertyMsgType))
	require.NotEmpty(t, reply.GetProperty(primitive.PropertyReplyMessageArriveTime))
}

// compatTx commits or rolls back by the message's body.
type compatTx struct{}

func (compatTx) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	if string(m.Body) == "commit" {
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

// CheckLocalTransaction commits: a rollback the broker failed to record
// would be checked and then delivered.
func (compatTx) CheckLocalTransaction(*primitive.MessageExt) primitive.LocalTransactionState {
	return primitive.CommitMessageState
}

// TestTransaction: the official client's transactional producer sends half
// messages and ends them (END_TRANSACTION): the committed one is
// delivered, the rolled-back one never.
func TestTransaction(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	p, err := rocketmq.NewTransactionProducer(compatTx{}, append(producerSecurity(adminCreds), producer.WithNameServer(nameservers),
		producer.WithGroupName(name(t, "txgroup")), producer.WithInstanceName(name(t, "tx")))...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	for _, body := range []string{"rollback", "commit"} {
		res, err := p.SendMessageInTransaction(waitContext(t, patience), primitive.NewMessage(topic, []byte(body)))
		require.NoError(t, err, body)
		require.Equal(t, primitive.SendOK, res.Status, body)
	}
	in := consumeAll(t, topic)
	got := in.waitFor(t, "the committed message", func(d []delivery) bool { return len(d) >= 1 })
	require.Equal(t, "commit", string(got[0].msg.Body))
	require.Len(t, in.quiet(), 1, "the rolled-back message is never delivered")
}
