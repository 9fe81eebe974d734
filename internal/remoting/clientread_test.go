package remoting

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawServer accepts one connection on 127.0.0.1 and runs serve on it;
// the listener and the connection are closed at the end of the test.
func rawServer(t *testing.T, serve func(conn net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 1)
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		if conn := <-accepted; conn != nil {
			conn.Close()
		}
		<-done
	})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- conn
		serve(conn)
	}()
	return ln.Addr().String()
}

// TestClient_ReadTimeoutBoundsAFrame: ClientOptions.ReadTimeout bounds the
// rest of a frame once its first bytes arrived, not the wait for a frame:
// an answer that comes after three read timeouts is taken, and one that
// stops in its middle closes the connection, failing the call long before
// its own timeout.
func TestClient_ReadTimeoutBoundsAFrame(t *testing.T) {
	opts := DefaultClientOptions()
	opts.ReadTimeout = 200 * time.Millisecond
	opts.Logger = quietLogger()
	c := NewClient(opts)
	t.Cleanup(func() { c.Close() })

	late := rawServer(t, func(conn net.Conn) {
		req, err := readRawErr(conn)
		if err != nil {
			return
		}
		time.Sleep(3 * opts.ReadTimeout) // NB: the delay is what is tested
		b, _ := EncodeFrame(NewResponse(req, 0, "late"))
		_, _ = conn.Write(b)
		_, _ = readRawErr(conn) // until the client closes
	})
	resp, err := c.Invoke(ctxTimeout(t, 10*time.Second), late, NewRequest(15, nil, nil))
	require.NoError(t, err)
	require.Equal(t, "late", resp.Remark)

	stalled := rawServer(t, func(conn net.Conn) {
		req, err := readRawErr(conn)
		if err != nil {
			return
		}
		b, _ := EncodeFrame(NewResponse(req, 0, "never whole"))
		_, _ = conn.Write(b[:len(b)/2])
		_, _ = readRawErr(conn) // until the client closes
	})
	start := time.Now()
	_, err = c.Invoke(ctxTimeout(t, 30*time.Second), stalled, NewRequest(15, nil, nil), Deadline(time.Now().Add(30*time.Second)))
	require.ErrorIs(t, err, ErrConnClosed)
	require.Less(t, time.Since(start), 10*time.Second, "the stalled frame, not the call's 30 s, ended it")
}

// TestClient_FramesInPieces: answers that arrive a few bytes at a time,
// and a large one that outgrows the read buffer, are read whole; several
// answers in one segment are each delivered.
func TestClient_FramesInPieces(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 40_000) // 640 KB
	addr := rawServer(t, func(conn net.Conn) {
		for i := 0; ; i++ {
			req, err := readRawErr(conn)
			if err != nil {
				return
			}
			resp := NewResponse(req, 0, "")
			resp.Body = req.Body
			if i == 1 {
				resp.Body = big
			}
			b, _ := EncodeFrame(resp)
			for len(b) > 0 {
				n := min(len(b), 1+i*7)
				if i == 1 {
					n = min(len(b), 100_000)
				}
				if _, err := conn.Write(b[:n]); err != nil {
					return
				}
				b = b[n:]
				time.Sleep(time.Millisecond) // NB: each piece a segment of its own
			}
		}
	})
	c := newClient(t, SerializeMsgpack)
	for i := range 3 {
		body := []byte{byte(i), 1, 2, 3}
		resp, err := c.Invoke(ctxTimeout(t, 30*time.Second), addr, NewRequest(15, nil, body))
		require.NoError(t, err)
		if i == 1 {
			require.Equal(t, big, resp.Body)
		} else {
			require.Equal(t, body, resp.Body)
		}
	}
}
