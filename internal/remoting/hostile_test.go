package remoting

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dialFrom opens a plain connection to s from the loopback address local
// (any 127.0.0.0/8 address is this host's).
func dialFrom(t testing.TB, s *Server, local string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	conn, err := d.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// requireClosedByServer reads conn to its end: the server closed it
// without answering (EOF or a reset, not the read deadline).
func requireClosedByServer(t testing.TB, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	rest, err := io.ReadAll(conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open")
	require.Empty(t, rest, "no answer")
}

// echoRaw checks that conn is served: an echo request gets its answer.
func echoRaw(t testing.TB, conn net.Conn) {
	t.Helper()
	req := NewRequest(codeEcho, nil, nil)
	req.Opaque = 7
	writeRaw(t, conn, req)
	require.Equal(t, int32(7), readRaw(t, conn).Opaque)
}

// TestServer_FrameTimeoutBoundsWholeFrame: a peer trickling a request in a
// byte every 10 ms (1.34 s for the frame, each of its parts, the length,
// the header word, the header and the body, in under 0.7 s) is closed once
// the frame has taken FrameTimeout (1 s), unanswered, and counted. A
// timeout per wait, as netpoll's read timeout is, never fires here.
func TestServer_FrameTimeoutBoundsWholeFrame(t *testing.T) {
	var logs logBuffer
	s := startServer(t, ServerOptions{FrameTimeout: time.Second, Logger: newLogger(&logs)},
		map[int16]Handler{codeEcho: echo})
	req := NewRequest(codeEcho, nil, bytes.Repeat([]byte{'b'}, 63))
	req.Opaque = 1
	frame, err := EncodeFrame(req)
	require.NoError(t, err)
	require.Len(t, frame, 8+63+63, "JSON header of 63 bytes")

	conn := dialRaw(t, s)
	for i := range frame {
		if _, err := conn.Write(frame[i : i+1]); err != nil {
			break // NB: closed by the server
		}
		time.Sleep(10 * time.Millisecond) // NB: the peer's pace, not a wait for a condition
	}
	requireClosedByServer(t, conn)
	require.Equal(t, uint64(1), s.Stats().FrameTimeouts)
	require.Contains(t, logs.String(), "frame not completed within the frame timeout")
}

// TestServer_MaxConnsPerAddr: connections from one IP address over the
// limit are closed at accept, counted and logged once; another address is
// not affected, and a freed slot can be taken again.
func TestServer_MaxConnsPerAddr(t *testing.T) {
	var logs logBuffer
	s := startServer(t, ServerOptions{MaxConnsPerAddr: 3, Logger: newLogger(&logs)},
		map[int16]Handler{codeEcho: echo})
	open := make([]net.Conn, 3)
	for i := range open {
		open[i] = dialFrom(t, s, "127.0.0.1")
		echoRaw(t, open[i])
	}
	for range 2 {
		requireClosedByServer(t, dialFrom(t, s, "127.0.0.1"))
	}
	require.Equal(t, uint64(2), s.Stats().Rejected)
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "too many connections from one address"), out)
	require.Contains(t, out, "limit=3")

	echoRaw(t, dialFrom(t, s, "127.0.0.2"))
	require.NoError(t, open[0].Close())
	require.Eventually(t, func() bool { return s.Stats().Conns == 3 }, 5*time.Second, time.Millisecond)
	echoRaw(t, dialFrom(t, s, "127.0.0.1"))
	require.Equal(t, uint64(2), s.Stats().Rejected)
}

// TestServer_BadFrameLogRateLimited: 50 garbage connections from one
// address log one line, and the end of the window one more with the count
// of the 49 others; another address gets its own line; a new window logs
// again.
func TestServer_BadFrameLogRateLimited(t *testing.T) {
	var logs logBuffer
	s := startServer(t, ServerOptions{Logger: newLogger(&logs)}, nil)
	garbage := func(local string) {
		conn := dialFrom(t, s, local)
		_, err := conn.Write(rawFrame(0, 0, 0, nil))
		require.NoError(t, err)
		requireClosedByServer(t, conn)
	}
	for range 50 {
		garbage("127.0.0.1")
	}
	garbage("127.0.0.2")
	require.Equal(t, uint64(51), s.Stats().BadFrames[ReasonMalformed])
	require.Equal(t, 2, strings.Count(logs.String(), "remoting: bad frame;"))

	s.peers.flush(time.Now().Add(peerLogEvery))
	var held []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "not logged one by one") {
			held = append(held, l)
		}
	}
	require.Len(t, held, 1, "127.0.0.2 had no line held back")
	require.Contains(t, held[0], "remote=127.0.0.1 reason=malformed count=49")

	garbage("127.0.0.1")
	require.Equal(t, 3, strings.Count(logs.String(), "remoting: bad frame;"))
}

// TestPeerLog_Bounded: past peerLogKeys tracked addresses, the others
// share one entry per reason, reported as "other addresses".
func TestPeerLog_Bounded(t *testing.T) {
	var logs logBuffer
	p := newPeerLog(newLogger(&logs), time.Minute)
	now := time.Now()
	for i := range peerLogKeys + 3 {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		p.event(now, -4, ip, ReasonMalformed, "bad")
	}
	require.Equal(t, peerLogKeys+1, strings.Count(logs.String(), "msg=bad"))
	require.Len(t, p.keys, peerLogKeys+1)
	p.flush(now.Add(time.Minute))
	require.Contains(t, logs.String(), `remote="other addresses" reason=malformed count=2`)
	require.Empty(t, p.keys)
}
