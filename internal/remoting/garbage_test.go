package remoting

import (
	"context"
	"encoding/binary"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// TestGarbageFrames: each kind of garbage closes its own connection (the
// peer reads EOF) and is counted under its reason, the first of each reason
// logged with the remote address, while a healthy connection to the same
// server keeps working.
func TestGarbageFrames(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	random[0] = 0x7F // a length far above the limit
	goodHeader := goldenHeaderBytes(t, "02-send-message.bin")

	cases := []struct {
		name      string
		data      []byte
		closeSend bool   // the peer closes its write side after sending
		reason    string // counted under; "" for none
		logged    string // the error's text
	}{
		{"random bytes", random, false, ReasonTooLarge, "frame too large"},
		{"length zero", rawFrame(0, 0, 0, nil), false, ReasonMalformed, "malformed frame"},
		{"negative length", rawFrame(-5, 0, 0, nil), false, ReasonMalformed, "malformed frame"},
		{"unknown serialize type", rawFrame(20, 3, 8, make([]byte, 16)), false, ReasonSerializeType, "unknown serialize type"},
		{"header length past frame", rawFrame(20, 0, 17, make([]byte, 16)), false, ReasonMalformed, "malformed frame"},
		{"length 16 MiB + 1", rawFrame(16<<20+1, 0, 100, nil), false, ReasonTooLarge, "frame too large"},
		{"undecodable JSON header", rawFrame(int32(4+len("{not json}")), 0, len("{not json}"), []byte("{not json}")), false, ReasonBadHeader, "malformed header"},
		{"undecodable msgpack header", rawFrame(6, 2, 2, []byte{0x81, 0xc1}), false, ReasonBadHeader, "malformed header"},
		{"cut mid-header then closed", rawFrame(int32(4+len(goodHeader)), 0, len(goodHeader), goodHeader[:40]), true, "", ""},
		{"cut in the length then closed", []byte{0, 0}, true, "", ""},
	}

	var logs logBuffer
	disconnected := make(chan *Conn, 100)
	s := startServer(t, ServerOptions{Logger: newLogger(&logs), OnDisconnect: func(c *Conn) { disconnected <- c }},
		map[int16]Handler{codeEcho: echo})
	addr := s.Addr().String()
	healthy := newClient(t, SerializeMsgpack)
	_, err := healthy.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	healthyConn, err := healthy.Conn(context.Background(), addr)
	require.NoError(t, err)

	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Stats().BadFrames
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			require.NoError(t, err)
			defer conn.Close()
			_, err = conn.Write(tc.data)
			require.NoError(t, err)
			if tc.closeSend {
				require.NoError(t, conn.(*net.TCPConn).CloseWrite())
			}
			// The server closes: the read ends with EOF and no reply.
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
			rest, err := io.ReadAll(conn)
			require.NoError(t, err, "EOF, not a timeout")
			require.Empty(t, rest)

			select {
			case c := <-disconnected:
				require.Equal(t, conn.LocalAddr().String(), c.RemoteAddr().String())
			case <-time.After(5 * time.Second):
				t.Fatal("server kept the connection")
			}
			want := before
			if tc.reason != "" {
				want = maps.Clone(before)
				want[tc.reason]++
			}
			// NB: counted before the close that the peer saw.
			require.Equal(t, want, s.Stats().BadFrames)
			line := "reason=" + tc.reason + " "
			if tc.reason != "" && !seen[tc.reason] {
				seen[tc.reason] = true
				out := logs.String()
				require.Contains(t, out, conn.LocalAddr().String(), "logged with the remote address")
				require.Contains(t, out, tc.logged)
				require.Equal(t, 1, strings.Count(out, line))
			} else if tc.reason != "" {
				require.Equal(t, 1, strings.Count(logs.String(), line), "one line per address and reason")
			}

			// The healthy connection is untouched.
			resp, err := healthy.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, map[string]string{"k": tc.name}, nil))
			require.NoError(t, err)
			require.Equal(t, tc.name, resp.ExtFields["k"])
			now, err := healthy.Conn(context.Background(), addr)
			require.NoError(t, err)
			require.Same(t, healthyConn, now)
		})
	}
}

// TestGarbage_StalledFrame: a peer that sends part of a frame and stops is
// dropped after FrameTimeout.
func TestGarbage_StalledFrame(t *testing.T) {
	s := startServer(t, ServerOptions{FrameTimeout: 100 * time.Millisecond}, map[int16]Handler{codeEcho: echo})
	conn := dialRaw(t, s)
	_, err := conn.Write(binary.BigEndian.AppendUint32(nil, 1000))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadAll(conn)
	require.NoError(t, err, "closed by the server")
}

// TestGarbage_UnknownResponse: a response frame nobody waits for is
// dropped without closing the connection.
func TestGarbage_UnknownResponse(t *testing.T) {
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: echo})
	conn := dialRaw(t, s)
	stray := NewResponse(&Command{Header: Header{Opaque: 999}}, protocol.Success, "")
	writeRaw(t, conn, stray)
	req := NewRequest(codeEcho, nil, nil)
	req.Opaque = 1
	writeRaw(t, conn, req)
	require.Equal(t, int32(1), readRaw(t, conn).Opaque)
}
