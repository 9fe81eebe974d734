package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

// sendHalf sends a transactional half message and returns its half queue
// offset and commitlog offset.
func sendHalf(t *testing.T, c *remoting.Client, b *Broker, body string) (int64, int64) {
	t.Helper()
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "orders", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 1, SysFlag: message.TxPrepared, BornTimestamp: time.Now().UnixMilli(),
		Properties: string(message.AppendProperties(nil, map[string]string{message.PropTranMsg: "true", message.PropProducerGroup: "pg",
			message.PropUniqKey: "U-" + body}))}
	resp := invoke(t, c, b.Addr(), protocol.SendMessage, h, []byte(body))
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var sh protocol.SendMessageResponseHeader
	require.NoError(t, sh.FromExt(resp.ExtFields))
	require.Equal(t, int32(1), sh.QueueID, "answered with the queue asked for, as Java")
	_, pos, err := message.ParseOffsetMsgID(sh.MsgID)
	require.NoError(t, err)
	return sh.QueueOffset, pos
}

// registerProducer heartbeats c as client p1 of producer group pg, the one
// transaction checks go to.
func registerProducer(t *testing.T, c *remoting.Client, b *Broker) {
	t.Helper()
	body, err := remoting.EncodeBody(remoting.SerializeJSON, protocol.HeartbeatData{ClientID: "p1",
		ProducerDataSet: []protocol.ProducerData{{GroupName: "pg"}}})
	require.NoError(t, err)
	require.Equal(t, protocol.Success, int(invoke(t, c, b.Addr(), protocol.HeartBeat, nil, body).Code))
}

func endTx(t *testing.T, c *remoting.Client, b *Broker, half, pos int64, decision int32) {
	t.Helper()
	resp := invoke(t, c, b.Addr(), protocol.EndTransaction, &protocol.EndTransactionRequestHeader{ProducerGroup: "pg",
		TranStateTableOffset: half, CommitLogOffset: pos, CommitOrRollback: decision}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
}

func TestBroker_TransactionCommitAndRollback(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "orders", 1, "plain", nil) // the topic exists
	h1, p1 := sendHalf(t, c, b, "commit-me")
	h2, p2 := sendHalf(t, c, b, "roll-me-back")
	waitIndexed(t, b)
	require.Equal(t, []string{"plain"}, recordBodiesOf(pullAll(t, c, b, "orders", 1)), "half messages are invisible")
	endTx(t, c, b, h1, p1, message.TxCommit)
	endTx(t, c, b, h2, p2, message.TxRollback)
	endTx(t, c, b, h1, p1, message.TxCommit) // a repeated decision changes nothing
	waitIndexed(t, b)
	recs := pullAll(t, c, b, "orders", 1)
	require.Equal(t, []string{"plain", "commit-me"}, recordBodiesOf(recs))
	require.Equal(t, message.TxCommit, message.TxType(recs[1].SysFlag))
	u, _ := message.PropertyValueBytes(recs[1].Properties, message.PropUniqKey)
	require.Equal(t, "U-commit-me", string(u), "the message id survives the commit")
	_, tran := message.PropertyValueBytes(recs[1].Properties, message.PropTranMsg)
	require.False(t, tran, "delivered as a plain message: TRAN_MSG removed")
	// A wrong group is refused.
	h3, p3 := sendHalf(t, c, b, "x")
	resp := invoke(t, c, b.Addr(), protocol.EndTransaction, &protocol.EndTransactionRequestHeader{ProducerGroup: "other",
		TranStateTableOffset: h3, CommitLogOffset: p3, CommitOrRollback: message.TxCommit}, nil)
	require.Equal(t, protocol.SystemError, int(resp.Code))
	// A decided half offset with another half message's offset is refused,
	// not answered as already decided (the shared v5 path checks first).
	resp = invoke(t, c, b.Addr(), protocol.EndTransaction, &protocol.EndTransactionRequestHeader{ProducerGroup: "pg",
		TranStateTableOffset: h1, CommitLogOffset: p3, CommitOrRollback: message.TxRollback}, nil)
	require.Equal(t, protocol.SystemError, int(resp.Code), resp.Remark)
	require.Contains(t, resp.Remark, "queue offset")
}

