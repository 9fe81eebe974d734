package client

import (
	"context"
	"slices"
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
	ids     map[string]string // body → MsgID, from ExecuteLocal and CheckLocal
}

func (l *txListener) ExecuteLocal(_ context.Context, m *Message) TransactionState {
	l.mu.Lock()
	if l.ids[string(m.Body)] == "" {
		l.ids[string(m.Body)] = m.MsgID
	}
	l.mu.Unlock()
	switch string(m.Body) {
	case "slow":
		time.Sleep(700 * time.Millisecond) // NB: past several of the broker's checks
		return TransactionCommit
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
	if id := l.ids[string(m.Body)]; id != m.MsgID {
		l.ids[string(m.Body)] = "MISMATCH " + id + " " + m.MsgID
	}
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
	// NB: a check of a rolled-back message would commit it: a rollback the
	// broker did not record shows as a delivery.
	l := &txListener{ids: map[string]string{}, checks: map[string]TransactionState{"late-commit": TransactionCommit,
		"late-rollback": TransactionRollback, "panic": TransactionRollback, "rollback": TransactionCommit}}
	p := c.producer(WithGroup("tx-pg"), WithTransactionListener(l))
	rec := newRecorder()
	c.pushConsumer("tx-cg", "tx", rec.handler("c"), WithConsumeFrom(ConsumeFromFirst))

	ctx := ctxT(t, 20*time.Second)
	want := map[string]TransactionState{"commit": TransactionCommit, "rollback": TransactionRollback,
		"late-commit": TransactionUnknown, "late-rollback": TransactionUnknown, "panic": TransactionUnknown,
		"slow": TransactionCommit}
	for body, state := range want {
		m := &Message{Topic: "tx", Body: []byte(body), Keys: []string{"k-" + body}}
		res, err := p.SendInTransaction(ctx, m)
		require.NoError(t, err, body)
		require.Equal(t, SendOK, res.Status, body)
		require.Equal(t, state, res.State, body)
		require.Empty(t, m.MsgID, "the caller's message is not changed")
		l.mu.Lock()
		require.Equal(t, res.MsgID, l.ids[body], "ExecuteLocal gets the half message's id")
		l.mu.Unlock()
	}
	// commit and slow at once, late-commit after a check; the rolled-back
	// ones never.
	rec.waitDistinct(t, 3, 15*time.Second)
	var checks int
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		checks = len(l.checked)
		return slices.Contains(l.checked, "late-rollback") && slices.Contains(l.checked, "panic")
	}, 10*time.Second, 10*time.Millisecond, "the undecided ones are checked")
	time.Sleep(700 * time.Millisecond) // NB: a few more check rounds: nothing else may come, nor be asked
	rec.mu.Lock()
	require.Equal(t, map[string]int{"commit": 1, "late-commit": 1, "slow": 1}, rec.count)
	for _, m := range rec.msgs {
		require.NotContains(t, m.Properties, "TRAN_MSG", "delivered as a plain message")
	}
	rec.mu.Unlock()
	l.mu.Lock()
	require.Contains(t, l.checked, "late-commit")
	require.Contains(t, l.checked, "late-rollback")
	require.Contains(t, l.checked, "panic")
	require.NotContains(t, l.checked, "commit", "decided at once: never checked")
	require.NotContains(t, l.checked, "rollback", "decided at once: never checked")
	require.NotContains(t, l.checked, "slow", "not checked while its ExecuteLocal runs")
	require.Len(t, l.checked, checks, "decided messages are not checked again")
	for body, id := range l.ids {
		require.NotContains(t, id, "MISMATCH", "CheckLocal gets the id of %s", body)
	}
	l.mu.Unlock()

	// A plain producer cannot send in a transaction; a delay is refused.
	_, err := c.producer().SendInTransaction(ctx, &Message{Topic: "tx", Body: []byte("x")})
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = p.SendInTransaction(ctx, &Message{Topic: "tx", Body: []byte("x"), DelayLevel: 2})
	require.ErrorIs(t, err, ErrInvalidMessage)
}

// TestTransaction_CheckAfterRestart: a half message left undecided by a
// producer that went away is decided by the next producer of its group,
// which never sent anything: it registered with the brokers at Start.
func TestTransaction_CheckAfterRestart(t *testing.T) {
	c := txCluster(t)
	c.createTopic("tx2", 1)
	first := c.producer(WithGroup("tx2-pg"), WithTransactionListener(&txListener{ids: map[string]string{}}))
	res, err := first.SendInTransaction(ctxT(t, 10*time.Second), &Message{Topic: "tx2", Body: []byte("orphan")})
	require.NoError(t, err)
	require.Equal(t, TransactionUnknown, res.State)
	require.NoError(t, first.Close())

	l := &txListener{ids: map[string]string{}, checks: map[string]TransactionState{"orphan": TransactionCommit}}
	p, err := NewProducer(c.opts(WithGroup("tx2-pg"), WithTransactionListener(l), WithHeartbeatInterval(time.Hour))...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Close() })
	rec := newRecorder()
	c.pushConsumer("tx2-cg", "tx2", rec.handler("c"), WithConsumeFrom(ConsumeFromFirst))
	rec.waitDistinct(t, 1, 15*time.Second)
	l.mu.Lock()
	require.Contains(t, l.checked, "orphan")
	l.mu.Unlock()
}
