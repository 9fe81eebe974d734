package remoting

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

const codeEcho = 9001

func TestServer_RoundTripEverySerializeType(t *testing.T) {
	var seen sync.Map // serialize type of each request, by opaque
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		codeEcho: func(ctx context.Context, w ResponseWriter, req *Command) {
			seen.Store(req.ExtFields["st"], req.SerializeType)
			echo(ctx, w, req)
		},
	})
	for _, st := range serializeTypes {
		t.Run(st.String(), func(t *testing.T) {
			c := newClient(t, st)
			body := []byte("hello " + st.String())
			resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.Addr().String(),
				NewRequest(codeEcho, map[string]string{"st": st.String(), "k": "v"}, body))
			require.NoError(t, err)
			require.True(t, resp.IsResponse())
			require.EqualValues(t, protocol.Success, resp.Code)
			require.Equal(t, st, resp.SerializeType, "reply in the request's serialize type")
			require.Equal(t, "v", resp.ExtFields["k"])
			require.Equal(t, body, resp.Body)
			require.Equal(t, protocol.LanguageGo, resp.Language)
			got, _ := seen.Load(st.String())
			require.Equal(t, st, got)
		})
	}
}

// TestServer_ConcurrentInterleaved: many goroutines share one connection;
// the handler sleeps a random time so responses come back out of order.
func TestServer_ConcurrentInterleaved(t *testing.T) {
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		codeEcho: func(ctx context.Context, w ResponseWriter, req *Command) {
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			echo(ctx, w, req)
		},
	})
	for _, st := range []SerializeType{SerializeJSON, SerializeMsgpack} {
		t.Run(st.String(), func(t *testing.T) {
			c := newClient(t, st)
			ctx := ctxTimeout(t, 30*time.Second)
			const workers, calls = 16, 40
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < calls; i++ {
						id := strconv.Itoa(w*calls + i)
						body := make([]byte, rand.IntN(8000))
						for j := range body {
							body[j] = byte(w + i + j)
						}
						resp, err := c.Invoke(ctx, s.Addr().String(), NewRequest(codeEcho, map[string]string{"id": id}, body))
						if err != nil {
							errs <- err
							return
						}
						if resp.ExtFields["id"] != id || string(resp.Body) != string(body) {
							errs <- fmt.Errorf("request %s got the response of %s", id, resp.ExtFields["id"])
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			c.mu.Lock()
			require.Len(t, c.conns, 1, "one connection per address")
			c.mu.Unlock()
		})
	}
}

// TestServer_ReplyLater: the handler parks the writer and returns; another
// goroutine answers later (long polling).
func TestServer_ReplyLater(t *testing.T) {
	parked := make(chan ResponseWriter, 1)
	var parkedReq *Command
	s := startServer(t, ServerOptions{MaxInflight: 1}, map[int16]Handler{
		protocol.PullMessage: func(_ context.Context, w ResponseWriter, req *Command) {
			parkedReq = req
			parked <- w
		},
		codeEcho: echo,
	})
	c := newClient(t, SerializeMsgpack)
	addr := s.Addr().String()
	done := make(chan *Command, 1)
	go func() {
		resp, err := c.Invoke(context.Background(), addr, NewRequest(protocol.PullMessage, nil, nil))
		if err == nil {
			done <- resp
		}
		close(done)
	}()
	w := <-parked
	// The parked request holds no handler slot (MaxInflight is 1).
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)

	go func() {
		time.Sleep(20 * time.Millisecond)
		_ = w.Write(NewResponse(parkedReq, protocol.PullNotFound, "OFFSET_OVERFLOW_ONE"))
	}()
	resp := <-done
	require.NotNil(t, resp)
	require.EqualValues(t, protocol.PullNotFound, resp.Code)
	require.Equal(t, "OFFSET_OVERFLOW_ONE", resp.Remark)
	require.ErrorIs(t, w.Write(NewResponse(parkedReq, 0, "")), ErrAlreadyReplied)
}

