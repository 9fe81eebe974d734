package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestPushConsumer_NotifyRebalance: with the periodic rebalance far away,
// the broker's NOTIFY_CONSUMER_IDS_CHANGED makes members rebalance when one
// joins and when one leaves.
func TestPushConsumer_NotifyRebalance(t *testing.T) {
	c := newCluster(t, 1)
	topic := "nt"
	c.createTopic(topic, 4)
	rec := newRecorder()
	c1 := c.pushConsumer("g-nt", topic, rec.handler("c1"), WithInstanceName("c1"), WithRebalanceInterval(time.Hour))
	waitBalanced(t, topic, 4, c1)
	c2 := c.pushConsumer("g-nt", topic, rec.handler("c2"), WithInstanceName("c2"), WithRebalanceInterval(time.Hour))
	waitBalanced(t, topic, 4, c1, c2)
	require.Len(t, owned(c1, topic), 2)
	require.NoError(t, c2.Close())
	waitBalanced(t, topic, 4, c1)
}

// TestStartOffset: where a group without a committed offset starts, for
// each ConsumeFrom, against a broker that has no offset for it.
func TestStartOffset(t *testing.T) {
	var mu sync.Mutex
	var searched int64
	addr := startFake(t, func(req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, protocol.Success, "")
		switch req.Code {
		case protocol.QueryConsumerOffset:
			return remoting.NewResponse(req, protocol.QueryNotFound, "none")
		case protocol.GetMaxOffset:
			resp.ExtFields = protocol.Ext(&protocol.GetMaxOffsetResponseHeader{Offset: 42})
		case protocol.SearchOffsetByTimestamp:
			var h protocol.SearchOffsetByTimestampRequestHeader
			_ = h.FromExt(req.ExtFields)
			mu.Lock()
			searched = h.Timestamp
			mu.Unlock()
			resp.ExtFields = protocol.Ext(&protocol.SearchOffsetByTimestampResponseHeader{Offset: 17})
		}
		return resp
	})
	at := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		from  ConsumeFrom
		topic string
		want  int64
	}{
		{ConsumeFromLast, "t", 42},
		{ConsumeFromLast, RetryTopic("g"), 0},
		{ConsumeFromFirst, "t", 0},
		{ConsumeFromTimestamp, "t", 17},
		{ConsumeFromTimestamp, RetryTopic("g"), 42},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.from, tc.topic), func(t *testing.T) {
			pc, err := NewPushConsumer("g", WithNameServers(addr), WithLogger(quiet()), WithConsumeFrom(tc.from),
				WithConsumeTimestamp(at))
			require.NoError(t, err)
			defer pc.Close()
			ctx := ctxT(t, 5*time.Second)
			_, err = pc.core.routes.refresh(ctx, tc.topic)
			require.NoError(t, err)
			off, err := pc.startOffset(ctx, MessageQueue{Topic: tc.topic, BrokerName: "fake", QueueID: 1})
			require.NoError(t, err)
			require.Equal(t, tc.want, off)
		})
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, at.UnixMilli(), searched)
}

