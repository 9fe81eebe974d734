package remoting

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSweeper_SharedByClients: one sweeper enforces the deadlines of every
// open Client; it keeps running while one is open, and the Close that
// leaves none waits for it to end.
func TestSweeper_SharedByClients(t *testing.T) {
	s := startHoldingServer(t)
	running := func() bool {
		sweeper.mu.Lock()
		defer sweeper.mu.Unlock()
		return sweeper.stop != nil
	}
	c1, c2 := newClient(t, SerializeMsgpack), newClient(t, SerializeMsgpack)
	for _, c := range []*Client{c1, c2} {
		_, err := c.Invoke(context.Background(), s.Addr().String(), NewRequest(codeEcho, nil, nil),
			Deadline(time.Now().Add(30*time.Millisecond)))
		require.ErrorIs(t, err, ErrTimeout)
	}
	require.True(t, running())
	require.NoError(t, c1.Close())
	require.True(t, running(), "c2 is still open")
	_, err := c2.Invoke(context.Background(), s.Addr().String(), NewRequest(codeEcho, nil, nil),
		Deadline(time.Now().Add(30*time.Millisecond)))
	require.ErrorIs(t, err, ErrTimeout, "the sweeper goes on for c2")
	require.NoError(t, c2.Close())
	require.False(t, running(), "the last Close stopped the sweeper and waited for it")
}
