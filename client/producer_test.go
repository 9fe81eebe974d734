package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/stretchr/testify/require"
)

// stored reads the raw record behind an offset message id.
func stored(t *testing.T, a *Admin, offsetMsgID string) message.Record {
	t.Helper()
	host, off, err := message.ParseOffsetMsgID(offsetMsgID)
	require.NoError(t, err)
	resp, err := a.core.tr.call(ctxT(t, 5*time.Second), host.String(), request{code: protocol.ViewMessageByID,
		ext: protocol.Ext(&protocol.ViewMessageByIDRequestHeader{Offset: off})})
	require.NoError(t, err)
	rec, err := message.Decode(resp.Body)
	require.NoError(t, err)
	return rec
}

func TestProducer_SendModes(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("modes", 4)
	p := c.producer(WithGroup("pg-modes"))
	a := c.admin()
	ctx := ctxT(t, 30*time.Second)

	t.Run("sync", func(t *testing.T) {
		m := &Message{Topic: "modes", Body: []byte("sync-body"), Tags: "TagA", Keys: []string{"k1", "k2"},
			Properties: map[string]string{"color": "blue"}}
		res, err := p.Send(ctx, m)
		require.NoError(t, err)
		require.Equal(t, SendOK, res.Status)
		require.Len(t, res.MsgID, message.UniqIDLen)
		require.Empty(t, m.MsgID, "the producer does not modify the message")
		got, err := a.QueryByID(ctx, res.OffsetMsgID)
		require.NoError(t, err)
		require.Equal(t, "sync-body", string(got.Body))
		require.Equal(t, "TagA", got.Tags)
		require.Equal(t, []string{"k1", "k2"}, got.Keys)
		require.Equal(t, "blue", got.Properties["color"])
		require.Equal(t, res.MsgID, got.MsgID, "UNIQ_KEY is the user-facing id")
		require.Equal(t, res.Queue.QueueID, got.Queue.QueueID)
		require.Equal(t, res.QueueOffset, got.QueueOffset)
		require.Eventually(t, func() bool { // NB: the broker indexes keys asynchronously
			byKey, err := a.QueryByKey(ctx, "modes", "k2", 10, time.Time{}, time.Time{})
			return err == nil && len(byKey) == 1 && byKey[0].MsgID == res.MsgID
		}, 10*time.Second, 20*time.Millisecond)
	})

	t.Run("async", func(t *testing.T) {
		var wg sync.WaitGroup
		results := make([]SendResult, 20)
		errs := make([]error, 20)
		for i := range results {
			wg.Add(1)
			p.SendAsync(ctx, &Message{Topic: "modes", Body: fmt.Appendf(nil, "async-%d", i)}, func(r SendResult, err error) {
				results[i], errs[i] = r, err
				wg.Done()
			})
		}
		wg.Wait()
		for i, r := range results {
			require.NoError(t, errs[i])
			got, err := a.QueryByID(ctx, r.OffsetMsgID)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("async-%d", i), string(got.Body))
		}
	})

	t.Run("oneway", func(t *testing.T) {
		require.NoError(t, p.SendOneway(ctx, &Message{Topic: "modes", Body: []byte("oneway-body"), MsgID: "ONEWAY0000000000000000000000001"}))
		require.Eventually(t, func() bool {
			got, err := a.QueryByKey(ctx, "modes", "ONEWAY0000000000000000000000001", 1, time.Time{}, time.Time{})
			return err == nil && len(got) == 1 && string(got[0].Body) == "oneway-body"
		}, 10*time.Second, 20*time.Millisecond)
	})

	t.Run("batch", func(t *testing.T) {
		var msgs []*Message
		for i := range 5 {
			msgs = append(msgs, &Message{Topic: "modes", Body: fmt.Appendf(nil, "batch-%d", i), Tags: "TB", Keys: []string{fmt.Sprintf("bk%d", i)}})
		}
		// NB: members with user properties (written through a map) and
		// with an id of their own, among members whose ids are made.
		msgs[1].Properties = map[string]string{"color": "red"}
		msgs[3].MsgID = "7F0000010001000000000000000B0003"
		res, err := p.SendBatch(ctx, msgs)
		require.NoError(t, err)
		ids, offIDs := strings.Split(res.MsgID, ","), strings.Split(res.OffsetMsgID, ",")
		require.Len(t, ids, 5)
		require.Equal(t, msgs[3].MsgID, ids[3])
		require.Len(t, offIDs, 5)
		for i, oid := range offIDs {
			got, err := a.QueryByID(ctx, oid)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("batch-%d", i), string(got.Body))
			require.Equal(t, ids[i], got.MsgID, "batch members carry UNIQ_KEY")
			require.Equal(t, "TB", got.Tags)
			require.Equal(t, []string{fmt.Sprintf("bk%d", i)}, got.Keys)
			require.Equal(t, msgs[i].Properties["color"], got.Properties["color"])
			require.Equal(t, res.Queue.QueueID, got.Queue.QueueID, "one queue for the whole batch")
			require.Equal(t, res.QueueOffset+int64(i), got.QueueOffset, "consecutive offsets")
		}
	})

	t.Run("batch async", func(t *testing.T) {
		var small [][]*Message
		for i := range 4 {
			small = append(small, []*Message{{Topic: "modes", Body: fmt.Appendf(nil, "ab-%d-0", i)}, {Topic: "modes", Body: fmt.Appendf(nil, "ab-%d-1", i)}})
		}
		sendBatchesAsync(t, ctx, p, a, small)
		// NB: batch bodies are pooled; many batches in flight at once, each
		// read back whole, show no body was reused before its send ended.
		// A new producer knows no route yet: its first batches are written
		// later, from workers, while more are encoded.
		var many [][]*Message
		for i := range 100 {
			var b []*Message
			for k := range 8 {
				b = append(b, &Message{Topic: "modes", Body: bytes.Repeat(fmt.Appendf(nil, "pool-%d-%d|", i, k), 100+i*k%200)})
			}
			many = append(many, b)
		}
		sendBatchesAsync(t, ctx, c.producer(WithGroup("pg-modes-pool")), a, many)
		var invalid error
		p.SendBatchAsync(ctx, nil, func(_ SendResult, err error) { invalid = err })
		require.ErrorIs(t, invalid, ErrInvalidMessage, "an invalid batch is answered on the calling goroutine")
	})

	t.Run("compression", func(t *testing.T) {
		big := bytes.Repeat([]byte("compress me please "), 1000) // 19 KB
		res, err := p.Send(ctx, &Message{Topic: "modes", Body: big})
		require.NoError(t, err)
		rec := stored(t, a, res.OffsetMsgID)
		require.NotZero(t, rec.SysFlag&message.FlagCompressed, "stored compressed")
		require.Less(t, len(rec.Body), len(big))
		got, err := a.QueryByID(ctx, res.OffsetMsgID)
		require.NoError(t, err)
		require.Equal(t, big, got.Body, "decompressed on read")

		small, err := p.Send(ctx, &Message{Topic: "modes", Body: []byte("tiny")})
		require.NoError(t, err)
		require.Zero(t, stored(t, a, small.OffsetMsgID).SysFlag&message.FlagCompressed)
	})

	t.Run("invalid", func(t *testing.T) {
		_, err := p.Send(ctx, &Message{Topic: "", Body: []byte("x")})
		require.ErrorIs(t, err, ErrInvalidMessage)
		_, err = p.Send(ctx, &Message{Topic: "modes"})
		require.ErrorIs(t, err, ErrInvalidMessage)
		_, err = p.Send(ctx, &Message{Topic: "bad topic", Body: []byte("x")})
		require.ErrorIs(t, err, ErrInvalidMessage)
		_, err = p.SendBatch(ctx, []*Message{{Topic: "modes", Body: []byte("a")}, {Topic: "other", Body: []byte("b")}})
		require.ErrorIs(t, err, ErrInvalidMessage)
	})
}

