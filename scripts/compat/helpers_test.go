package compat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"
)

// patience bounds every wait: a safety net for a hung run, never a speed
// requirement.
const patience = 60 * time.Second

// idProperty is a user property naming each test message.
const idProperty = "compat-id"

// name is a topic, group or instance name unique to the test and role.
func name(t *testing.T, role string) string {
	return "compat_" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "_" + role
}

// createTopic creates topic on the broker with the admin API. As with a
// Java broker, the route is at the nameserver once CreateTopic returns, so
// a consumer can start right away.
func createTopic(t *testing.T, topic string, queues int) {
	t.Helper()
	ctx := waitContext(t, patience)
	require.NoError(t, topicAdmin.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(brokerAddr),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues)))
	mqs, err := topicAdmin.FetchPublishMessageQueues(ctx, topic)
	require.NoError(t, err, "route of %s right after CreateTopic", topic)
	require.Len(t, mqs, queues)
}

// newProducer starts a producer with its own client instance.
func newProducer(t *testing.T, role string, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	base := []producer.Option{
		producer.WithNameServer(nameservers),
		producer.WithGroupName(name(t, role)),
		producer.WithInstanceName(name(t, role)),
		producer.WithRetry(2),
	}
	base = append(base, producerSecurity(adminCreds)...)
	p, err := rocketmq.NewProducer(append(base, opts...)...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// consumerOptions are a push consumer's options: group, its own client
// instance, clustering from the first offset unless opts say otherwise.
func consumerOptions(group, instance string, opts ...consumer.Option) []consumer.Option {
	return append(append([]consumer.Option{
		consumer.WithNameServer(nameservers),
		consumer.WithGroupName(group),
		consumer.WithInstance(instance),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, consumerSecurity(adminCreds)...), opts...)
}

// startPushConsumer subscribes to topic with a tag expression, delivering
// to in under the consumer name who, and starts consuming. The returned
// stop shuts it down (also done at cleanup).
func startPushConsumer(t *testing.T, topic, expression string, in *inbox, who string, opts []consumer.Option) (c rocketmq.PushConsumer, stop func()) {
	t.Helper()
	return startSelectorConsumer(t, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expression}, in, who, opts)
}

// startSelectorConsumer is startPushConsumer with any selector.
func startSelectorConsumer(t *testing.T, topic string, sel consumer.MessageSelector, in *inbox, who string, opts []consumer.Option) (c rocketmq.PushConsumer, stop func()) {
	t.Helper()
	c, err := rocketmq.NewPushConsumer(opts...)
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, sel, in.handler(who)))
	require.NoError(t, c.Start())
	var once sync.Once
	stop = func() { once.Do(func() { require.NoError(t, c.Shutdown()) }) }
	t.Cleanup(stop)
	return c, stop
}

// consumeAll starts the one consumer "c1" of the test's own group on
// every tag of topic, and returns its inbox.
func consumeAll(t *testing.T, topic string) *inbox {
	t.Helper()
	in := newInbox()
	startPushConsumer(t, topic, "*", in, "c1", consumerOptions(name(t, "group"), name(t, "c1")))
	return in
}

// delivery is one message handed to a consumer callback.
type delivery struct {
	msg *primitive.MessageExt
	at  time.Time
	by  string
}

// inbox records deliveries. By default the callback acknowledges; decide,
// if set, chooses the result.
type inbox struct {
	mu      sync.Mutex
	got     []delivery
	changed chan struct{}
	decide  func(d delivery) consumer.ConsumeResult
}

func newInbox() *inbox { return &inbox{changed: make(chan struct{})} }

func (in *inbox) handler(who string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now()
		result := consumer.ConsumeSuccess
		in.mu.Lock()
		for _, m := range msgs {
			d := delivery{msg: m, at: now, by: who}
			in.got = append(in.got, d)
			if in.decide != nil && in.decide(d) != consumer.ConsumeSuccess {
				result = consumer.ConsumeRetryLater
			}
		}
		close(in.changed)
		in.changed = make(chan struct{})
		in.mu.Unlock()
		return result, nil
	}
}

// deliveries returns a copy of what has been delivered so far.
func (in *inbox) deliveries() []delivery {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.got)
}

// waitFor waits until done holds for the deliveries so far, failing the
// test after patience.
func (in *inbox) waitFor(t *testing.T, what string, done func([]delivery) bool) []delivery {
	t.Helper()
	deadline := time.After(patience)
	for {
		in.mu.Lock()
		got, changed := slices.Clone(in.got), in.changed
		in.mu.Unlock()
		if done(got) {
			return got
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("waiting for %s: gave up after %v with %d deliveries", what, patience, len(got))
		}
	}
}

// waitIDs waits until every id in want has been delivered at least once.
func (in *inbox) waitIDs(t *testing.T, want []string) []delivery {
	t.Helper()
	return in.waitFor(t, fmt.Sprintf("%d messages", len(want)), func(got []delivery) bool {
		seen := map[string]bool{}
		for _, d := range got {
			seen[d.msg.GetProperty(idProperty)] = true
		}
		for _, id := range want {
			if !seen[id] {
				return false
			}
		}
		return true
	})
}

