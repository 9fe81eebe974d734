package compat

import (
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"
)

// RocketMQ 5 transactions with the official Go v5 SDK: half messages,
// EndTransaction, and the broker's check sent on the producer's Telemetry
// stream (recover_orphaned_transaction_command).

// checkPatience bounds the wait for a check-back: the tests' mqbroker
// checks its half messages every second (transaction_check_interval),
// those older than 6 s (transaction_timeout).
const checkPatience = patience

// checked records the messages a v5 producer's TransactionChecker was
// asked about, and answers each with resolution.
type checked struct {
	resolution rmq.TransactionResolution
	mu         sync.Mutex
	views      []*rmq.MessageView
}

func (c *checked) check(mv *rmq.MessageView) rmq.TransactionResolution {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.views = append(c.views, mv)
	return c.resolution
}

func (c *checked) seen() []*rmq.MessageView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*rmq.MessageView(nil), c.views...)
}

// newV5TxProducer starts an official v5 transactional producer for
// topic whose checker is c.
func newV5TxProducer(t *testing.T, topic string, c *checked) rmq.Producer {
	t.Helper()
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: grpcEndpoint(t),
		Credentials: &credentials.SessionCredentials{AccessKey: adminCreds.AccessKey, AccessSecret: adminCreds.SecretKey}},
		rmq.WithTopics(topic), rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: c.check}))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.GracefulStop() })
	return p
}

// sendInTransaction sends one message with id in a new transaction and
// returns the transaction and the v5 message id.
func sendInTransaction(t *testing.T, p rmq.Producer, topic, id string) (rmq.Transaction, string) {
	t.Helper()
	m := &rmq.Message{Topic: topic, Body: []byte("body of " + id)}
	m.SetTag("TagTx")
	m.AddProperty(idProperty, id)
	tx := p.BeginTransaction()
	rs, err := p.SendWithTransaction(waitContext(t, patience), m, tx)
	require.NoError(t, err, id)
	require.Len(t, rs, 1)
	require.NotEmpty(t, rs[0].MessageID)
	require.NotEmpty(t, rs[0].TransactionId, "the broker names the half message")
	return tx, rs[0].MessageID
}

// TestV5Transaction_CommitRollback: the official v5 producer's committed
// transaction is delivered once, with its v5 message id; its rolled-back
// one never is. The checker would commit: a rollback the broker failed
// to record would be checked and delivered.
func TestV5Transaction_CommitRollback(t *testing.T) {
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	c := &checked{resolution: rmq.COMMIT}
	p := newV5TxProducer(t, topic, c)
	in := consumeAll(t, topic)

	rb, _ := sendInTransaction(t, p, topic, "rollback")
	require.NoError(t, rb.RollBack())
	cm, msgID := sendInTransaction(t, p, topic, "commit")
	require.NoError(t, cm.Commit())

	got := in.waitIDs(t, []string{"commit"})
	require.Equal(t, msgID, got[0].msg.MsgId, "the 4.x id is the v5 message id")
	require.Equal(t, "body of commit", string(got[0].msg.Body))
	require.Equal(t, "TagTx", got[0].msg.GetTags())
	require.Len(t, in.quiet(), 1, "the rolled-back message is never delivered")
	require.Empty(t, c.seen(), "decided transactions are not checked")
}

// TestV5Transaction_CheckBack: a transaction the producer leaves open
// (its local outcome unknown) is checked by the broker over the
// producer's Telemetry stream; the SDK's TransactionChecker answers
// COMMIT (EndTransaction) and the message is then delivered, once.
func TestV5Transaction_CheckBack(t *testing.T) {
	t.Parallel() // NB: waits out the transaction timeout (6 s)
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	c := &checked{resolution: rmq.COMMIT}
	p := newV5TxProducer(t, topic, c)
	in := consumeAll(t, topic)

	sentAt := time.Now()
	_, msgID := sendInTransaction(t, p, topic, "unknown")
	deadline := time.Now().Add(checkPatience)
	for len(in.deliveries()) == 0 {
		require.True(t, time.Now().Before(deadline), "no delivery %s after the send; checks: %d", time.Since(sentAt), len(c.seen()))
		time.Sleep(100 * time.Millisecond)
	}
	views := c.seen()
	require.NotEmpty(t, views, "delivered only after a check")
	mv := views[0]
	require.Equal(t, msgID, mv.GetMessageId())
	require.Equal(t, topic, mv.GetTopic())
	require.Equal(t, "body of unknown", string(mv.GetBody()))
	require.Equal(t, "unknown", mv.GetProperties()[idProperty])
	got := in.quiet()
	require.Len(t, got, 1, "delivered once")
	require.Equal(t, msgID, got[0].msg.MsgId)
	require.Equal(t, "unknown", got[0].msg.GetProperty(idProperty))
	require.True(t, got[0].at.Sub(sentAt) >= 6*time.Second, "not before the transaction timeout: %s", got[0].at.Sub(sentAt))
}