func TestProducer_AutoCreateTopic(t *testing.T) {
	c := newCluster(t, 1)
	p := c.producer()
	ctx := ctxT(t, 20*time.Second)
	res, err := p.Send(ctx, &Message{Topic: "brand-new", Body: []byte("hello")})
	require.NoError(t, err, "a topic unknown to the name server is created through TBW102")
	require.Equal(t, "brand-new", res.Queue.Topic)
	c.waitRoute("brand-new", 1)
	got, err := c.admin().QueryByID(ctx, res.OffsetMsgID)
	require.NoError(t, err)
	require.Equal(t, "brand-new", got.Topic)
}

func TestProducer_HashSelector(t *testing.T) {
	c := newCluster(t, 2)
	c.createTopic("hashed", 4)
	p := c.producer(WithQueueSelector(HashSelector()))
	ctx := ctxT(t, 30*time.Second)
	byKey := map[string]map[MessageQueue]int{}
	for i := range 60 {
		key := fmt.Sprintf("order-%d", i%6)
		res, err := p.Send(ctx, &Message{Topic: "hashed", Body: []byte("x"), ShardingKey: key})
		require.NoError(t, err)
		if byKey[key] == nil {
			byKey[key] = map[MessageQueue]int{}
		}
		byKey[key][res.Queue]++
	}
	used := map[MessageQueue]bool{}
	for key, qs := range byKey {
		require.Len(t, qs, 1, "key %s on one queue", key)
		for q := range qs {
			used[q] = true
		}
	}
	require.Greater(t, len(used), 1, "keys spread over queues")
}

