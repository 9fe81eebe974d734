package remoting

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

const codeInline = 9101

// TestServer_InlineMixedWithGoroutineAnswers: answers written on the
// reader (inline handlers, flushed when the reader runs out of frames),
// answers from handler goroutines (flushed by the connection's flusher)
// and large answers (flushed at once) interleave on one connection, and
// every one of them arrives. A frame left unflushed would hang a call.
func TestServer_InlineMixedWithGoroutineAnswers(t *testing.T) {
	var inlined, declined atomic.Int64
	s := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	slow := func(ctx context.Context, w ResponseWriter, req *Command) {
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		}
		echo(ctx, w, req)
	}
	s.Handle(codeInline, slow)
	s.Handle(codeEcho, slow)
	s.HandleInline(codeInline, func(ctx context.Context, w ResponseWriter, req *Command) bool {
		// NB: a declined request starts the connection's ordered
		// executor, and requests of the code queue behind it until it
		// drains; with 32 callers on one connection and a loaded machine
		// it may never drain. So the first request is served inline.
		if inlined.Load() > 0 && rand.IntN(3) == 0 {
			declined.Add(1)
			return false // the goroutine handler answers
		}
		inlined.Add(1)
		echo(ctx, w, req)
		return true
	})
	startInlineServer(t, s)
	hammer(t, s, 32, 200, func(_, i int) (int16, int) {
		code := int16(codeInline)
		if i%5 == 0 {
			code = codeEcho
		}
		if i%17 == 0 {
			return code, 6000 // above netpoll's copy threshold: flushed at once
		}
		return code, rand.IntN(200)
	})
	require.NotZero(t, inlined.Load())
	require.NotZero(t, declined.Load())
}

// TestClient_DeadlineTimesOut: a call nobody answers fails with
// ErrTimeout (wrapping context.DeadlineExceeded) soon after its timeout,
// and a late answer is dropped.
func TestClient_DeadlineTimesOut(t *testing.T) {
	s := startHoldingServer(t)
	c := newClient(t, SerializeMsgpack)
	start := time.Now()
	_, err := c.Invoke(context.Background(), s.Addr().String(), NewRequest(codeEcho, nil, nil),
		Deadline(time.Now().Add(50*time.Millisecond)))
	require.ErrorIs(t, err, ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	conn, err := c.Conn(context.Background(), s.Addr().String())
	require.NoError(t, err)
	conn.mu.Lock()
	require.Empty(t, conn.pending, "the timed-out call is gone")
	conn.mu.Unlock()
}

// startHoldingServer starts a server whose echo handler answers only when
// the test ends: its calls time out.
func startHoldingServer(t *testing.T) *Server {
	release := make(chan struct{})
	s := startServer(t, ServerOptions{}, map[int16]Handler{
		codeEcho: func(ctx context.Context, w ResponseWriter, req *Command) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			echo(ctx, w, req)
		},
	})
	t.Cleanup(func() { close(release) })
	return s
}

const codeDeferred = 9102

// TestServer_AtBatchEnd: an InlineHandler that answers at the end of the
// reader's burst (AtBatchEnd) interleaves with answers from handler
// goroutines on the same connection; every call is answered, whichever
// goroutine writes while the hooks run.
func TestServer_AtBatchEnd(t *testing.T) {
	var deferred, hooks atomic.Int64
	s := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	s.Handle(codeEcho, func(ctx context.Context, w ResponseWriter, req *Command) {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		echo(ctx, w, req)
	})
	s.Handle(codeDeferred, echo)
	type held struct {
		w   ResponseWriter
		req *Command
	}
	var queue []held // NB: the reader's own, no lock
	s.HandleInline(codeDeferred, func(ctx context.Context, w ResponseWriter, req *Command) bool {
		if len(queue) == 0 {
			w.Conn().AtBatchEnd(func() {
				hooks.Add(1)
				for _, h := range queue {
					echo(ctx, h.w, h.req)
				}
				queue = queue[:0]
			})
		}
		queue = append(queue, held{w, req})
		deferred.Add(1)
		return true
	})
	startInlineServer(t, s)
	hammer(t, s, 32, 150, func(w, i int) (int16, int) {
		if (w+i)%3 == 0 {
			return codeEcho, 0
		}
		return codeDeferred, 0
	})
	require.NotZero(t, deferred.Load())
	require.Less(t, hooks.Load(), deferred.Load(), "some bursts held more than one request")
}

// startInlineServer starts s (handlers registered) and shuts it down at the
// end of the test.
func startInlineServer(t *testing.T, s *Server) {
	t.Helper()
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
	})
}

