package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

// TestPushConsumer_RetryLater: a message the handler refuses once comes
// back through the retry topic with ReconsumeTimes 1, its original topic
// and id (delay level 3: about 10 s).
func TestPushConsumer_RetryLater(t *testing.T) {
	c := newCluster(t, 1)
	topic := "rt"
	c.createTopic(topic, 2)
	var mu sync.Mutex
	var got []*Message
	h := func(_ context.Context, msgs []*Message) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, msgs...)
		if msgs[0].ReconsumeTimes == 0 {
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	}
	pc := c.pushConsumer("g-rt", topic, h, WithConsumeFrom(ConsumeFromFirst))
	waitBalanced(t, topic, 2, pc)
	res, err := c.producer().Send(ctxT(t, 10*time.Second), &Message{Topic: topic, Body: []byte("again"), Tags: "T1", Keys: []string{"rk"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	}, 40*time.Second, 50*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	first, second := got[0], got[1]
	require.Equal(t, 0, first.ReconsumeTimes)
	require.Equal(t, 1, second.ReconsumeTimes)
	require.Equal(t, topic, second.Topic, "original topic restored from RETRY_TOPIC")
	require.Equal(t, RetryTopic("g-rt"), second.Queue.Topic)
	require.Equal(t, res.MsgID, second.MsgID)
	require.Equal(t, "again", string(second.Body))
	require.Equal(t, "T1", second.Tags)
	require.Equal(t, []string{"rk"}, second.Keys)
	require.GreaterOrEqual(t, second.StoreTimestamp.Sub(first.StoreTimestamp), 5*time.Second, "delayed")
}

// dlqMessages reads group's DLQ with a pull consumer.
func dlqMessages(t *testing.T, c *cluster, group string) []*Message {
	t.Helper()
	pc, err := NewPullConsumer("dlq-reader-"+group, c.opts()...)
	require.NoError(t, err)
	require.NoError(t, pc.Start())
	defer pc.Close()
	ctx := ctxT(t, 10*time.Second)
	qs, err := pc.Queues(ctx, DLQTopic(group))
	if err != nil {
		return nil
	}
	var out []*Message
	for _, q := range qs {
		res, err := pc.Pull(ctx, q, 0, 32)
		require.NoError(t, err)
		out = append(out, res.Messages...)
	}
	return out
}

// TestPushConsumer_DLQ: past the maximum reconsume count a message goes to
// %DLQ%<group> (concurrent: send-back; orderly: send-back with delay -1).
func TestPushConsumer_DLQ(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		t.Run(fmt.Sprintf("orderly=%v", orderly), func(t *testing.T) {
			c := newCluster(t, 1)
			topic := "dl"
			c.createTopic(topic, 1)
			group := fmt.Sprintf("g-dlq-%v", orderly)
			var calls atomic.Int32
			h := func(context.Context, []*Message) ConsumeResult {
				calls.Add(1)
				return ConsumeRetryLater
			}
			maxRe := 0
			if orderly {
				maxRe = 2
			}
			pc := c.pushConsumer(group, topic, h, WithConsumeFrom(ConsumeFromFirst), WithOrderly(orderly),
				WithMaxReconsumeTimes(maxRe), WithOrderlyRetryDelay(10*time.Millisecond))
			waitBalanced(t, topic, 1, pc)
			res, err := c.producer().Send(ctxT(t, 10*time.Second), &Message{Topic: topic, Body: []byte("poison")})
			require.NoError(t, err)
			var dead []*Message
			require.Eventually(t, func() bool {
				dead = dlqMessages(t, c, group)
				return len(dead) == 1
			}, 30*time.Second, 200*time.Millisecond)
			require.Equal(t, "poison", string(dead[0].Body))
			require.Equal(t, res.MsgID, dead[0].MsgID)
			require.Equal(t, topic, dead[0].Properties[message.PropRetryTopic])
			if orderly {
				require.Equal(t, int32(3), calls.Load(), "first delivery and two retries in place")
			} else {
				require.Equal(t, int32(1), calls.Load())
			}
			// Acknowledged: the queue moved on.
			require.Eventually(t, func() bool {
				cp, err := c.admin().ConsumeStats(ctxT(t, 5*time.Second), group, topic)
				return err == nil && cp.Lag == 0 && len(cp.Queues) == 1
			}, 10*time.Second, 50*time.Millisecond)
		})
	}
}

// TestPushConsumer_CloseCommits: Close commits what was consumed; a
// restarted member of the group does not replay it.
func TestPushConsumer_CloseCommits(t *testing.T) {
	c := newCluster(t, 1)
	topic := "cc"
	c.createTopic(topic, 4)
	p := c.producer()
	rec := newRecorder()
	pc := c.pushConsumer("g-cc", topic, rec.handler("c"), WithConsumeFrom(ConsumeFromFirst),
		WithCommitInterval(time.Hour))
	waitBalanced(t, topic, 4, pc)
	sendN(t, p, topic, "first", 50, nil)
	rec.waitDistinct(t, 50, 30*time.Second)
	require.NoError(t, pc.Close())

	cp, err := c.admin().ConsumeStats(ctxT(t, 5*time.Second), "g-cc", topic)
	require.NoError(t, err)
	require.Zero(t, cp.Lag, "Close committed every offset: %+v", cp.Queues)

	sendN(t, p, topic, "second", 20, nil)
	again := newRecorder()
	pc2 := c.pushConsumer("g-cc", topic, again.handler("c"), WithConsumeFrom(ConsumeFromFirst))
	waitBalanced(t, topic, 4, pc2)
	again.waitDistinct(t, 20, 30*time.Second)
	waitConsumed(t, c, "g-cc", topic)
	require.Equal(t, 20, again.distinct(), "nothing replayed")
	require.Zero(t, again.duplicates())
}

