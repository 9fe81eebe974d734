package compat

import (
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

// sql92Selector is the example selector.
var sql92Selector = consumer.MessageSelector{Type: consumer.SQL92,
	Expression: "amount BETWEEN 50 AND 99 AND region IN ('eu','us')"}

// sendSQL92 sends 49 messages to topic whose properties match sql92Selector
// or not (lacking amount, lacking region, out of range, an unlisted
// region, a non-numeric amount, no property at all) and returns the 13
// matching ones, and the queue offset of its first message in each queue
// (by queue id). The last one matches: the official push consumer's
// offset reaches the end of a queue when it consumes the queue's last
// message, or else only when its next pull, suspended for 20 s, returns.
func sendSQL92(t *testing.T, topic string) (want map[string]sent, from map[int]int64) {
	t.Helper()
	p := newProducer(t, "producer")
	want, from = map[string]sent{}, map[int]int64{}
	for i := range 49 {
		props, match := map[string]string{}, false
		switch i % 8 {
		case 0, 4:
			props, match = map[string]string{"amount": strconv.Itoa(50 + i), "region": []string{"eu", "us"}[i/4%2]}, true
		case 1:
			props["region"] = "eu"
		case 2:
			props["amount"] = "60"
		case 3:
			props["amount"], props["region"] = "100", "us"
		case 5:
			props["amount"], props["region"] = "70", "asia"
		case 6:
			props["amount"], props["region"] = "abc", "eu"
		}
		id := fmt.Sprintf("sql-%02d", i)
		m := newMessage(topic, id, "TagS")
		for k, v := range props {
			m.WithProperty(k, v)
		}
		s := sendSync(t, p, id, m)
		if match {
			want[id] = s
		}
		if _, ok := from[s.queueID]; !ok {
			from[s.queueID] = s.queueOffset
		}
	}
	require.Len(t, want, 13)
	return want, from
}

// TestSQL92PushConsumer: the official push consumer subscribed with a SQL92
// MessageSelector (sent in its heartbeat only; its pulls say TAG and carry
// no expression) receives exactly the matching messages: those lacking a
// property the expression compares do not match. The check runs once its
// offset has reached the end of the queue, so every message was either
// delivered or filtered.
func TestSQL92PushConsumer(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 1)
	want, _ := sendSQL92(t, topic)
	in := newInbox()
	c, _ := startSelectorConsumer(t, topic, sql92Selector, in, "c1", consumerOptions(name(t, "group"), name(t, "c1")))
	in.waitIDs(t, ids(want))
	waitCaughtUp(t, c, topic)
	requireExactlyOnce(t, in.deliveries(), want)
}

// TestSQL92PullConsumer: the official pull consumer subscribed with a
// SQL92 MessageSelector, walking the queues with PullFrom (its pulls carry
// the expression, typed SQL92), gets exactly the matching messages.
func TestSQL92PullConsumer(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	want, from := sendSQL92(t, topic)

	pc, err := rocketmq.NewPullConsumer(append(consumerSecurity(adminCreds),
		consumer.WithNameServer(nameservers),
		consumer.WithGroupName(name(t, "group")),
		consumer.WithInstance(name(t, "pc")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)...)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, sql92Selector))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.Shutdown() })

	mqs, err := pc.GetTopicRouteInfo(topic)
	require.NoError(t, err)
	require.Len(t, mqs, 2)
	var got []delivery
	for _, mq := range mqs {
		// NB: a pull at the end waits for a new message (the client asks
		// the broker to suspend it), so the walk stops at MaxOffset.
		for off, end := from[mq.QueueId], from[mq.QueueId]+1; off < end; {
			res, err := pc.PullFrom(waitContext(t, patience), mq, off, 8)
			require.NoError(t, err)
			end = res.MaxOffset
			require.Contains(t, []primitive.PullStatus{primitive.PullFound, primitive.PullNoMsgMatched}, res.Status,
				"%s from %d", mq, off)
			require.Greater(t, res.NextBeginOffset, off)
			for _, m := range res.GetMessageExts() {
				got = append(got, delivery{msg: m})
			}
			off = res.NextBeginOffset
		}
	}
	requireExactlyOnce(t, got, want)
}

// TestSQL92ExpressionChange: a group changing its SQL92 expression at run
// time, as in a rolling upgrade: while c1 (v = 1) still owns the queue,
// c2 joins with v = 0, a newer subVersion, sent in its heartbeat only.
// From then on the group is filtered by the new expression: c1's pulls,
// which carry no expression, get exactly the later messages with v = 0
// (redeliveries allowed, nothing else).
func TestSQL92ExpressionChange(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 1)
	p := newProducer(t, "producer")
	// send sends 10 messages with v = 1 - last, last, 1 - last, ... and
	// returns those with v = last, the last one among them.
	send := func(prefix string, last int) map[string]sent {
		want := map[string]sent{}
		for i := range 10 {
			v := (i + last + 1) % 2
			id := fmt.Sprintf("%s-%d", prefix, i)
			m := newMessage(topic, id, "TagV")
			m.WithProperty("v", strconv.Itoa(v))
			s := sendSync(t, p, id, m)
			if v == last {
				want[id] = s
			}
		}
		return want
	}
	sql := func(expr string) consumer.MessageSelector {
		return consumer.MessageSelector{Type: consumer.SQL92, Expression: expr}
	}
	in := newInbox()
	c1, _ := startSelectorConsumer(t, topic, sql("v = 1"), in, "c1", consumerOptions(group, name(t, "c1")))
	want := send("a", 1)
	in.waitIDs(t, ids(want))
	waitCaughtUp(t, c1, topic)
	requireExactlyOnce(t, in.deliveries(), want)

	c2, _ := startSelectorConsumer(t, topic, sql("v = 0"), in, "c2", consumerOptions(group, name(t, "c2")))
	later := send("b", 0)
	in.waitIDs(t, ids(later))
	// NB: the queue's owner (c1, unless a rebalance moved it) has
	// consumed or been filtered everything.
	require.Eventually(t, func() bool {
		d1, ok1 := c1.GetOffsetDiffMap()[topic]
		d2, ok2 := c2.GetOffsetDiffMap()[topic]
		return ok1 && d1 == 0 && (!ok2 || d2 == 0) || ok2 && d2 == 0 && !ok1
	}, patience, 50*time.Millisecond)
	maps.Copy(want, later)
	byID(t, in.deliveries(), want)
}
