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

// TestSweeper_SoonestDeadline: the sweeper skips a connection until the
// earliest deadline it knows of has passed; an answered call's deadline
// (still the soonest known) or a later call's does not hide an earlier
// pending one, and a long deadline pending does not delay a short one.
func TestSweeper_SoonestDeadline(t *testing.T) {
	release := make(chan struct{})
	s := startServer(t, ServerOptions{}, deferredHandlers(release))
	c := newClient(t, SerializeMsgpack)
	addr := s.Addr().String()
	call := func(code int16, d time.Duration) error {
		_, err := c.Invoke(context.Background(), addr, NewRequest(code, nil, nil), Deadline(time.Now().Add(d)))
		return err
	}
	require.NoError(t, call(codeEcho, 50*time.Millisecond)) // answered: its deadline stays the soonest known

	long := make(chan error, 1)
	go func() { long <- call(codeDeferred, time.Minute) }()
	start := time.Now()
	require.ErrorIs(t, call(codeDeferred, 200*time.Millisecond), ErrTimeout)
	require.Less(t, time.Since(start), 30*time.Second, "the short call waited for the long one's deadline")
	require.ErrorIs(t, call(codeDeferred, 100*time.Millisecond), ErrTimeout, "a deadline after the sweep that set the soonest")
	select {
	case err := <-long:
		t.Fatalf("the call with a minute to go ended: %v", err)
	default:
	}
	close(release)
	require.NoError(t, <-long)
}

// TestSweeper_ClientDue: the sweeper skips a Client until its due time, the
// soonest deadline of all its connections: a short call on one connection
// times out while a long one is pending on another, and once every call is
// answered and their deadlines have passed the Client has nothing due.
func TestSweeper_ClientDue(t *testing.T) {
	release := make(chan struct{})
	s1, s2 := startServer(t, ServerOptions{}, deferredHandlers(release)), startServer(t, ServerOptions{}, deferredHandlers(release))
	c := newClient(t, SerializeMsgpack)
	call := func(s *Server, code int16, d time.Duration) error {
		_, err := c.Invoke(context.Background(), s.Addr().String(), NewRequest(code, nil, nil), Deadline(time.Now().Add(d)))
		return err
	}

	long := make(chan error, 1)
	go func() { long <- call(s1, codeDeferred, time.Minute) }()
	require.Eventually(t, func() bool { return c.due.Load() != 0 }, 10*time.Second, time.Millisecond)
	start := time.Now()
	require.ErrorIs(t, call(s2, codeDeferred, 100*time.Millisecond), ErrTimeout)
	require.Less(t, time.Since(start), 30*time.Second, "the call on the second connection waited for the first's deadline")
	close(release)
	require.NoError(t, <-long)

	idle := newClient(t, SerializeMsgpack)
	_, err := idle.Invoke(context.Background(), s2.Addr().String(), NewRequest(codeEcho, nil, nil),
		Deadline(time.Now().Add(20*time.Millisecond)))
	require.NoError(t, err)
	require.NotZero(t, idle.due.Load())
	require.Eventually(t, func() bool { return idle.due.Load() == 0 }, 10*time.Second, time.Millisecond,
		"answered calls whose deadlines passed leave nothing due")
}

// deferredHandlers answers codeEcho at once and codeDeferred once release
// is closed (or the request's context ends).
func deferredHandlers(release <-chan struct{}) map[int16]Handler {
	return map[int16]Handler{
		codeEcho: echo,
		codeDeferred: func(ctx context.Context, w ResponseWriter, req *Command) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			echo(ctx, w, req)
		},
	}
}
