package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
)

// TestTransaction_CommittedOnReturn: SendInTransaction returns once the
// broker stored the commit, so what the producer sends next to the queue
// comes after the committed message (with a one-way commit, the broker
// stored the next send first: issue 45's orders of one customer came out
// of order).
func TestTransaction_CommittedOnReturn(t *testing.T) {
	c := &cluster{t: t, ns: startNamesrv(t)}
	cfg := brokerConfig(t, c.ns.Addr(), "broker-a", t.TempDir())
	cfg.Store.Flush = conf.FlushSync
	c.brokers, c.cfgs = append(c.brokers, startBrokerCfg(t, cfg)), append(c.cfgs, cfg)
	c.waitRoute("TBW102", 1)
	c.createTopic("txq", 1)
	p := c.producer(WithGroup("txq-pg"), WithTransactionListener(&txListener{ids: map[string]string{}}))
	ctx := ctxT(t, 30*time.Second)
	var want []string
	for i := range 20 {
		res, err := p.SendInTransaction(ctx, &Message{Topic: "txq", Body: []byte("commit"), Keys: []string{fmt.Sprint("tx-", i)}})
		require.NoError(t, err)
		require.Equal(t, TransactionCommit, res.State)
		_, err = p.Send(ctx, &Message{Topic: "txq", Body: []byte("plain"), Keys: []string{fmt.Sprint("plain-", i)}})
		require.NoError(t, err)
		want = append(want, fmt.Sprint("tx-", i), fmt.Sprint("plain-", i))
	}
	pc, err := NewPullConsumer("txq-cg", c.opts()...)
	require.NoError(t, err)
	require.NoError(t, pc.Start())
	defer pc.Close()
	qs, err := pc.Queues(ctx, "txq")
	require.NoError(t, err)
	var got []string
	for off := int64(0); len(got) < len(want); {
		r, err := pc.PullWait(ctx, qs[0], off, 32)
		require.NoError(t, err)
		for _, m := range r.Messages {
			got = append(got, m.Keys[0])
		}
		off = r.NextOffset
	}
	require.Equal(t, want, got, "each committed message before the send that followed it")
}
