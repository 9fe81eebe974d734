package remoting

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// TestInvoke_InlineNoDial: with NoDial and no open connection Invoke
// returns ErrNotConnected at once and runs no callback; once connected, an
// Inline call's callback gets the response.
func TestInvoke_InlineNoDial(t *testing.T) {
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: echo})
	addr := s.Addr().String()
	c := newClient(t, SerializeMsgpack)
	got := make(chan *Command, 1)
	cb := func(resp *Command, err error) {
		require.NoError(t, err)
		got <- resp
	}
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, []byte("x")), Inline(cb), NoDial())
	require.ErrorIs(t, err, ErrNotConnected)
	require.Empty(t, got, "no callback without a connection")

	_, err = c.Conn(ctxTimeout(t, 5*time.Second), addr)
	require.NoError(t, err)
	_, err = c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, []byte("y")),
		Deadline(time.Now().Add(5*time.Second)), Inline(cb), NoDial())
	require.NoError(t, err)
	require.Equal(t, "y", string((<-got).Body))
}

// TestInvoke_CallbackGetsDialError: an Inline or Async call that cannot
// dial reports it to its callback, never to the caller.
func TestInvoke_CallbackGetsDialError(t *testing.T) {
	c := newClient(t, SerializeMsgpack)
	addr := "127.0.0.1:1" // nothing listens
	for _, opt := range []func(func(*Command, error)) CallOption{Inline, Async} {
		errc := make(chan error, 1)
		resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil),
			opt(func(_ *Command, err error) { errc <- err }))
		require.NoError(t, err)
		require.Nil(t, resp)
		require.Error(t, <-errc)
	}
}

// TestInvoke_OnewayTakesNoCallback: a contradictory call is refused with a
// clear error and sends nothing.
func TestInvoke_OnewayTakesNoCallback(t *testing.T) {
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: echo})
	c := newClient(t, SerializeMsgpack)
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.Addr().String(), NewRequest(codeEcho, nil, nil),
		Oneway(), Async(func(*Command, error) { t.Error("callback ran") }))
	require.ErrorIs(t, err, errOnewayCallback)
	require.False(t, c.Connected(s.Addr().String()), "nothing dialed")
}

// TestInvoke_DeadlineOnServerConn: a Server has no sweeper, so a Deadline
// on its connection is a context deadline: a call the client never
// answers fails with ErrTimeout, waiting or Async.
func TestInvoke_DeadlineOnServerConn(t *testing.T) {
	conns := make(chan *Conn, 1)
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		protocol.HeartBeat: func(ctx context.Context, w ResponseWriter, req *Command) {
			conns <- w.Conn()
			echo(ctx, w, req)
		},
	})
	opts := DefaultClientOptions()
	opts.Logger = quietLogger()
	opts.OnRequest = func(context.Context, ResponseWriter, *Command) {} // never answers
	c := NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.Addr().String(), NewRequest(protocol.HeartBeat, nil, nil))
	require.NoError(t, err)
	sc := <-conns

	_, err = sc.Invoke(context.Background(), NewRequest(4243, nil, nil), Deadline(time.Now().Add(20*time.Millisecond)))
	require.ErrorIs(t, err, ErrTimeout)
	errc := make(chan error, 1)
	_, err = sc.Invoke(context.Background(), NewRequest(4243, nil, nil), Deadline(time.Now().Add(20*time.Millisecond)),
		Async(func(_ *Command, err error) { errc <- err }))
	require.NoError(t, err)
	require.ErrorIs(t, <-errc, ErrTimeout)
}
