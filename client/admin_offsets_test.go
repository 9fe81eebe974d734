package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConsumeStats_UnknownLag: a queue the group has no committed offset
// on has an unknown lag (not its whole depth), and the total counts it
// apart.
func TestConsumeStats_UnknownLag(t *testing.T) {
	c := newCluster(t, 1)
	topic := "unknown-lag"
	c.createTopic(topic, 2)
	sendN(t, c.producer(), topic, "u", 10, nil)
	a := c.admin()
	ctx := ctxT(t, 30*time.Second)
	r, err := a.core.routes.refresh(ctx, topic)
	require.NoError(t, err)
	q0 := r.read[0]
	require.NoError(t, commitOffset(ctx, a.core, r.addrs[q0.BrokerName], "g-unknown", q0, 1))

	var cp ConsumerProgress
	require.Eventually(t, func() bool { // NB: the broker indexes messages asynchronously
		cp, err = a.ConsumeStats(ctx, "g-unknown", topic)
		return err == nil && len(cp.Queues) == 2 && cp.Queues[0].BrokerOffset+cp.Queues[1].BrokerOffset == 10
	}, 10*time.Second, 20*time.Millisecond)
	known, unknown := cp.Queues[0], cp.Queues[1]
	require.Equal(t, q0, known.Queue)
	require.Equal(t, int64(1), known.ConsumerOffset)
	require.Equal(t, known.BrokerOffset-1, known.Lag)
	require.Positive(t, known.LagTime)

	require.Equal(t, int64(-1), unknown.ConsumerOffset)
	require.Equal(t, int64(-1), unknown.Lag, "no committed offset: lag unknown")
	require.Equal(t, time.Duration(-1), unknown.LagTime)

	require.Equal(t, known.Lag, cp.Lag, "the total sums the known lags")
	require.Equal(t, 1, cp.UnknownLag)
	require.Equal(t, known.LagTime, cp.LagTime)
}
