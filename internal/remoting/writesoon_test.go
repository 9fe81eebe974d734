package remoting

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestWriteSoon_PeerThatStopsReading: a WriteSoon writer (the store's
// notifier, answering every durable send) never waits for a peer that does
// not read. The requests' handlers park their writers; the test then
// answers them one by one. Once the peer's receive buffer and the server's
// send buffer are full, the flusher's flush waits for the peer, holding
// the connection's write lock, and the answers after it are queued instead
// of their writers waiting. When the peer reads at last, every answer
// arrives, in the order written. It failed when WriteSoon waited for the
// lock behind such a flush, and (the larger frame) when it flushed a frame
// netpoll references itself (either would have waited out the write
// timeout, 30 s).
func TestWriteSoon_PeerThatStopsReading(t *testing.T) {
	// NB: a frame under netpoll's 4 KiB in-place threshold, which netpoll
	// copies, and one over it, which it references until flushed.
	for _, size := range []int{3000, 64 << 10} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			body := bytes.Repeat([]byte{'a'}, size)
			n := (wmemMax(t) + 1<<20) / size
			conn, reqs := stalledPeer(t, n)
			for i, r := range reqs {
				require.NoError(t, answerSoon(t, r, body), "answer %d", i)
			}
			for i, r := range reqs {
				resp := readRaw(t, conn)
				require.Equal(t, r.req.Opaque, resp.Opaque, "answer %d", i)
				require.Equal(t, body, resp.Body)
			}
		})
	}
}

// TestWriteSoon_LoneAnswerWrittenAtOnce: the answer to a connection's only
// request in progress goes out from its WriteSoon writer, in one write that
// does not wait, instead of waking the connection's flusher; with a
// second request in progress it is left to the flusher. The counts failed (0 written at once) before
// writeNoWait.
func TestWriteSoon_LoneAnswerWrittenAtOnce(t *testing.T) {
	got := make(chan parkedRequest, 2)
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: func(_ context.Context, w ResponseWriter, req *Command) {
		got <- parkedRequest{w, req}
	}})
	conn := dialRaw(t, s)
	noWaits := func(c *Conn) uint64 { c.wmu.Lock(); defer c.wmu.Unlock(); return c.noWaits }
	body := bytes.Repeat([]byte{'a'}, 3000)

	writeRaw(t, conn, NewRequest(codeEcho, nil, nil))
	r := <-got
	require.NoError(t, answerSoon(t, r, body))
	require.Equal(t, uint64(1), noWaits(r.w.Conn()), "the lone answer was not written at once")
	require.Equal(t, body, readRaw(t, conn).Body)

	// NB: two requests in progress: the first answer has company.
	for i := range 2 {
		req := NewRequest(codeEcho, nil, nil)
		req.Opaque = int32(10 + i)
		writeRaw(t, conn, req)
	}
	r1, r2 := <-got, <-got
	require.NoError(t, answerSoon(t, r1, body))
	require.Equal(t, uint64(1), noWaits(r1.w.Conn()), "an answer with company was written by its writer")
	// NB: alone now, r2's answer goes at once or, if the flusher has not
	// sent r1's yet, after it: both arrive either way.
	require.NoError(t, answerSoon(t, r2, body))
	seen := map[int32]bool{}
	for range 2 {
		resp := readRaw(t, conn)
		require.Equal(t, body, resp.Body)
		seen[resp.Opaque] = true
	}
	require.Equal(t, map[int32]bool{10: true, 11: true}, seen)
}

// TestWriteSoon_ClosesAPeerThatNeverReads: the queue behind a stuck flush
// is bounded: past maxLater bytes the answer fails and the connection
// closes.
func TestWriteSoon_ClosesAPeerThatNeverReads(t *testing.T) {
	body := bytes.Repeat([]byte{'a'}, 3000)
	n := (wmemMax(t) + maxLater + 1<<20) / len(body)
	_, reqs := stalledPeer(t, n)
	for _, r := range reqs {
		if err := answerSoon(t, r, body); err != nil {
			require.ErrorIs(t, err, ErrConnClosed)
			require.Contains(t, err.Error(), "reads none of its answers")
			return
		}
	}
	t.Fatalf("%d answers (%d MiB) to a peer that reads none were all taken", n, n*len(body)>>20)
}