// TestServer_SlowHandlerDoesNotStall: a blocked handler on a connection
// does not delay a fast request on the same connection.
func TestServer_SlowHandlerDoesNotStall(t *testing.T) {
	release := make(chan struct{})
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		1001: func(ctx context.Context, w ResponseWriter, req *Command) {
			<-release
			echo(ctx, w, req)
		},
		codeEcho: echo,
	})
	c := newClient(t, SerializeJSON)
	addr := s.Addr().String()
	slow := make(chan error, 1)
	c.Invoke(ctxTimeout(t, 10*time.Second), addr, NewRequest(1001, nil, nil), Async(func(_ *Command, err error) { slow <- err }))
	for i := 0; i < 5; i++ {
		_, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
		require.NoError(t, err)
	}
	select {
	case err := <-slow:
		t.Fatalf("slow call finished early: %v", err)
	default:
	}
	close(release)
	require.NoError(t, <-slow)
}

func TestServer_UnknownCode(t *testing.T) {
	s := startServer(t, ServerOptions{}, nil)
	c := newClient(t, SerializeMsgpack)
	resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.Addr().String(), NewRequest(protocol.QueryBrokerOffset, nil, nil))
	require.NoError(t, err)
	require.EqualValues(t, protocol.RequestCodeNotSupported, resp.Code)
	require.Contains(t, resp.Remark, "13")
	require.Contains(t, resp.Remark, "QUERY_BROKER_OFFSET")
}

func TestServer_HandleDefault(t *testing.T) {
	s := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	s.HandleDefault(echo)
	require.NoError(t, s.Start())
	defer func() { require.NoError(t, s.Shutdown(context.Background())) }()
	require.Panics(t, func() { s.Handle(1, echo) }, "Handle after Start")
	c := newClient(t, SerializeJSON)
	resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.Addr().String(), NewRequest(777, map[string]string{"a": "b"}, nil))
	require.NoError(t, err)
	require.EqualValues(t, protocol.Success, resp.Code)
	require.Equal(t, "b", resp.ExtFields["a"])
}

func TestServer_OnewayGetsNoReply(t *testing.T) {
	got := make(chan *Command, 1)
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		protocol.UpdateConsumerOffset: func(ctx context.Context, w ResponseWriter, req *Command) {
			require.NoError(t, w.Write(NewResponse(req, protocol.Success, "")), "no-op for oneway")
			got <- req
		},
		codeEcho: echo,
	})
	conn := dialRaw(t, s)
	oneway := NewRequest(protocol.UpdateConsumerOffset, map[string]string{"commitOffset": "4"}, nil)
	oneway.Flag = FlagOneway
	oneway.Opaque = 100
	writeRaw(t, conn, oneway)
	req := <-got
	require.True(t, req.IsOneway())
	// The next frame on the wire answers the next request, not the oneway.
	normal := NewRequest(codeEcho, nil, nil)
	normal.Opaque = 101
	writeRaw(t, conn, normal)
	resp := readRaw(t, conn)
	require.Equal(t, int32(101), resp.Opaque)

	// Unknown oneway codes get no reply either.
	unknown := NewRequest(4242, nil, nil)
	unknown.Flag, unknown.Opaque = FlagOneway, 102
	writeRaw(t, conn, unknown)
	normal.Opaque = 103
	writeRaw(t, conn, normal)
	require.Equal(t, int32(103), readRaw(t, conn).Opaque)

	// Through the client: a Oneway call returns once written.
	c := newClient(t, SerializeMsgpack)
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.Addr().String(),
		NewRequest(protocol.UpdateConsumerOffset, nil, nil), Oneway())
	require.NoError(t, err)
	require.True(t, (<-got).IsOneway())
}

