package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker"
)

// txCluster is a cluster whose broker checks undecided half messages
// every 200 ms, once they are 100 ms old.
func txCluster(t *testing.T) *cluster {
	c := &cluster{t: t, ns: startNamesrv(t)}
	cfg := brokerConfig(t, c.ns.Addr(), "broker-a", t.TempDir())
	b, err := broker.New(cfg, broker.Options{Logger: quiet(), TransactionCheckInterval: 200 * time.Millisecond,
		TransactionTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })
	c.brokers, c.cfgs = append(c.brokers, b), append(c.cfgs, cfg)
	c.waitRoute("TBW102", 1)
	return c
}

// txListener decides by body: "commit", "rollback", or anything else
// unknown until checked, then what checks says.
type txListener struct {
	mu      sync.Mutex
	checks  map[string]TransactionState // body → answer to CheckLocal
	checked []string
}

func (l *txListener) ExecuteLocal(_ context.Context, m *Message) TransactionState {
	switch string(m.Body) {
	case "commit":
		return TransactionCommit
	case "rollback":
		return TransactionRollback
	case "panic":
		panic("local transaction failed")
	}
	return TransactionUnknown
}

func (l *txListener) CheckLocal(_ context.Context, m *Message) TransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked = append(l.checked, string(m.Body))
	if s, ok := l.checks[string(m.Body)]; ok {
		return s
	}
	return TransactionUnknown
}

// TestTransaction: a committed message is delivered, a rolled-back one is
// not, and an unknown one is decided by the broker's check-back.
func TestTransaction(t *testing.T) {
	c := txCluster(t)
	c.createTopic("tx", 2)
	l := &txListener{checks: map[string]TransactionState{"late-commit": TransactionCommit, "late-rollback": TransactionRollback,
		"panic": TransactionRollback}}
	p := c.producer(WithGroup("tx-pg"), WithTransactionListener(l))
	rec := newRecorder()
	c.pushConsumer("tx-cg", "tx", rec.handler("c"), WithConsumeFrom(ConsumeFromFirst))

	ctx := ctxT(t, 20*time.Second)
	want := map[string]TransactionState{"commit": TransactionCommit, "rollback": TransactionRollback,
		"late-commit": TransactionUnknown, "late-rollback": TransactionUnknown, "panic": TransactionUnknown}
	for body, state := range want {
		m := &Message{Topic: "tx", Body: []byte(body), Keys: []string{"k-" + body}}
		res, err := p.SendInTransaction(ctx, m)
		require.NoError(t, err, body)
		require.Equal(t, SendOK, res.Status, body)
		require.Equal(t, state, res.State, body)
		require.Equal(t, res.MsgID, m.MsgID)
	}
	// commit at once, late-commit after a check; the rolled-back ones
	// never.
	rec.waitDistinct(t, 2, 15*time.Second)
	time.Sleep(700 * time.Millisecond) // NB: a few more checks: nothing else may come
	rec.mu.Lock()
	require.Equal(t, map[string]int{"commit": 1, "late-commit": 1}, rec.count)
	rec.mu.Unlock()
	l.mu.Lock()
	require.Contains(t, l.checked, "late-commit")
	require.Contains(t, l.checked, "late-rollback")
	require.NotContains(t, l.checked, "commit", "decided at once: never checked")
	l.mu.Unlock()

	// A plain producer cannot send in a transaction; a delay is refused.
	_, err := c.producer().SendInTransaction(ctx, &Message{Topic: "tx", Body: []byte("x")})
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = p.SendInTransaction(ctx, &Message{Topic: "tx", Body: []byte("x"), DelayLevel: 2})
	require.ErrorIs(t, err, ErrInvalidMessage)
}