// parkedRequest is a request whose handler parked its writer.
type parkedRequest struct {
	w   ResponseWriter
	req *Command
}

// stalledPeer starts a server whose handler parks its writers, connects a
// peer with a small receive buffer (set before connecting: its side fills
// at once, and the rest is the server's send buffer, which grows up to
// tcp_wmem's maximum), sends n requests and returns them once all are
// parked, in the order they were. The peer never reads: the test reads
// conn when it wants the answers.
func stalledPeer(t *testing.T, n int) (net.Conn, []parkedRequest) {
	got := make(chan parkedRequest, n)
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: func(_ context.Context, w ResponseWriter, req *Command) {
		Parked(w)
		got <- parkedRequest{w, req}
	}})
	conn := testutil.DialReceiveBuffer(t, s.Addr().String(), 4096)
	for i := range n {
		req := NewRequest(codeEcho, nil, nil)
		req.Opaque = int32(i)
		req.SerializeType = SerializeMsgpack
		writeRaw(t, conn, req)
	}
	reqs := make([]parkedRequest, n)
	for i := range reqs {
		reqs[i] = <-got
	}
	return conn, reqs
}

// answerSoon answers r with body through WriteSoon and returns its error;
// it fails the test if WriteSoon does not return.
func answerSoon(t *testing.T, r parkedRequest, body []byte) error {
	t.Helper()
	resp := NewResponse(r.req, protocol.Success, "")
	resp.Body = body
	done := make(chan error, 1)
	go func() { done <- r.w.WriteSoon(resp) }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second): // NB: a bound for a hang, under the write timeout (30 s)
		t.Fatalf("WriteSoon of the answer to %d has not returned in 20 s: it waits for a peer that does not read", r.req.Opaque)
		return nil
	}
}

// wmemMax is the most a TCP socket's send buffer grows to here
// (net.ipv4.tcp_wmem's third value).
func wmemMax(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	require.Len(t, f, 3)
	v, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	return v
}

// TestServer_ClosesAPeerWhoseInputBacksUp: netpoll reads a socket into
// memory whatever the connection's reader does; while the reader is held up
// (here an inline handler that waits) a peer that goes on sending is
// closed once more than MaxInputBacklog bytes wait, instead of growing the
// server's memory until the reader comes back.
func TestServer_ClosesAPeerWhoseInputBacksUp(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	s := NewServer("127.0.0.1:0", ServerOptions{MaxFrameSize: 64 << 10, Logger: quietLogger()})
	s.Handle(codeEcho, func(context.Context, ResponseWriter, *Command) {}) // NB: no answers: the peer reads only the close
	s.HandleInline(codeEcho, func(context.Context, ResponseWriter, *Command) bool { <-release; return false })
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
	})
	t.Cleanup(free) // NB: runs first: the reader must come back for Shutdown
	require.Equal(t, 256<<10, s.opts.MaxInputBacklog, "four frames by default")
	conn := dialRaw(t, s)
	stopped := make(chan error, 1)
	go func() {
		req := NewRequest(codeEcho, nil, bytes.Repeat([]byte{'x'}, 60<<10))
		// NB: at most 256 times the bound, so that a server that never
		// closes the connection fails the test instead of the machine.
		for sent := 0; sent < 256*(256<<10); {
			b, err := EncodeFrame(req)
			if err == nil {
				_, err = conn.Write(b)
			}
			if err != nil {
				stopped <- err
				return
			}
			sent += len(b)
		}
		stopped <- nil
	}()
	require.Eventually(t, func() bool { return s.Stats().BacklogClosed == 1 }, 20*time.Second, 10*time.Millisecond)
	free() // NB: the reader comes back, and the connection's close completes
	<-stopped
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second))) // NB: a bound for a hang
	_, err := conn.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the connection is still open 20 s after it was closed for its backlog")
	require.Equal(t, uint64(1), s.Stats().BacklogClosed)
}