// TestBroker_EndTransactionConcurrent: END_TRANSACTION commits of one half
// message arriving together store it under its real topic once.
func TestBroker_EndTransactionConcurrent(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "orders", 1, "plain", nil) // the topic exists
	half, pos := sendHalf(t, c, b, "once")
	const n = 8
	codes := make([]int16, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			<-start
			resp, err := c.Invoke(ctx, b.Addr(), remoting.NewRequest(protocol.EndTransaction,
				protocol.Ext(&protocol.EndTransactionRequestHeader{ProducerGroup: "pg", TranStateTableOffset: half,
					CommitLogOffset: pos, CommitOrRollback: message.TxCommit}), nil))
			if errs[i] = err; err == nil {
				codes[i] = resp.Code
			}
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, protocol.Success, int(codes[i]))
	}
	waitIndexed(t, b)
	require.Equal(t, []string{"plain", "once"}, recordBodiesOf(pullAll(t, c, b, "orders", 1)), "committed once")
}

// TestBroker_TransactionCheck: an undecided half message makes the broker ask
// a producer of its group, whose answer commits it. The producer answers
// every check with several commits at once, so the half message is
// committed once however many checks and answers cross.
func TestBroker_TransactionCheck(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{TransactionCheckInterval: 20 * time.Millisecond, TransactionTimeout: 50 * time.Millisecond})
	var asked, answering, answered atomic.Int32
	var producer *remoting.Client
	producer = remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet(),
		OnRequest: func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
			if req.Code != protocol.CheckTransactionState {
				return
			}
			asked.Add(1)
			var h protocol.CheckTransactionStateRequestHeader
			if h.FromExt(req.ExtFields) != nil {
				return
			}
			r, err := message.Decode(req.Body)
			if err != nil || string(r.Topic) != "orders" {
				return // the check must carry the real topic
			}
			for range 3 {
				answering.Add(1)
				go func() {
					defer answered.Add(1)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_, _ = producer.Invoke(ctx, b.Addr(), remoting.NewRequest(protocol.EndTransaction,
						protocol.Ext(&protocol.EndTransactionRequestHeader{ProducerGroup: "pg", TranStateTableOffset: h.TranStateTableOffset,
							CommitLogOffset: h.CommitLogOffset, CommitOrRollback: message.TxCommit, FromTransactionCheck: true, MsgID: h.MsgID}), nil))
				}()
			}
		}})
	defer producer.Close()
	registerProducer(t, producer, b)
	mustSend(t, producer, b.Addr(), "orders", 1, "plain", nil)
	sendHalf(t, producer, b, "checked")
	require.Eventually(t, func() bool { return len(pullAll(t, producer, b, "orders", 1)) >= 2 }, 10*time.Second, 10*time.Millisecond)
	require.GreaterOrEqual(t, asked.Load(), int32(1))
	// Every answer sent so far has been served (a check still in flight
	// may add more: those too must find the transaction decided).
	require.Eventually(t, func() bool { return answered.Load() == answering.Load() }, 10*time.Second, 10*time.Millisecond)
	waitIndexed(t, b)
	require.Equal(t, []string{"plain", "checked"}, recordBodiesOf(pullAll(t, producer, b, "orders", 1)), "committed once")
}

func recordBodiesOf(recs []message.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Body))
	}
	return out
}

// TestBroker_SendBackLeavesTransactionsAlone: a consumer's send-back of the
// message at queue offset 0 does not mark half message 0 as decided (a
// regression: it did, and the later commit stored nothing).
func TestBroker_SendBackLeavesTransactionsAlone(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	sent := mustSend(t, c, b.Addr(), "orders", 1, "plain", nil)
	require.Equal(t, int64(0), sent.QueueOffset)
	half, pos := sendHalf(t, c, b, "commit-me")
	require.Equal(t, int64(0), half)
	_, plainPos, err := message.ParseOffsetMsgID(sent.MsgID)
	require.NoError(t, err)
	resp := invoke(t, c, b.Addr(), protocol.ConsumerSendMsgBack, &protocol.ConsumerSendMsgBackRequestHeader{
		Offset: plainPos, Group: "cg", DelayLevel: -1, OriginMsgID: sent.MsgID, OriginTopic: "orders"}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	endTx(t, c, b, half, pos, message.TxCommit)
	waitIndexed(t, b)
	require.Equal(t, []string{"plain", "commit-me"}, recordBodiesOf(pullAll(t, c, b, "orders", 1)))
}

// TestBroker_TransactionGiveUp: a half message is given up only after
// transactionCheckMax checks a producer got: with no producer online it
// waits; with one that never decides, it ends in
// TRANS_CHECK_MAX_TIME_TOPIC, as in Java, and is not delivered.
func TestBroker_TransactionGiveUp(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{TransactionCheckInterval: 10 * time.Millisecond, TransactionTimeout: 10 * time.Millisecond})
	var asked atomic.Int32
	producer := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet(),
		OnRequest: func(_ context.Context, _ remoting.ResponseWriter, req *remoting.Command) {
			if req.Code == protocol.CheckTransactionState {
				asked.Add(1) // NB: never answers
			}
		}})
	defer producer.Close()
	mustSend(t, producer, b.Addr(), "orders", 1, "plain", nil)
	sendHalf(t, producer, b, "undecided")
	time.Sleep(400 * time.Millisecond) // NB: 40 check rounds with no producer online
	_, ok := b.topics.Get(transCheckMaxTopic)
	require.False(t, ok, "not given up: no producer was asked")

	registerProducer(t, producer, b)
	require.Eventually(t, func() bool {
		_, ok := b.topics.Get(transCheckMaxTopic)
		return ok && len(pullAll(t, producer, b, transCheckMaxTopic, 0)) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.GreaterOrEqual(t, asked.Load(), int32(transactionCheckMax))
	kept := pullAll(t, producer, b, transCheckMaxTopic, 0)[0]
	require.Equal(t, "undecided", string(kept.Body))
	require.Equal(t, message.TxNot, message.TxType(kept.SysFlag))
	real, _ := message.PropertyValueBytes(kept.Properties, message.PropRealTopic)
	require.Equal(t, "orders", string(real), "the real topic is kept for a resend")
	n := asked.Load()
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, n, asked.Load(), "no more checks once given up")
	waitIndexed(t, b)
	require.Equal(t, []string{"plain"}, recordBodiesOf(pullAll(t, producer, b, "orders", 1)), "never delivered")
}