func TestPullConsumer(t *testing.T) {
	c := newCluster(t, 1)
	topic := "pl"
	c.createTopic(topic, 2)
	p := c.producer(WithQueueSelector(ManualSelector()))
	q0 := MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}
	sendN(t, p, topic, "p", 10, func(i int, m *Message) {
		m.Queue = q0
		m.Tags = []string{"A", "B"}[i%2]
	})
	ctx := ctxT(t, 20*time.Second)

	pc, err := NewPullConsumer("g-pull", c.opts(WithInstanceName("p1"))...)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, "A"))
	_, err = pc.Pull(ctx, q0, 0, 1)
	require.ErrorIs(t, err, ErrNotStarted)
	require.NoError(t, pc.Start())
	defer pc.Close()

	qs, err := pc.Queues(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, []MessageQueue{q0, {Topic: topic, BrokerName: "broker-a", QueueID: 1}}, qs)

	var res PullResult
	require.Eventually(t, func() bool { // NB: the broker indexes messages asynchronously
		res, err = pc.Pull(ctx, q0, 0, 32)
		return err == nil && res.NextOffset == 10
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, PullFound, res.Status)
	require.Equal(t, int64(10), res.NextOffset)
	require.Equal(t, int64(10), res.MaxOffset)
	require.Len(t, res.Messages, 5, "filtered by tag A")
	for i, m := range res.Messages {
		require.Equal(t, fmt.Sprintf("p-%d", 2*i), string(m.Body))
		require.Equal(t, int64(2*i), m.QueueOffset)
		require.Equal(t, q0, m.Queue)
	}
	res, err = pc.Pull(ctx, q0, 10, 32)
	require.NoError(t, err)
	require.Equal(t, PullNoNewMsg, res.Status)
	res, err = pc.Pull(ctx, q0, 99, 32)
	require.NoError(t, err)
	require.Equal(t, PullOffsetIllegal, res.Status)
	require.Equal(t, int64(10), res.NextOffset)

	off, err := pc.CommittedOffset(ctx, q0)
	require.NoError(t, err)
	require.Equal(t, int64(0), off, "young queue: the broker says 0 (spec 3.6)")
	require.NoError(t, pc.CommitOffset(ctx, q0, 7))
	off, err = pc.CommittedOffset(ctx, q0)
	require.NoError(t, err)
	require.Equal(t, int64(7), off)
	max, err := pc.MaxOffset(ctx, q0)
	require.NoError(t, err)
	require.Equal(t, int64(10), max)
	at, err := pc.OffsetAt(ctx, q0, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.LessOrEqual(t, at, int64(10))

	// Two subscribed members split the queues.
	pc2, err := NewPullConsumer("g-pull", c.opts(WithInstanceName("p2"))...)
	require.NoError(t, err)
	require.NoError(t, pc2.Subscribe(topic, "*"))
	require.NoError(t, pc2.Start())
	defer pc2.Close()
	require.Eventually(t, func() bool {
		a1, err1 := pc.Assignment(ctx, topic)
		a2, err2 := pc2.Assignment(ctx, topic)
		return err1 == nil && err2 == nil && len(a1) == 1 && len(a2) == 1 && a1[0] != a2[0]
	}, 10*time.Second, 50*time.Millisecond)
}

func TestAdmin(t *testing.T) {
	c := newCluster(t, 2)
	a := c.admin()
	ctx := ctxT(t, 30*time.Second)

	ci, err := a.ClusterInfo(ctx)
	require.NoError(t, err)
	require.Len(t, ci.Brokers, 2)
	require.Len(t, ci.MasterAddrs(""), 2)
	require.Len(t, ci.MasterAddrs("DefaultCluster"), 2)

	require.NoError(t, a.CreateTopic(ctx, TopicSpec{Topic: "adm", ReadQueues: 3, WriteQueues: 3,
		BrokerAddr: c.brokers[0].Addr()}))
	c.waitRoute("adm", 1)
	r, err := a.TopicRoute(ctx, "adm")
	require.NoError(t, err)
	require.Equal(t, "broker-a", r.Queues[0].BrokerName)
	require.Equal(t, 3, r.Queues[0].WriteQueues)
	require.Equal(t, 6, r.Queues[0].Perm)
	c.createTopic("adm2", 2)
	topics, err := a.TopicList(ctx)
	require.NoError(t, err)
	require.Contains(t, topics, "adm")
	require.Contains(t, topics, "adm2")

	// Progress and lag.
	p := c.producer()
	sendN(t, p, "adm2", "x", 20, nil)
	route, err := a.core.routes.refresh(ctx, "adm2")
	require.NoError(t, err)
	for _, q := range route.read {
		require.NoError(t, commitOffset(ctx, a.core, a.core.routes.cached("adm2").addrs[q.BrokerName], "g-adm", q, 0))
	}
	var cp ConsumerProgress
	require.Eventually(t, func() bool { // NB: the broker indexes messages asynchronously
		cp, err = a.ConsumeStats(ctx, "g-adm", "adm2")
		return err == nil && cp.Lag == 20
	}, 10*time.Second, 20*time.Millisecond)
	require.Len(t, cp.Queues, 4)
	require.Positive(t, cp.LagTime)
	for _, q := range cp.Queues {
		require.Equal(t, q.BrokerOffset, q.Lag)
	}

	// Lookups.
	res, err := p.Send(ctx, &Message{Topic: "adm2", Body: []byte("find me"), Keys: []string{"order-9"}})
	require.NoError(t, err)
	m, err := a.QueryByID(ctx, res.OffsetMsgID)
	require.NoError(t, err)
	require.Equal(t, "find me", string(m.Body))
	require.Eventually(t, func() bool {
		found, err := a.QueryByKey(ctx, "adm2", "order-9", 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		return err == nil && len(found) == 1 && found[0].MsgID == res.MsgID
	}, 10*time.Second, 20*time.Millisecond)
	none, err := a.QueryByKey(ctx, "adm2", "no-such-key", 10, time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = a.QueryByID(ctx, "not-an-id")
	require.Error(t, err)

	// Delete: gone from the brokers and the name server.
	require.NoError(t, a.DeleteTopic(ctx, "adm", ""))
	_, err = a.TopicRoute(ctx, "adm")
	require.ErrorIs(t, err, ErrNoRoute)
	require.ErrorIs(t, err, ErrTopicNotExist)

	require.NoError(t, a.Close())
	_, err = a.TopicList(context.Background())
	require.ErrorIs(t, err, ErrClosed)
}

// TestSendBack_Fallback: when the broker refuses CONSUMER_SEND_MSG_BACK the
// message is re-sent to %RETRY%<group> with its retry properties.
func TestSendBack_Fallback(t *testing.T) {
	var mu sync.Mutex
	var sent *remoting.Command
	var backs int
	addr := startFake(t, func(req *remoting.Command) *remoting.Command {
		mu.Lock()
		defer mu.Unlock()
		switch req.Code {
		case protocol.ConsumerSendMsgBack:
			backs++
			return remoting.NewResponse(req, protocol.SystemError, "no")
		case protocol.SendMessageV2:
			sent = req
			return fakeSendOK(req)
		}
		return remoting.NewResponse(req, protocol.Success, "")
	})
	pc, err := NewPushConsumer("g", WithNameServers(addr), WithLogger(quiet()))
	require.NoError(t, err)
	defer pc.Close()
	ctx := ctxT(t, 5*time.Second)
	_, err = pc.core.routes.refresh(ctx, "orig")
	require.NoError(t, err)
	m := &Message{Topic: "orig", Body: []byte("payload"), Tags: "T", MsgID: "ABC", ReconsumeTimes: 1,
		Queue: MessageQueue{Topic: "orig", BrokerName: "fake"}, Properties: map[string]string{"TRAN_MSG": "true", "u": "v"}}
	require.NoError(t, pc.sendBack(ctx, m, 0))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, backs)
	require.NotNil(t, sent)
	h, err := protocol.DecodeSendMessageRequestHeader(sent.Code, sent.ExtMap())
	require.NoError(t, err)
	require.Equal(t, RetryTopic("g"), h.Topic)
	require.Equal(t, "CLIENT_INNER_PRODUCER", h.ProducerGroup)
	require.Equal(t, int32(2), h.ReconsumeTimes)
	require.NotNil(t, h.MaxReconsumeTimes)
	require.Equal(t, int32(16), *h.MaxReconsumeTimes)
	props := message.ParseProperties(h.Properties)
	require.Equal(t, "orig", props[message.PropRetryTopic])
	require.Equal(t, "ABC", props[message.PropOriginMessageID])
	require.Equal(t, "ABC", props[message.PropUniqKey])
	require.Equal(t, "4", props[message.PropDelay])
	require.Equal(t, "T", props[message.PropTags])
	require.Equal(t, "v", props["u"])
	require.NotContains(t, props, message.PropTranMsg)
	require.Equal(t, "payload", string(sent.Body))
}

// TestNoLeakAfterClose: every kind of client, started and used, leaves no
// goroutine behind once closed.
func TestNoLeakAfterClose(t *testing.T) {
	t.Run("use", func(t *testing.T) {
		c := newCluster(t, 1)
		c.createTopic("lk", 2)
		p := c.producer()
		rec := newRecorder()
		pc := c.pushConsumer("g-lk", "lk", rec.handler("c"), WithConsumeFrom(ConsumeFromFirst))
		oc := c.pushConsumer("g-lk-o", "lk", rec.handler("o"), WithConsumeFrom(ConsumeFromFirst), WithOrderly(true))
		waitBalanced(t, "lk", 2, pc)
		waitBalanced(t, "lk", 2, oc)
		done := make(chan struct{})
		p.SendAsync(context.Background(), &Message{Topic: "lk", Body: []byte("a")}, func(SendResult, error) { close(done) })
		<-done
		rec.waitDistinct(t, 1, 20*time.Second)
		pull, err := NewPullConsumer("g-lk-p", c.opts()...)
		require.NoError(t, err)
		require.NoError(t, pull.Subscribe("lk", "*"))
		require.NoError(t, pull.Start())
		require.NoError(t, pull.Close())
		require.NoError(t, pc.Close())
		require.NoError(t, oc.Close())
		require.NoError(t, p.Close())
	})
	goleak.VerifyNone(t, testutil.LeakOptions()...)
}

// TestPullConsumer_PullWait: on an empty queue Pull answers at once while
// PullWait waits, for the suspend time or until a message arrives.
func TestPullConsumer_PullWait(t *testing.T) {
	c := newCluster(t, 1)
	topic := "plw"
	c.createTopic(topic, 1)
	p := c.producer()
	q := MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}
	pc, err := NewPullConsumer("g-pullwait", c.opts(WithInstanceName("pw"), WithLongPolling(400*time.Millisecond, 5*time.Second))...)
	require.NoError(t, err)
	require.NoError(t, pc.Start())
	defer pc.Close()
	ctx := ctxT(t, 20*time.Second)

	res, err := pc.Pull(ctx, q, 0, 32)
	require.NoError(t, err)
	require.Equal(t, PullNoNewMsg, res.Status)

	start := time.Now()
	res, err = pc.PullWait(ctx, q, 0, 32)
	require.NoError(t, err)
	require.Equal(t, PullNoNewMsg, res.Status)
	require.GreaterOrEqual(t, time.Since(start), 350*time.Millisecond, "PullWait did not wait for the suspend time")

	pc2, err := NewPullConsumer("g-pullwait2", c.opts(WithInstanceName("pw2"), WithLongPolling(10*time.Second, 15*time.Second))...)
	require.NoError(t, err)
	require.NoError(t, pc2.Start())
	defer pc2.Close()

	// NB: a deadline shorter than the suspend time bounds the wait, and
	// leaves a third of it (here 500 ms) for the answer to come back.
	start = time.Now()
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	res, err = pc2.PullWait(short, q, 0, 32)
	cancel()
	require.NoError(t, err)
	require.Equal(t, PullNoNewMsg, res.Status)
	waited := time.Since(start)
	require.GreaterOrEqual(t, waited, 950*time.Millisecond, "PullWait waited until a third of its deadline was left")
	require.Less(t, waited, 1500*time.Millisecond, "the deadline bounds the wait")
	sent := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, err := p.Send(ctx, &Message{Topic: topic, Body: []byte("woke")})
		sent <- err
	}()
	res, err = pc2.PullWait(ctx, q, 0, 32)
	require.NoError(t, err)
	require.NoError(t, <-sent)
	require.Equal(t, PullFound, res.Status, "the message that arrived during the wait is returned")
	require.Len(t, res.Messages, 1)
	require.Equal(t, "woke", string(res.Messages[0].Body))
}

