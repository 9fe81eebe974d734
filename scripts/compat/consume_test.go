package compat

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusteringRebalance: one clustering consumer drains a topic from the
// first offset; a second member joins (another instance) and the eight
// queues are split four and four, nothing lost on the way.
func TestClusteringRebalance(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 8)
	p := newProducer(t, "producer")
	want := map[string]sent{}
	for i := range 16 {
		id := fmt.Sprintf("a-%02d", i)
		want[id] = sendSync(t, p, id, newMessage(topic, id, "TagA"))
	}
	in := newInbox()
	startPushConsumer(t, topic, "*", in, "c1", consumerOptions(group, name(t, "c1")))
	got := in.waitIDs(t, ids(want))
	for _, d := range got {
		require.Equal(t, "c1", d.by)
	}

	startPushConsumer(t, topic, "*", in, "c2", consumerOptions(group, name(t, "c2")))
	// Rounds of eight sends (the producer goes round the eight queues)
	// until a round shows the queues split between the two members.
	deadline := time.Now().Add(patience)
	for round := 0; ; round++ {
		var roundIDs []string
		for i := range 8 {
			id := fmt.Sprintf("b%d-%d", round, i)
			want[id] = sendSync(t, p, id, newMessage(topic, id, "TagB"))
			roundIDs = append(roundIDs, id)
		}
		got := in.waitIDs(t, roundIDs)
		queues := map[string]map[int]bool{"c1": {}, "c2": {}}
		for _, d := range got {
			if slices.Contains(roundIDs, d.msg.GetProperty(idProperty)) {
				queues[d.by][d.msg.Queue.QueueId] = true
			}
		}
		split := len(queues["c1"]) == 4 && len(queues["c2"]) == 4
		for q := range queues["c1"] {
			split = split && !queues["c2"][q]
		}
		if split {
			t.Logf("queues split after %d round(s): c1 %v, c2 %v", round+1,
				slices.Sorted(maps.Keys(queues["c1"])), slices.Sorted(maps.Keys(queues["c2"])))
			break
		}
		require.True(t, time.Now().Before(deadline), "the queues were never split between the members: %v", queues)
	}

	// Every message arrived; a redelivery while queues change hands is
	// allowed (at least once) but must be the same message.
	idx := byID(t, in.quiet(), want)
	redelivered := 0
	for id, s := range want {
		require.NotEmpty(t, idx[id], "%s was never delivered", id)
		for _, d := range idx[id] {
			requireDelivered(t, s, d)
		}
		redelivered += len(idx[id]) - 1
	}
	t.Logf("%d messages, %d redelivered during the rebalance", len(want), redelivered)
}

// TestTagSubscription: a consumer of "TagA || TagB" gets exactly the
// messages with those tags.
func TestTagSubscription(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	p := newProducer(t, "producer")
	want := map[string]sent{}
	tags := []string{"TagA", "TagB", "TagC", "TagAB", ""}
	for i := range 30 {
		tag := tags[i%len(tags)]
		id := fmt.Sprintf("m-%02d-%s", i, tag)
		s := sendSync(t, p, id, newMessage(topic, id, tag))
		if tag == "TagA" || tag == "TagB" {
			want[id] = s
		}
	}
	in := newInbox()
	startPushConsumer(t, topic, "TagA || TagB", in, "c1", consumerOptions(name(t, "group"), name(t, "c1")))
	in.waitIDs(t, ids(want))
	requireExactlyOnce(t, in.quiet(), want)
}