// TestBroker_TransactionCheckImmunity: a half message with
// CHECK_IMMUNITY_TIME_IN_SECONDS is not checked before that age, even past
// the transaction timeout; one without is checked at the timeout.
func TestBroker_TransactionCheckImmunity(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{TransactionCheckInterval: 10 * time.Millisecond, TransactionTimeout: 10 * time.Millisecond})
	var mu sync.Mutex
	first := map[string]time.Time{} // body → first check
	producer := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet(),
		OnRequest: func(_ context.Context, _ remoting.ResponseWriter, req *remoting.Command) {
			if r, err := message.Decode(req.Body); err == nil && req.Code == protocol.CheckTransactionState {
				mu.Lock()
				if _, ok := first[string(r.Body)]; !ok {
					first[string(r.Body)] = time.Now()
				}
				mu.Unlock()
			}
		}})
	defer producer.Close()
	registerProducer(t, producer, b)
	mustSend(t, producer, b.Addr(), "orders", 1, "plain", nil)
	sent := time.Now()
	for body, props := range map[string]map[string]string{
		"immune": {message.PropCheckImmunityTime: "1"},
		"plain":  {},
	} {
		props[message.PropTranMsg], props[message.PropProducerGroup], props[message.PropUniqKey] = "true", "pg", "U-"+body
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "orders", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
			QueueID: 1, SysFlag: message.TxPrepared, BornTimestamp: time.Now().UnixMilli(), Properties: string(message.AppendProperties(nil, props))}
		resp := invoke(t, producer, b.Addr(), protocol.SendMessage, h, []byte(body))
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := first["immune"]
		return ok
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, first["immune"].Sub(sent), time.Second, "not checked before its immunity time")
	plain, ok := first["plain"]
	require.True(t, ok, "the plain one was checked")
	require.Less(t, plain.Sub(sent), time.Second, "checked at the transaction timeout")
}

// TestBroker_TransactionBookkeepingPruned: once the checker has moved past
// decided half messages, their bookkeeping is dropped, and a late,
// duplicate END_TRANSACTION still finds them decided (no second delivery).
func TestBroker_TransactionBookkeepingPruned(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{TransactionCheckInterval: 10 * time.Millisecond, TransactionTimeout: 10 * time.Millisecond})
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "orders", 1, "plain", nil)
	type half struct{ off, pos int64 }
	var halves []half
	for i := range 5 {
		h, p := sendHalf(t, c, b, fmt.Sprint("tx-", i))
		halves = append(halves, half{h, p})
	}
	for _, h := range halves {
		endTx(t, c, b, h.off, h.pos, message.TxCommit)
	}
	require.Eventually(t, func() bool {
		checked, _ := b.sched.offsets.Query(transCheckGroup, transHalfTopic, 0)
		b.tx.mu.Lock()
		defer b.tx.mu.Unlock()
		return checked == 5 && len(b.tx.done) == 0
	}, 10*time.Second, 10*time.Millisecond, "the checker moved past the decided ones and forgot them")
	endTx(t, c, b, halves[2].off, halves[2].pos, message.TxCommit) // a late duplicate
	waitIndexed(t, b)
	require.Equal(t, []string{"plain", "tx-0", "tx-1", "tx-2", "tx-3", "tx-4"}, recordBodiesOf(pullAll(t, c, b, "orders", 1)),
		"committed once each")
}