// hammer sends workers×calls requests from concurrent goroutines over one
// connection, each with the code and body size pick chooses (random bytes),
// and requires every one answered with its own id and body.
func hammer(t *testing.T, s *Server, workers, calls int, pick func(w, i int) (code int16, size int)) {
	t.Helper()
	c := newClient(t, SerializeMsgpack)
	ctx := ctxTimeout(t, 60*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				id := strconv.Itoa(w*calls + i)
				code, size := pick(w, i)
				body := make([]byte, size)
				for j := range body {
					body[j] = byte(rand.Uint32())
				}
				resp, err := c.Invoke(ctx, s.Addr().String(), NewRequest(code, map[string]string{"id": id}, body),
					Deadline(time.Now().Add(10*time.Second)))
				if err != nil {
					errs <- fmt.Errorf("request %s (code %d): %w", id, code, err)
					return
				}
				if resp.Code != protocol.Success || resp.ExtFields["id"] != id || !bytes.Equal(resp.Body, body) {
					errs <- fmt.Errorf("request %s got code %d id %s, %d bytes (sent %d; equal %t)", id, resp.Code,
						resp.ExtFields["id"], len(resp.Body), size, bytes.Equal(resp.Body, body))
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
}

// TestServer_BorrowedBodies: a request body an InlineHandler gets is a view
// of the reader's input buffer. It stays intact until the burst's hooks
// have run (answers echoed from AtBatchEnd), and a request the inline
// handler declines reaches its goroutine handler with a copy that outlives
// the buffer (answers echoed after a pause, while the reader has read and
// released many more frames). Bodies up to 40 KiB span netpoll's buffer
// nodes.
func TestServer_BorrowedBodies(t *testing.T) {
	var declined, deferred, direct, later atomic.Int64
	// NB: not a WaitGroup: a later answer's Add and the test's Wait are
	// ordered only through the network, which the race detector does not
	// see.
	answered := make(chan struct{}, 16*150)
	defer func() {
		for range later.Load() {
			<-answered
		}
	}()
	s := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	s.Handle(codeInline, func(ctx context.Context, w ResponseWriter, req *Command) {
		// NB: answered from another goroutine after a pause, so the
		// connection's ordered executor is soon idle and the requests
		// behind this one are served inline again.
		later.Add(1)
		go func() {
			defer func() { answered <- struct{}{} }()
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			echo(ctx, w, req)
		}()
	})
	type held struct {
		w   ResponseWriter
		req *Command
	}
	var queue []held // NB: the reader's own, no lock
	s.HandleInline(codeInline, func(ctx context.Context, w ResponseWriter, req *Command) bool {
		switch rand.IntN(3) {
		case 0:
			declined.Add(1)
			return false
		case 1:
			if len(queue) == 0 {
				w.Conn().AtBatchEnd(func() {
					for _, h := range queue {
						echo(ctx, h.w, h.req)
					}
					queue = queue[:0]
				})
			}
			queue = append(queue, held{w, req})
			deferred.Add(1)
		default:
			direct.Add(1)
			echo(ctx, w, req)
		}
		return true
	})
	startInlineServer(t, s)
	hammer(t, s, 16, 150, func(_, i int) (int16, int) {
		if i%4 == 0 {
			return codeInline, 8000 + rand.IntN(32000)
		}
		return codeInline, rand.IntN(3000)
	})
	require.NotZero(t, declined.Load())
	require.NotZero(t, deferred.Load())
	require.NotZero(t, direct.Load())
}

// TestServer_BorrowedBytesBounded: a reader that always has another whole
// frame buffered does not hold the input buffer (the borrowed bodies)
// without bound while batch-end hooks are pending: past maxHeld bytes it
// runs the hooks and releases the buffer, and every request is answered.
func TestServer_BorrowedBytesBounded(t *testing.T) {
	// NB: frames of 64 KiB bodies (12.5 MiB), and frames without a body
	// (the buffer holds their headers too): each about 3 times maxHeld.
	t.Run("bodies", func(t *testing.T) { testHeldBounded(t, 200, 64<<10) })
	t.Run("headers", func(t *testing.T) { testHeldBounded(t, 300_000, 0) })
}

func testHeldBounded(t *testing.T, frames, size int) {
	var heldMax, hooks atomic.Int64 // read by the test at the end
	queued := 0                     // NB: the reader's own, no lock
	type held struct {
		w   ResponseWriter
		req *Command
	}
	var queue []held
	first := true
	s := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	s.Handle(codeDeferred, echo)
	s.HandleInline(codeDeferred, func(ctx context.Context, w ResponseWriter, req *Command) bool {
		if first {
			// NB: the client writes every frame meanwhile: from now on
			// the reader always has whole frames buffered.
			first = false
			time.Sleep(300 * time.Millisecond)
		}
		if len(queue) == 0 {
			w.Conn().AtBatchEnd(func() {
				hooks.Add(1)
				heldMax.Store(max(heldMax.Load(), int64(queued)))
				for _, h := range queue {
					echo(ctx, h.w, h.req)
				}
				queue, queued = queue[:0], 0
			})
		}
		queue = append(queue, held{w, req})
		queued += len(req.Body) + 40 // NB: about a header's bytes
		return true
	})
	startInlineServer(t, s)
	conn := dialRaw(t, s)
	var all []byte
	for i := range frames {
		body := bytes.Repeat([]byte{byte(i)}, size)
		b, err := AppendFrame(all, &Command{Header: Header{Code: codeDeferred, Opaque: int32(i)}, SerializeType: SerializeMsgpack, Body: body})
		require.NoError(t, err)
		all = b
	}
	go func() { _, _ = conn.Write(all) }()
	for i := range frames {
		resp := readRaw(t, conn)
		require.Equal(t, int32(i), resp.Opaque)
		require.True(t, bytes.Equal(bytes.Repeat([]byte{byte(i)}, size), resp.Body), "frame %d", i)
	}
	// NB: the answers were all read, so the reader has run every hook.
	require.Greater(t, hooks.Load(), int64(2))
	require.LessOrEqual(t, heldMax.Load(), int64(2*maxHeld+size))
}