// TestOrderly: a hash queue selector keeps each sharding key on one queue
// and an orderly consumer sees each key's messages in send order.
func TestOrderly(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 4)
	p := newProducer(t, "producer", producer.WithQueueSelector(producer.NewHashQueueSelector()))
	in := newInbox()
	startPushConsumer(t, topic, "*", in, "c1",
		consumerOptions(name(t, "group"), name(t, "c1"), consumer.WithConsumerOrder(true)))

	const keys, perKey = 6, 25
	want := map[string]sent{}
	for seq := range perKey {
		for k := range keys {
			id := fmt.Sprintf("order-%d-%02d", k, seq)
			m := newMessage(topic, id, "TagOrder")
			m.WithShardingKey(fmt.Sprintf("key-%d", k))
			m.WithProperty("seq", strconv.Itoa(seq))
			want[id] = sendSync(t, p, id, m)
		}
	}
	in.waitIDs(t, ids(want))
	got := in.quiet()
	requireExactlyOnce(t, got, want)

	next := map[string]int{}
	queue := map[string]int{}
	for _, d := range got {
		key := d.msg.GetShardingKey()
		seq, err := strconv.Atoi(d.msg.GetProperty("seq"))
		require.NoError(t, err)
		require.Equal(t, next[key], seq, "key %s out of order", key)
		next[key]++
		if q, ok := queue[key]; ok {
			require.Equal(t, q, d.msg.Queue.QueueId, "key %s moved queue", key)
		}
		queue[key] = d.msg.Queue.QueueId
	}
	require.Len(t, next, keys)
}

// TestBroadcasting: two broadcasting members of one group each receive
// every message.
func TestBroadcasting(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 4)
	p := newProducer(t, "producer")
	want := map[string]sent{}
	for i := range 12 {
		id := fmt.Sprintf("early-%02d", i)
		want[id] = sendSync(t, p, id, newMessage(topic, id, "TagB"))
	}
	in1, in2 := newInbox(), newInbox()
	startPushConsumer(t, topic, "*", in1, "b1", consumerOptions(group, name(t, "b1"), consumer.WithConsumerModel(consumer.BroadCasting)))
	startPushConsumer(t, topic, "*", in2, "b2", consumerOptions(group, name(t, "b2"), consumer.WithConsumerModel(consumer.BroadCasting)))
	for i := range 12 {
		id := fmt.Sprintf("late-%02d", i)
		want[id] = sendSync(t, p, id, newMessage(topic, id, "TagB"))
	}
	in1.waitIDs(t, ids(want))
	in2.waitIDs(t, ids(want))
	requireExactlyOnce(t, in1.quiet(), want)
	requireExactlyOnce(t, in2.deliveries(), want)
}

// TestRetryLater: a message answered with ConsumeRetryLater comes back
// through the group's retry topic after delay level 3 (10 s), once, with
// reconsumeTimes 1 and the original topic, id, keys and properties.
func TestRetryLater(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 2)

	// The group's first consumer: its heartbeat in Start makes the broker
	// create %RETRY%<group>, routed by the time Start returns. The client
	// looks routes up in Start and then only every 30 s, so a consumer
	// started before the retry topic existed takes up to 40 s to read it;
	// the consuming instance below starts afterwards, as a restarted
	// application does.
	_, stopFirst := startPushConsumer(t, topic, "*", newInbox(), "first", consumerOptions(group, name(t, "first")))
	mqs, err := topicAdmin.FetchPublishMessageQueues(waitContext(t, patience), "%RETRY%"+group)
	require.NoError(t, err, "the retry topic is routed once the first consumer started")
	require.Len(t, mqs, 1)
	stopFirst()

	p := newProducer(t, "producer")
	want := map[string]sent{}
	for i := range 3 {
		id := fmt.Sprintf("retry-%d", i)
		want[id] = sendSync(t, p, id, newMessage(topic, id, "TagR"))
	}
	in := newInbox()
	in.decide = func(d delivery) consumer.ConsumeResult {
		if d.msg.ReconsumeTimes == 0 {
			return consumer.ConsumeRetryLater
		}
		return consumer.ConsumeSuccess
	}
	startPushConsumer(t, topic, "*", in, "c1", consumerOptions(group, name(t, "c1")))
	in.waitFor(t, "each message twice", eachTwice(want))
	idx := byID(t, in.quiet(), want)
	for id, s := range want {
		require.Len(t, idx[id], 2, "deliveries of %s", id)
		first, again := idx[id][0], idx[id][1]
		requireDelivered(t, s, first)
		require.EqualValues(t, 0, first.msg.ReconsumeTimes, id)
		require.EqualValues(t, 1, again.msg.ReconsumeTimes, id)
		// The broker counts the delay from the retry record's store time,
		// in milliseconds like every RocketMQ timestamp.
		require.GreaterOrEqual(t, again.at.UnixMilli()-first.at.UnixMilli(), int64(10_000), "%s came back before delay level 3", id)
		// The redelivery is a new record of the same message.
		require.Equal(t, topic, again.msg.Topic, id)
		require.Equal(t, s.msgID, again.msg.MsgId, id)
		require.Equal(t, string(s.msg.Body), string(again.msg.Body), id)
		require.Equal(t, s.msg.GetTags(), again.msg.GetTags(), id)
		require.Equal(t, s.msg.GetKeys(), again.msg.GetKeys(), id)
		require.Equal(t, s.msg.GetProperty("compat-note"), again.msg.GetProperty("compat-note"), id)
		require.Equal(t, first.msg.BornTimestamp, again.msg.BornTimestamp, id)
		requireStored(t, id, again.msg, first.at, again.at)
	}
}