// TestServer_RawJSONAndBinaryClients: a peer speaking only JSON or only
// the binary header gets replies in its own type.
func TestServer_RawJSONAndBinaryClients(t *testing.T) {
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: echo})
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		conn := dialRaw(t, s)
		req := NewRequest(codeEcho, map[string]string{"x": "1"}, []byte("b"))
		req.SerializeType, req.Opaque, req.Language = st, 5, protocol.LanguageJava
		writeRaw(t, conn, req)
		resp := readRaw(t, conn)
		require.Equal(t, st, resp.SerializeType)
		require.Equal(t, FlagResponse, resp.Flag)
		require.Equal(t, int32(5), resp.Opaque)
		require.Equal(t, "1", resp.ExtFields["x"])
	}
	// A captured Go-client frame, byte for byte.
	s2 := startServer(t, ServerOptions{}, map[int16]Handler{protocol.HeartBeat: echo})
	conn := dialRaw(t, s2)
	_, err := conn.Write(loadFrame(t, "06-heart-beat-producer.bin"))
	require.NoError(t, err)
	resp := readRaw(t, conn)
	require.Equal(t, SerializeJSON, resp.SerializeType)
	require.Equal(t, int32(7), resp.Opaque)
	require.Contains(t, string(resp.Body), "pg-sluice")
}

// TestServer_InvokeClient: the server calls the client back on the
// client's own connection (spec §4).
func TestServer_InvokeClient(t *testing.T) {
	conns := make(chan *Conn, 1)
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		protocol.HeartBeat: func(ctx context.Context, w ResponseWriter, req *Command) {
			conns <- w.Conn()
			echo(ctx, w, req)
		},
	})
	var notified atomic.Int32
	opts := DefaultClientOptions()
	opts.Logger = quietLogger()
	opts.OnRequest = func(_ context.Context, w ResponseWriter, req *Command) {
		switch req.Code {
		case protocol.NotifyConsumerIDsChanged:
			notified.Add(1)
		case protocol.GetConsumerRunningInfo:
			resp := NewResponse(req, protocol.Success, "")
			resp.Body = []byte(`{"running":true}`)
			_ = w.Write(resp)
		default:
			_ = w.Write(NewResponse(req, protocol.RequestCodeNotSupported, "no"))
		}
	}
	c := NewClient(opts)
	defer func() { require.NoError(t, c.Close()) }()
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.Addr().String(), NewRequest(protocol.HeartBeat, nil, nil))
	require.NoError(t, err)
	sc := <-conns

	resp, err := sc.Invoke(ctxTimeout(t, 5*time.Second), NewRequest(protocol.GetConsumerRunningInfo,
		protocol.Ext(&protocol.GetConsumerRunningInfoRequestHeader{ConsumerGroup: "cg", ClientID: "c1"}), nil))
	require.NoError(t, err)
	require.EqualValues(t, protocol.Success, resp.Code)
	require.Equal(t, `{"running":true}`, string(resp.Body))
	require.Equal(t, SerializeMsgpack, resp.SerializeType, "server calls back in the client's serialize type")

	_, err = sc.Invoke(ctxTimeout(t, 5*time.Second), NewRequest(protocol.NotifyConsumerIDsChanged,
		protocol.Ext(&protocol.NotifyConsumerIDsChangedRequestHeader{ConsumerGroup: "cg"}), nil), Oneway())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return notified.Load() == 1 }, 5*time.Second, time.Millisecond)

	async := make(chan *Command, 1)
	sc.Invoke(ctxTimeout(t, 5*time.Second), NewRequest(4243, nil, nil), Async(func(r *Command, err error) {
		require.NoError(t, err)
		async <- r
	}))
	require.EqualValues(t, protocol.RequestCodeNotSupported, (<-async).Code)
}

func TestServer_HandlerPanic(t *testing.T) {
	var logs logBuffer
	s := startServer(t, ServerOptions{Logger: newLogger(&logs)}, map[int16]Handler{
		1002:     func(context.Context, ResponseWriter, *Command) { panic("boom") },
		codeEcho: echo,
	})
	c := newClient(t, SerializeMsgpack)
	addr := s.Addr().String()
	resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(1002, nil, nil))
	require.NoError(t, err)
	require.EqualValues(t, protocol.SystemError, resp.Code)
	require.Contains(t, resp.Remark, "internal error")
	conn, err := c.Conn(context.Background(), addr)
	require.NoError(t, err)
	require.Contains(t, logs.String(), "boom")
	require.Contains(t, logs.String(), conn.LocalAddr().String(), "logged with the remote address")

	// The connection stays usable.
	_, err = c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	conn2, err := c.Conn(context.Background(), addr)
	require.NoError(t, err)
	require.Same(t, conn, conn2)
}