// quiet waits a moment and returns all deliveries, so that a message that
// should not arrive has a chance to show up.
func (in *inbox) quiet() []delivery {
	time.Sleep(time.Second)
	return in.deliveries()
}

// sent is a message as the producer sent it, with the broker's answer.
type sent struct {
	id     string
	msg    *primitive.Message
	before time.Time // just before the send call
	after  time.Time // when the send was acknowledged (or returned, for one-way)
	// From the send result; for one-way sends only msgID is known.
	msgID       string
	offsetMsgID string
	queueID     int
	queueOffset int64
	known       bool // the fields above come from a SendResult
	// changed are properties the broker is meant to drop or rewrite on
	// the way (DELAY for a delayed message).
	changed []string
}

// newMessage is a message with a recognisable body, tag, keys and user
// properties.
func newMessage(topic, id, tag string) *primitive.Message {
	m := primitive.NewMessage(topic, []byte("body of "+id))
	m.WithTag(tag)
	m.WithKeys([]string{"key-" + id, "alt-" + id})
	m.WithProperty(idProperty, id)
	m.WithProperty("compat-note", "héllo, wörld = ✓")
	return m
}

// sendSync sends m and records the result.
func sendSync(t *testing.T, p rocketmq.Producer, id string, m *primitive.Message) sent {
	t.Helper()
	before := time.Now()
	res, err := p.SendSync(waitContext(t, patience), m)
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status, "send %s: %v", id, res)
	s := sent{id: id, msg: m, before: before, after: time.Now(), known: true,
		msgID: res.MsgID, offsetMsgID: res.OffsetMsgID, queueID: res.MessageQueue.QueueId, queueOffset: res.QueueOffset}
	require.Equal(t, m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex), res.MsgID)
	require.NotEmpty(t, res.OffsetMsgID)
	require.Equal(t, brokerName, res.MessageQueue.BrokerName)
	return s
}

// requireDelivered checks that d carries the message s exactly: topic,
// body, tag, keys, user properties, ids, queue position and store data.
func requireDelivered(t *testing.T, s sent, d delivery) {
	t.Helper()
	m := d.msg
	require.Equal(t, s.msg.Topic, m.Topic, s.id)
	require.Equal(t, string(s.msg.Body), string(m.Body), s.id)
	require.Equal(t, s.msg.GetTags(), m.GetTags(), s.id)
	require.Equal(t, s.msg.GetKeys(), m.GetKeys(), s.id)
	for k, v := range s.msg.GetProperties() {
		if slices.Contains(s.changed, k) {
			continue
		}
		require.Equal(t, v, m.GetProperty(k), "%s: property %s", s.id, k)
	}
	require.Equal(t, s.msgID, m.MsgId, "%s: message id", s.id)
	if s.known {
		require.Equal(t, s.offsetMsgID, m.OffsetMsgId, "%s: offset message id", s.id)
		require.Equal(t, s.queueID, m.Queue.QueueId, "%s: queue", s.id)
		require.Equal(t, s.queueOffset, m.QueueOffset, "%s: queue offset", s.id)
	}
	requireStored(t, s.id, m, s.before, s.after)
}

// requireStored checks the broker-assigned fields of a delivered message:
// stored by our broker, between the send call and its acknowledgement.
func requireStored(t *testing.T, id string, m *primitive.MessageExt, before, after time.Time) {
	t.Helper()
	require.Equal(t, brokerAddr, m.StoreHost, "%s: store host", id)
	require.True(t, strings.HasPrefix(m.BornHost, "127.0.0.1:"), "%s: born host %s", id, m.BornHost)
	require.GreaterOrEqual(t, m.StoreTimestamp, before.UnixMilli(), "%s: store timestamp before the send", id)
	require.LessOrEqual(t, m.StoreTimestamp, after.UnixMilli(), "%s: store timestamp after the acknowledgement", id)
	require.GreaterOrEqual(t, m.StoreTimestamp, m.BornTimestamp, "%s: stored before it was born", id)
	require.Positive(t, m.StoreSize, id)
	require.GreaterOrEqual(t, m.CommitLogOffset, int64(0), id)
}

// byID indexes deliveries by message id property, failing on a message
// that is not in want.
func byID(t *testing.T, got []delivery, want map[string]sent) map[string][]delivery {
	t.Helper()
	out := map[string][]delivery{}
	for _, d := range got {
		id := d.msg.GetProperty(idProperty)
		_, ok := want[id]
		require.True(t, ok, "unexpected message %s (id %q)", d.msg.MsgId, id)
		out[id] = append(out[id], d)
	}
	return out
}

// requireExactlyOnce checks that got holds each message of want exactly
// once and nothing else.
func requireExactlyOnce(t *testing.T, got []delivery, want map[string]sent) {
	t.Helper()
	idx := byID(t, got, want)
	for _, id := range slices.Sorted(maps.Keys(want)) {
		require.Len(t, idx[id], 1, "deliveries of %s", id)
		requireDelivered(t, want[id], idx[id][0])
	}
}

func ids(want map[string]sent) []string { return slices.Sorted(maps.Keys(want)) }