// TestDelayLevel: a message with delay level 2 is delivered no earlier
// than 5 s after it was sent, intact; an undelayed one is not held back
// behind it.
func TestDelayLevel(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	in := consumeAll(t, topic)
	p := newProducer(t, "producer")
	want := map[string]sent{}
	for i := range 3 {
		id := fmt.Sprintf("delayed-%d", i)
		m := newMessage(topic, id, "TagD")
		m.WithDelayTimeLevel(2)
		s := sendSync(t, p, id, m)
		s.known = false // the send result describes the schedule queue
		s.changed = []string{primitive.PropertyDelayTimeLevel}
		want[id] = s
	}
	want["now"] = sendSync(t, p, "now", newMessage(topic, "now", "TagD"))

	got := in.waitIDs(t, ids(want))
	idx := byID(t, in.quiet(), want)
	require.Len(t, idx["now"], 1)
	requireDelivered(t, want["now"], idx["now"][0])
	for id, s := range want {
		if id == "now" {
			continue
		}
		require.Len(t, idx[id], 1, "deliveries of %s", id)
		d := idx[id][0]
		// Counted from the store time, in milliseconds.
		require.GreaterOrEqual(t, d.at.UnixMilli()-s.before.UnixMilli(), int64(5_000), "%s delivered before its delay", id)
		s.after = d.at // stored again when the delay is over
		requireDelivered(t, s, d)
	}
	require.Len(t, got, len(want))
}

// TestDelayTimestamp: a message sent with WithDelayTimestamp (property
// TIMER_DELIVER_MS, RocketMQ 5's timer message) is delivered at its time,
// not before (within the broker's half-second slack), intact.
func TestDelayTimestamp(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	in := consumeAll(t, topic)
	p := newProducer(t, "producer")
	at := time.Now().Add(2500 * time.Millisecond)
	m := newMessage(topic, "timed", "TagT")
	m.WithDelayTimestamp(at)
	s := sendSync(t, p, "timed", m)
	s.known = false // the send result describes the schedule queue
	want := map[string]sent{"timed": s}
	in.waitIDs(t, ids(want))
	idx := byID(t, in.quiet(), want)
	require.Len(t, idx["timed"], 1)
	d := idx["timed"][0]
	require.GreaterOrEqual(t, d.at.UnixMilli(), at.Add(-500*time.Millisecond).UnixMilli(), "delivered before its time")
	s.after = d.at // stored again when its time came
	requireDelivered(t, s, d)
}