func TestServer_Timeout(t *testing.T) {
	release := make(chan struct{})
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		1003: func(ctx context.Context, w ResponseWriter, req *Command) {
			<-release
			echo(ctx, w, req) // answered after the caller gave up: dropped
		},
		codeEcho: echo,
	})
	c := newClient(t, SerializeMsgpack)
	addr := s.Addr().String()
	// NB: dial first, so that the short deadline is the call's alone.
	_, err := c.Conn(ctxTimeout(t, 5*time.Second), addr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Invoke(ctx, addr, NewRequest(1003, nil, nil))
	require.ErrorIs(t, err, ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), addr)
	close(release)

	// The late reply is dropped and the connection keeps working.
	for i := 0; i < 3; i++ {
		resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, map[string]string{"i": "x"}, nil))
		require.NoError(t, err)
		require.Equal(t, "x", resp.ExtFields["i"])
	}

	// Async: the callback gets the timeout.
	block := make(chan struct{})
	defer close(block)
	s2 := startServer(t, ServerOptions{}, map[int16]Handler{1003: func(context.Context, ResponseWriter, *Command) { <-block }})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	errc := make(chan error, 1)
	c.Invoke(ctx2, s2.Addr().String(), NewRequest(1003, nil, nil), Async(func(_ *Command, err error) { errc <- err }))
	require.ErrorIs(t, <-errc, ErrTimeout)

	// A context that is already done fails at once.
	cancelled, cancel3 := context.WithCancel(context.Background())
	cancel3()
	_, err = c.Invoke(cancelled, addr, NewRequest(codeEcho, nil, nil))
	require.ErrorIs(t, err, context.Canceled)
}

func TestServer_Busy(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var logs logBuffer
	s := startServer(t, ServerOptions{MaxInflight: 1, Logger: newLogger(&logs)}, map[int16]Handler{
		1004: func(ctx context.Context, w ResponseWriter, req *Command) {
			started <- struct{}{}
			<-release
			echo(ctx, w, req)
		},
	})
	c := newClient(t, SerializeMsgpack)
	addr := s.Addr().String()
	first := make(chan error, 1)
	c.Invoke(ctxTimeout(t, 10*time.Second), addr, NewRequest(1004, nil, nil), Async(func(_ *Command, err error) { first <- err }))
	<-started
	resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(1004, nil, nil))
	require.NoError(t, err)
	require.EqualValues(t, protocol.SystemBusy, resp.Code)
	require.Contains(t, resp.Remark, "1 requests in flight")
	// NB: one line per remote address a minute, however many are refused.
	for range 5 {
		resp, err = c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(1004, nil, nil))
		require.NoError(t, err)
		require.EqualValues(t, protocol.SystemBusy, resp.Code)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "too many requests in flight"), logs.String())
	close(release)
	require.NoError(t, <-first)
}

func TestServer_Hooks(t *testing.T) {
	var mu sync.Mutex
	connected, disconnected := map[uint64]bool{}, map[uint64]bool{}
	s := startServer(t, ServerOptions{
		OnConnect: func(c *Conn) { mu.Lock(); connected[c.ID()] = true; mu.Unlock() },
		OnDisconnect: func(c *Conn) {
			require.Error(t, c.Context().Err(), "context cancelled before the hook")
			mu.Lock()
			disconnected[c.ID()] = true
			mu.Unlock()
		},
	}, map[int16]Handler{codeEcho: echo})
	c := newClient(t, SerializeJSON)
	addr := s.Addr().String()
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	sc := oneConn(t, s)
	id := sc.ID()
	mu.Lock()
	require.True(t, connected[id])
	mu.Unlock()

	// The client closes its side: the server notices and runs the hook.
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return disconnected[id] }, 5*time.Second, time.Millisecond)
	require.Empty(t, s.Conns())
}

// oneConn waits until s holds exactly one connection and returns it. NB:
// now and then a dial leaves the server a second connection for a moment
// (see TestServer_ShutdownWithInflight), which the client closes at once.
func oneConn(t *testing.T, s *Server) *Conn {
	t.Helper()
	var cs []*Conn
	require.Eventually(t, func() bool { cs = s.Conns(); return len(cs) == 1 }, 5*time.Second, time.Millisecond,
		"one connection")
	return cs[0]
}

