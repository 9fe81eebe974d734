package remoting

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dialRaw opens a plain TCP connection to s, closed at the end of the test.
func dialRaw(t testing.TB, s *Server) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func writeRaw(t testing.TB, conn net.Conn, c *Command) {
	t.Helper()
	b, err := EncodeFrame(c)
	require.NoError(t, err)
	_, err = conn.Write(b)
	require.NoError(t, err)
}

// readRaw reads one frame from a plain connection.
func readRaw(t testing.TB, conn net.Conn) *Command {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	var p [4]byte
	_, err := io.ReadFull(conn, p[:])
	require.NoError(t, err)
	n := binary.BigEndian.Uint32(p[:])
	b := make([]byte, 4+n)
	copy(b, p[:])
	_, err = io.ReadFull(conn, b[4:])
	require.NoError(t, err)
	c, _, err := DecodeFrame(b, 0)
	require.NoError(t, err)
	return c
}