// TestConsumerRestart: a consumer that committed its offsets and stopped
// is replaced by a new process-like instance of the group, which resumes
// after them: nothing committed is replayed, nothing new is missed.
func TestConsumerRestart(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 4)
	p := newProducer(t, "producer")
	first := map[string]sent{}
	for i := range 12 {
		id := fmt.Sprintf("first-%02d", i)
		first[id] = sendSync(t, p, id, newMessage(topic, id, "TagR"))
	}
	in1 := newInbox()
	c1, stop1 := startPushConsumer(t, topic, "*", in1, "r1", consumerOptions(group, name(t, "r1")))
	in1.waitIDs(t, ids(first))
	// Shutdown then commits what the consumer has acknowledged.
	waitCaughtUp(t, c1, topic)
	stop1()
	requireExactlyOnce(t, in1.deliveries(), first)
	// NB: the client commits at shutdown with one-way requests: the broker
	// may read them after the next instance asked where to start (Java's
	// broker too), which would then replay what it had not seen committed.
	waitCommitted(t, group, topic)

	second := map[string]sent{}
	for i := range 12 {
		id := fmt.Sprintf("second-%02d", i)
		second[id] = sendSync(t, p, id, newMessage(topic, id, "TagR"))
	}
	in2 := newInbox()
	startPushConsumer(t, topic, "*", in2, "r2", consumerOptions(group, name(t, "r2")))
	in2.waitIDs(t, ids(second))
	requireExactlyOnce(t, in2.quiet(), second)
}

// TestResetWhileRunning: mqadmin resetOffsetByTime rewinds a group while
// its official-client consumer runs; the broker tells the consumer
// (RESET_CONSUMER_CLIENT_OFFSET, gson offset table), which consumes every
// message again without a restart. (The client waits 10 s before it
// resumes, and takes the queues up at its next rebalance.)
func TestResetWhileRunning(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 4)
	p := newProducer(t, "producer")
	before := time.Now().Add(-time.Second)
	want := map[string]sent{}
	for i := range 12 {
		id := fmt.Sprintf("rewind-%02d", i)
		want[id] = sendSync(t, p, id, newMessage(topic, id, "TagW"))
	}
	in := newInbox()
	c, _ := startPushConsumer(t, topic, "*", in, "w1", consumerOptions(group, name(t, "w1")))
	in.waitIDs(t, ids(want))
	waitCaughtUp(t, c, topic)

	out, err := exec.Command(mqadmin, mqadminArgs("resetOffsetByTime", "-g", group, "-t", topic,
		"-s", strconv.FormatInt(before.UnixMilli(), 10))...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	in.waitFor(t, "every message twice", eachTwice(want))
}

// waitCaughtUp waits until c has advanced its offsets on topic past
// everything it consumed.
func waitCaughtUp(t *testing.T, c rocketmq.PushConsumer, topic string) {
	t.Helper()
	require.Eventually(t, func() bool {
		diff, ok := c.GetOffsetDiffMap()[topic]
		return ok && diff == 0
	}, patience, 50*time.Millisecond)
}

// waitCommitted waits until the broker holds group's committed offsets
// at the end of every queue of topic (mqadmin consumerProgress).
func waitCommitted(t *testing.T, group, topic string) {
	t.Helper()
	var last string
	ok := assert.Eventually(t, func() bool {
		out, err := exec.Command(mqadmin, mqadminArgs("--json", "consumerProgress", "-g", group, "-t", topic)...).Output()
		last = string(out)
		var v struct {
			Queues           []json.RawMessage `json:"queues"`
			TotalLag         int64             `json:"totalLag"`
			UnknownLagQueues int               `json:"unknownLagQueues"`
		}
		return err == nil && json.Unmarshal(out, &v) == nil && len(v.Queues) > 0 && v.TotalLag == 0 && v.UnknownLagQueues == 0
	}, patience, 50*time.Millisecond)
	require.True(t, ok, "the broker never held %s's offsets at the end of %s; last consumerProgress: %s", group, topic, last)
}