// TestServer_ConnLossAndRedial: the server drops the connection while a
// call is pending; the call fails with ErrConnClosed and the next call
// dials again.
func TestServer_ConnLossAndRedial(t *testing.T) {
	entered := make(chan struct{}, 1)
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		1005:     func(context.Context, ResponseWriter, *Command) { entered <- struct{}{} },
		codeEcho: echo,
	})
	c := newClient(t, SerializeMsgpack)
	addr := s.Addr().String()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Invoke(context.Background(), addr, NewRequest(1005, nil, nil))
		errc <- err
	}()
	<-entered
	first := oneConn(t, s)
	require.NoError(t, first.Close())
	err := <-errc
	require.ErrorIs(t, err, ErrConnClosed)

	resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	require.EqualValues(t, protocol.Success, resp.Code)
	require.NotEqual(t, first.ID(), oneConn(t, s).ID(), "a new connection")
}

func TestServer_IdleTimeout(t *testing.T) {
	closed := make(chan uint64, 1)
	onDisconnect := func(c *Conn) {
		select {
		case closed <- c.ID():
		default: // NB: only the first is awaited; never block the server
		}
	}
	s := startServer(t, ServerOptions{IdleTimeout: 100 * time.Millisecond, OnDisconnect: onDisconnect},
		map[int16]Handler{codeEcho: echo})
	c := newClient(t, SerializeMsgpack)
	addr := s.Addr().String()
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	conn, err := c.Conn(context.Background(), addr)
	require.NoError(t, err)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("idle connection not closed")
	}
	require.Eventually(t, conn.Closed, 5*time.Second, time.Millisecond, "client notices")
	_, err = c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
	require.NoError(t, err, "redialed")
}

func TestServer_FrameTooLargeOnWrite(t *testing.T) {
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: echo})
	opts := DefaultClientOptions()
	opts.MaxFrameSize = 1 << 16
	opts.Logger = quietLogger()
	c := NewClient(opts)
	defer func() { require.NoError(t, c.Close()) }()
	addr := s.Addr().String()
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, make([]byte, 1<<16)))
	require.ErrorIs(t, err, ErrFrameTooLarge)
	_, err = c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, make([]byte, 1000)))
	require.NoError(t, err, "connection still usable")
}

// TestServer_LargeBody sends bodies above netpoll's 4 KiB copy threshold
// both ways (written by reference).
func TestServer_LargeBody(t *testing.T) {
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: echo})
	c := newClient(t, SerializeMsgpack)
	body := make([]byte, 3<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	resp, err := c.Invoke(ctxTimeout(t, 10*time.Second), s.Addr().String(), NewRequest(codeEcho, nil, body))
	require.NoError(t, err)
	require.Equal(t, body, resp.Body)
}