// TestProducer_DeliverAt: a message sent with DeliverAt reaches its queue
// at that time, not before (within the broker's half-second slack).
func TestProducer_DeliverAt(t *testing.T) {
	c := newCluster(t, 1)
	topic := "tmr"
	c.createTopic(topic, 1)
	p := c.producer()
	ctx := ctxT(t, 30*time.Second)
	_, err := p.Send(ctx, &Message{Topic: topic, Body: []byte("x"), DelayLevel: 1, DeliverAt: time.Now()})
	require.ErrorIs(t, err, ErrInvalidMessage)

	at := time.Now().Add(1500 * time.Millisecond)
	res, err := p.Send(ctx, &Message{Topic: topic, Body: []byte("timed"), DeliverAt: at})
	require.NoError(t, err)
	pc, err := NewPullConsumer("g-tmr", c.opts(WithInstanceName("tmr"))...)
	require.NoError(t, err)
	require.NoError(t, pc.Start())
	defer pc.Close()
	q := MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}
	var got PullResult
	require.Eventually(t, func() bool {
		got, err = pc.PullWait(ctx, q, 0, 8)
		return err == nil && got.Status == PullFound
	}, 20*time.Second, 10*time.Millisecond)
	require.Len(t, got.Messages, 1)
	m := got.Messages[0]
	require.Equal(t, "timed", string(m.Body))
	require.Equal(t, res.MsgID, m.MsgID)
	require.GreaterOrEqual(t, m.StoreTimestamp.UnixMilli(), at.Add(-500*time.Millisecond).UnixMilli(), "delivered before its time")
}