// eachTwice is a waitFor condition: every message of want delivered at
// least twice.
func eachTwice(want map[string]sent) func([]delivery) bool {
	return func(got []delivery) bool {
		n := map[string]int{}
		for _, d := range got {
			n[d.msg.GetProperty(idProperty)]++
		}
		for id := range want {
			if n[id] < 2 {
				return false
			}
		}
		return true
	}
}

// TestConsumerStatusAndDirectConsume: mqadmin asks an official-client
// consumer, through the broker, for its running info (the client writes
// fastjson's object-keyed mqTable) and its queue offsets, and has it
// consume a stored message again (CONSUME_MESSAGE_DIRECTLY), as RocketMQ's
// dashboard does.
func TestConsumerStatusAndDirectConsume(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 4)
	p := newProducer(t, "producer")
	want := map[string]sent{}
	for i := range 4 {
		id := fmt.Sprintf("status-%02d", i)
		want[id] = sendSync(t, p, id, newMessage(topic, id, "TagS"))
	}
	in := newInbox()
	c, _ := startPushConsumer(t, topic, "*", in, "s1", consumerOptions(group, name(t, "s1")))
	in.waitIDs(t, ids(want))
	waitCaughtUp(t, c, topic)

	mq := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command(mqadmin, mqadminArgs(append([]string{"--json"}, args...)...)...).CombinedOutput()
		require.NoError(t, err, "mqadmin %v: %s", args, out)
		return out
	}
	var conns struct {
		Connections []struct {
			ClientID string `json:"clientId"`
		} `json:"connections"`
	}
	require.NoError(t, json.Unmarshal(mq("consumerConnection", "-g", group), &conns))
	require.Len(t, conns.Connections, 1)
	clientID := conns.Connections[0].ClientID

	var status struct {
		Clients []struct {
			ClientID   string            `json:"clientId"`
			Properties map[string]string `json:"properties"`
			Queues     []struct {
				Topic        string `json:"topic"`
				CommitOffset int64  `json:"commitOffset"`
			} `json:"queues"`
			Error string `json:"error"`
		} `json:"clients"`
	}
	require.NoError(t, json.Unmarshal(mq("consumerStatus", "-g", group), &status))
	require.Len(t, status.Clients, 1)
	cl := status.Clients[0]
	require.Empty(t, cl.Error)
	require.Equal(t, clientID, cl.ClientID)
	require.Equal(t, "CONSUME_PASSIVELY", cl.Properties["PROP_CONSUME_TYPE"])
	var committed int64
	n := 0
	for _, q := range cl.Queues {
		if q.Topic == topic {
			n++
			committed += q.CommitOffset
		}
	}
	require.Equal(t, 4, n, "the topic's 4 queues are in the client's mqTable")
	require.EqualValues(t, 4, committed, "their offsets cover the 4 messages")

	// The offsets it holds (GET_CONSUMER_STATUS_FROM_CLIENT, relayed by
	// the broker): the official client writes them with object keys too.
	var offsets struct {
		Clients map[string][]struct {
			Offset int64 `json:"offset"`
		} `json:"clients"`
	}
	require.NoError(t, json.Unmarshal(mq("getConsumerStatus", "-g", group, "-t", topic), &offsets))
	require.Len(t, offsets.Clients[clientID], 4)
	committed = 0
	for _, q := range offsets.Clients[clientID] {
		committed += q.Offset
	}
	require.EqualValues(t, 4, committed)

	var res struct {
		ConsumeResult string `json:"consumeResult"`
	}
	one := want["status-00"]
	require.NoError(t, json.Unmarshal(mq("queryMsgById", "-i", one.offsetMsgID, "-g", group, "-d", clientID), &res))
	require.Equal(t, "CR_SUCCESS", res.ConsumeResult)
	in.waitFor(t, "status-00 delivered again", func(got []delivery) bool {
		k := 0
		for _, d := range got {
			if d.msg.GetProperty(idProperty) == "status-00" {
				k++
			}
		}
		return k == 2
	})
}