// TestServer_ShutdownWithInflight: Shutdown lets a running handler answer,
// fails a parked request, refuses a late reply, and runs OnDisconnect once
// for every connection. NB: the client's dial may leave the server a
// second connection (netpoll, now and then, reports a connect the server
// accepted as closed, and the client dials again: Client.dial), so the
// hook is counted per connection, not in all.
func TestServer_ShutdownWithInflight(t *testing.T) {
	entered := make(chan struct{}, 1)
	parked := make(chan ResponseWriter, 1)
	var hooksMu sync.Mutex
	disconnects := map[*Conn]int{} // guarded by hooksMu: by connection accepted
	s := NewServer("127.0.0.1:0", ServerOptions{
		Logger: quietLogger(),
		OnConnect: func(c *Conn) {
			hooksMu.Lock()
			disconnects[c] = 0
			hooksMu.Unlock()
		},
		OnDisconnect: func(c *Conn) {
			hooksMu.Lock()
			disconnects[c]++
			hooksMu.Unlock()
		},
	})
	s.Handle(1006, func(ctx context.Context, w ResponseWriter, req *Command) {
		entered <- struct{}{}
		time.Sleep(100 * time.Millisecond)
		echo(ctx, w, req)
	})
	s.Handle(protocol.PullMessage, func(_ context.Context, w ResponseWriter, _ *Command) { parked <- w })
	require.NoError(t, s.Start())
	addr := s.Addr().String()
	c := newClient(t, SerializeMsgpack)

	inflight := make(chan error, 1)
	go func() {
		resp, err := c.Invoke(context.Background(), addr, NewRequest(1006, nil, nil))
		if err == nil && resp.Code != protocol.Success {
			err = fmt.Errorf("code %d", resp.Code)
		}
		inflight <- err
	}()
	pull := make(chan error, 1)
	go func() {
		_, err := c.Invoke(context.Background(), addr, NewRequest(protocol.PullMessage, nil, nil))
		pull <- err
	}()
	<-entered
	w := <-parked

	require.NoError(t, s.Shutdown(ctxTimeout(t, 10*time.Second)))
	require.NoError(t, <-inflight, "a running handler finishes and its reply goes out")
	require.ErrorIs(t, <-pull, ErrConnClosed, "a parked request fails when its connection closes")
	require.Error(t, w.Write(NewResponse(&Command{}, protocol.PullNotFound, "")), "late reply after shutdown")
	require.NoError(t, s.Shutdown(context.Background()), "idempotent")
	hooksMu.Lock()
	require.NotEmpty(t, disconnects)
	for c, n := range disconnects {
		require.Equal(t, 1, n, "OnDisconnect of connection %d", c.ID())
	}
	hooksMu.Unlock()

	_, err := c.Invoke(ctxTimeout(t, 2*time.Second), addr, NewRequest(1006, nil, nil))
	require.Error(t, err, "nothing listens any more")
}

// TestServer_ShutdownBusy: requests that arrive while handlers drain get
// SYSTEM_BUSY.
func TestServer_ShutdownBusy(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	s := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	s.Handle(1007, func(ctx context.Context, w ResponseWriter, req *Command) {
		entered <- struct{}{}
		<-release
		echo(ctx, w, req)
	})
	s.Handle(codeEcho, echo)
	require.NoError(t, s.Start())
	c := newClient(t, SerializeJSON)
	addr := s.Addr().String()
	_, err := c.Conn(context.Background(), addr)
	require.NoError(t, err)
	go func() { _, _ = c.Invoke(context.Background(), addr, NewRequest(1007, nil, nil)) }()
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctxTimeout(t, 10*time.Second)) }()
	require.Eventually(t, func() bool {
		resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
		return err == nil && resp.Code == protocol.SystemBusy
	}, 5*time.Second, time.Millisecond)
	close(release)
	require.NoError(t, <-shut)
}

func TestServer_ShutdownTimeout(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	s := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	s.Handle(1008, func(context.Context, ResponseWriter, *Command) { entered <- struct{}{}; <-release })
	require.NoError(t, s.Start())
	c := newClient(t, SerializeMsgpack)
	go func() { _, _ = c.Invoke(context.Background(), s.Addr().String(), NewRequest(1008, nil, nil)) }()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.Shutdown(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release) // let the stray handler finish before goleak looks
	require.Eventually(t, func() bool { return s.d.running.wait(ctxTimeout(t, time.Second)) == nil }, 5*time.Second, time.Millisecond)
}

func TestServer_StartErrors(t *testing.T) {
	s := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	require.Nil(t, s.Addr())
	require.NoError(t, s.Shutdown(context.Background()), "before Start")
	require.Error(t, s.Start(), "after Shutdown")

	s = startServer(t, ServerOptions{}, nil)
	require.Error(t, s.Start(), "twice")
	s2 := NewServer(s.Addr().String(), ServerOptions{Logger: quietLogger()})
	require.Error(t, s2.Start(), "address in use")
	require.NoError(t, s2.Shutdown(context.Background()))

	done := make(chan error, 1)
	s3 := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	go func() { done <- s3.Serve() }()
	require.Eventually(t, func() bool { return s3.Addr() != nil }, 5*time.Second, time.Millisecond)
	require.NoError(t, s3.Shutdown(context.Background()))
	require.NoError(t, <-done)
}