func TestProducer_ManualSelector(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("manual", 4)
	p := c.producer(WithQueueSelector(ManualSelector()))
	ctx := ctxT(t, 20*time.Second)
	q := MessageQueue{Topic: "manual", BrokerName: "broker-a", QueueID: 3}
	res, err := p.Send(ctx, &Message{Topic: "manual", Body: []byte("x"), Queue: q})
	require.NoError(t, err)
	require.Equal(t, q, res.Queue)
	_, err = p.Send(ctx, &Message{Topic: "manual", Body: []byte("x"), Queue: MessageQueue{BrokerName: "broker-a", QueueID: 9}})
	require.ErrorIs(t, err, ErrNoRoute)
}

func TestProducer_Lifecycle(t *testing.T) {
	c := newCluster(t, 1)
	p, err := NewProducer(c.opts()...)
	require.NoError(t, err)
	_, err = p.Send(context.Background(), &Message{Topic: "t", Body: []byte("x")})
	require.ErrorIs(t, err, ErrNotStarted)
	require.NoError(t, p.Start())
	require.ErrorIs(t, p.Start(), ErrStarted)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = p.Send(context.Background(), &Message{Topic: "t", Body: []byte("x")})
	require.ErrorIs(t, err, ErrClosed)
	done := make(chan error, 1)
	p.SendAsync(context.Background(), &Message{Topic: "t", Body: []byte("x")}, func(_ SendResult, err error) { done <- err })
	require.ErrorIs(t, <-done, ErrClosed)

	_, err = NewProducer(WithNameServers("localhost:9876"))
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewProducer()
	require.ErrorIs(t, err, ErrInvalidOption)
}

// restartBrokerCfg starts a broker on the address of one just closed: the
// address may still be in use (EADDRINUSE) for a moment, so listening is
// retried for a few seconds.
func restartBrokerCfg(t *testing.T, cfg conf.Broker) *broker.Broker {
	t.Helper()
	b, err := broker.New(cfg, broker.Options{Logger: quiet()})
	require.NoError(t, err)
	// NB: a Start that fails to listen leaves the broker startable again.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err = b.Start(); err == nil || time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, err, "restart on %s", cfg.Listen)
	t.Cleanup(func() { b.Close() })
	return b
}