// waitConsumed is a barrier for "nothing more arrives": it returns once
// the broker answers that group's committed offset is the end of every
// queue of topic. A push consumer commits an offset only once the handler
// has returned for every message below it, so by then every message the
// group was going to be handed, replays included, has been handled.
func waitConsumed(t *testing.T, c *cluster, group, topic string) {
	t.Helper()
	require.Eventually(t, func() bool {
		cp, err := c.admin().ConsumeStats(context.Background(), group, topic)
		if err != nil || len(cp.Queues) == 0 {
			return false
		}
		for _, q := range cp.Queues {
			if q.ConsumerOffset != q.BrokerOffset {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "%s consumed %s to the end", group, topic)
}

// TestPushConsumer_CloseAcksInFlight: a handler still running when Close
// drops the queues, and then succeeding, has its message acknowledged and
// committed by Close.
func TestPushConsumer_CloseAcksInFlight(t *testing.T) {
	c := newCluster(t, 1)
	topic := "cif"
	c.createTopic(topic, 1)
	var pc *PushConsumer
	allDropped := func() bool {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		for _, pq := range pc.queues {
			if !pq.dropped() {
				return false
			}
		}
		return true
	}
	entered := make(chan struct{})
	var once sync.Once
	h := func(ctx context.Context, _ []*Message) ConsumeResult {
		once.Do(func() { close(entered) })
		<-ctx.Done() // Close began
		for !allDropped() {
			time.Sleep(time.Millisecond)
		}
		return ConsumeSuccess
	}
	pc = c.pushConsumer("g-cif", topic, h, WithConsumeFrom(ConsumeFromFirst), WithCommitInterval(time.Hour))
	waitBalanced(t, topic, 1, pc)
	sendN(t, c.producer(), topic, "m", 1, nil)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("message not delivered")
	}
	require.NoError(t, pc.Close())

	cp, err := c.admin().ConsumeStats(ctxT(t, 5*time.Second), "g-cif", topic)
	require.NoError(t, err)
	require.Len(t, cp.Queues, 1)
	require.Equal(t, int64(1), cp.Queues[0].BrokerOffset)
	require.Zero(t, cp.Lag, "the in-flight message was committed: %+v", cp.Queues)
}

// TestPushConsumer_KeepsProgress: a batch finishing after a rebalance
// dropped its queue is not acknowledged (the queue is no longer ours); one
// finishing after Close dropped its still owned queue is.
func TestPushConsumer_KeepsProgress(t *testing.T) {
	pc, err := NewPushConsumer("g-kp", WithNameServers("127.0.0.1:1"), WithLogger(quiet()))
	require.NoError(t, err)
	defer pc.core.stop() // NB: never started; its state is set by hand below
	gone := newProcessQueue(MessageQueue{Topic: "kp", BrokerName: "b", QueueID: 0})
	kept := newProcessQueue(MessageQueue{Topic: "kp", BrokerName: "b", QueueID: 1})
	pc.mu.Lock()
	pc.state = stateStarted
	pc.queues[gone.mq] = gone
	pc.queues[kept.mq] = kept
	pc.mu.Unlock()
	require.True(t, pc.keepsProgress(gone))

	pc.updateQueues(context.Background(), "kp", []MessageQueue{kept.mq})
	require.True(t, gone.dropped())
	require.False(t, pc.keepsProgress(gone), "rebalanced away")
	require.True(t, pc.keepsProgress(kept))

	// What Close does before it waits for the consume goroutines.
	pc.mu.Lock()
	pc.state = stateClosed
	kept.drop()
	pc.mu.Unlock()
	require.True(t, pc.keepsProgress(kept), "dropped by Close while owned")
	require.False(t, pc.keepsProgress(gone), "still not ours after Close")
}

// TestPushConsumer_ResetOffsetByTime: an admin reset by time moves a
// group's offsets; the consumer then starts at the first message stored
// at or after that time.
func TestPushConsumer_ResetOffsetByTime(t *testing.T) {
	c := newCluster(t, 1)
	topic := "ts"
	c.createTopic(topic, 2)
	p := c.producer()
	sendN(t, p, topic, "old", 10, nil)
	time.Sleep(50 * time.Millisecond)
	mark := time.Now()
	time.Sleep(50 * time.Millisecond)
	sendN(t, p, topic, "new", 10, nil)
	offs, err := c.admin().ResetOffsetByTime(ctxT(t, 10*time.Second), "g-ts", topic, mark)
	require.NoError(t, err)
	require.Len(t, offs, 2)
	rec := newRecorder()
	c.pushConsumer("g-ts", topic, rec.handler("c"), WithConsumeFrom(ConsumeFromFirst))
	rec.waitDistinct(t, 10, 30*time.Second)
	waitConsumed(t, c, "g-ts", topic)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.count, 10)
	for b := range rec.count {
		require.Contains(t, b, "new-")
	}
}