func TestClient_ClosePendingAndAfter(t *testing.T) {
	entered := make(chan struct{}, 2)
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		1009: func(context.Context, ResponseWriter, *Command) { entered <- struct{}{} }, // never answers
	})
	opts := DefaultClientOptions()
	opts.Logger = quietLogger()
	c := NewClient(opts)
	addr := s.Addr().String()
	sync := make(chan error, 1)
	go func() {
		_, err := c.Invoke(context.Background(), addr, NewRequest(1009, nil, nil))
		sync <- err
	}()
	async := make(chan error, 1)
	c.Invoke(context.Background(), addr, NewRequest(1009, nil, nil), Async(func(_ *Command, err error) { async <- err }))
	for range 2 {
		select {
		case <-entered:
		case err := <-sync:
			t.Fatalf("the call ended before its handler ran: %v", err)
		case err := <-async:
			t.Fatalf("the async call ended before its handler ran: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the handler was not reached")
		}
	}
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-sync, ErrClosed)
	require.ErrorIs(t, <-async, ErrClosed)
	require.NoError(t, c.Close(), "idempotent")

	_, err := c.Invoke(context.Background(), addr, NewRequest(1009, nil, nil))
	require.ErrorIs(t, err, ErrClosed)
	_, err = c.Invoke(context.Background(), addr, NewRequest(1009, nil, nil), Oneway())
	require.ErrorIs(t, err, ErrClosed)
	c.Invoke(context.Background(), addr, NewRequest(1009, nil, nil), Async(func(_ *Command, err error) { async <- err }))
	require.ErrorIs(t, <-async, ErrClosed)
}

func TestClient_DialErrors(t *testing.T) {
	c := newClient(t, SerializeMsgpack)
	// A port nothing listens on.
	s := startServer(t, ServerOptions{}, nil)
	addr := s.Addr().String()
	require.NoError(t, s.Shutdown(context.Background()))
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
	require.Error(t, err)
	require.Contains(t, err.Error(), addr)

	_, err = c.Invoke(ctxTimeout(t, 5*time.Second), "not-an-address", NewRequest(codeEcho, nil, nil))
	require.Error(t, err)

	// Concurrent callers share one dial and all see the same connection.
	s2 := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: echo})
	var wg sync.WaitGroup
	conns := make([]*Conn, 8)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns[i], _ = c.Conn(ctxTimeout(t, 5*time.Second), s2.Addr().String())
		}()
	}
	wg.Wait()
	for _, cn := range conns {
		require.Same(t, conns[0], cn)
	}
	oneConn(t, s2)
	require.Never(t, func() bool { return len(s2.Conns()) > 1 }, 50*time.Millisecond, 5*time.Millisecond)
}

func TestResponseRecorder(t *testing.T) {
	r := NewResponseRecorder()
	req := NewRequest(protocol.GetMaxOffset, nil, nil)
	req.Opaque = 3
	echo(context.Background(), r, req)
	resp, err := r.Wait(ctxTimeout(t, time.Second))
	require.NoError(t, err)
	require.True(t, resp.IsResponse())
	require.Equal(t, int32(3), resp.Opaque)
	require.ErrorIs(t, r.Write(resp), ErrAlreadyReplied)
	require.Nil(t, r.Conn())
}

// TestAddrPort: a peer's address as an AddrPort is what parsing its
// string gives: IPv4 peers as IPv4 (also when held IPv4-mapped), IPv6 as
// IPv6, anything else invalid.
func TestAddrPort(t *testing.T) {
	for _, a := range []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 10911}, // NB: ParseIP gives the 16-byte form
		&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1).To4(), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 9876},
	} {
		want, err := netip.ParseAddrPort(a.String())
		require.NoError(t, err)
		require.Equal(t, want, addrPort(a), a.String())
		require.True(t, addrPort(a).Addr().Is4() == want.Addr().Is4())
	}
	require.False(t, addrPort(&net.UnixAddr{Name: "/tmp/s", Net: "unix"}).IsValid())
	require.False(t, addrPort(nil).IsValid())
}