// TestProducer_BrokerDown: with its only broker gone a send fails with a
// connection error naming the broker; once the broker is back on the same
// address the producer sends again. With a second broker, sends go there.
func TestProducer_BrokerDown(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("down", 2)
	p := c.producer(WithRetries(1), WithSendTimeout(time.Second))
	ctx := ctxT(t, 60*time.Second)
	_, err := p.Send(ctx, &Message{Topic: "down", Body: []byte("before")})
	require.NoError(t, err)

	b := c.brokers[0]
	addr := b.Addr()
	dir := c.cfgs[0].Store.Dir
	require.NoError(t, b.Close())
	_, err = p.Send(ctx, &Message{Topic: "down", Body: []byte("while down")})
	require.Error(t, err)
	var be *BrokerError
	require.False(t, errors.As(err, &be), "a connection failure, not a broker answer: %v", err)
	require.Contains(t, err.Error(), addr)

	cfg := brokerConfig(t, c.ns.Addr(), "broker-a", dir)
	cfg.Listen = addr
	restartBrokerCfg(t, cfg)
	require.Eventually(t, func() bool {
		_, err := p.Send(ctx, &Message{Topic: "down", Body: []byte("after")})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)

	// A second broker takes the sends while the first is down.
	c.addBroker("broker-b")
	c.createTopic("down", 2)
	require.NoError(t, c.brokers[1].Close())
	for range 10 {
		res, err := p.Send(ctx, &Message{Topic: "down", Body: []byte("failover")})
		require.NoError(t, err)
		require.Equal(t, "broker-a", res.Queue.BrokerName)
	}
}

// sendBatchesAsync sends every batch with SendBatchAsync at once, then
// reads each member back by its offset id and compares its body.
func sendBatchesAsync(t *testing.T, ctx context.Context, p *Producer, a *Admin, batches [][]*Message) {
	t.Helper()
	var wg sync.WaitGroup
	results := make([]SendResult, len(batches))
	errs := make([]error, len(batches))
	for i, msgs := range batches {
		wg.Add(1)
		p.SendBatchAsync(ctx, msgs, func(r SendResult, err error) {
			results[i], errs[i] = r, err
			wg.Done()
		})
	}
	wg.Wait()
	for i, r := range results {
		require.NoError(t, errs[i])
		offIDs := strings.Split(r.OffsetMsgID, ",")
		require.Len(t, offIDs, len(batches[i]))
		for k, oid := range offIDs {
			got, err := a.QueryByID(ctx, oid)
			require.NoError(t, err)
			require.Equal(t, batches[i][k].Body, got.Body, "batch %d member %d", i, k)
		}
	}
}

// TestProducer_AsyncLanes: a producer's async sends to a broker go over two
// connections, a queue's sends always over the same one, so every queue
// stores them in the order they were sent.
func TestProducer_AsyncLanes(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("lanes", 4)
	p := c.producer(WithGroup("pg-lanes"))
	ctx := ctxT(t, 60*time.Second)
	_, err := p.Send(ctx, &Message{Topic: "lanes", Body: []byte("warm")}) // the route and the codec are known
	require.NoError(t, err)

	const n = 2000
	results := make([]SendResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		p.SendAsync(ctx, &Message{Topic: "lanes", Body: fmt.Appendf(nil, "lane-%d", i)}, func(r SendResult, err error) {
			results[i], errs[i] = r, err
			wg.Done()
		})
	}
	wg.Wait()
	last := map[int]int64{}
	for i, r := range results {
		require.NoError(t, errs[i])
		if prev, ok := last[r.Queue.QueueID]; ok {
			require.Greater(t, r.QueueOffset, prev, "send %d overtook an earlier send to queue %d", i, r.Queue.QueueID)
		}
		last[r.Queue.QueueID] = r.QueueOffset
	}
	require.Len(t, last, 4)

	route := p.core.routes.cached("lanes")
	require.NotNil(t, route)
	addr := route.addrs[results[0].Queue.BrokerName]
	require.True(t, p.core.tr.mp.Connected(addr), "lane 0")
	require.True(t, p.core.tr.mp1.Connected(addr), "lane 1: odd queues")
}
