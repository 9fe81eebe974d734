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
	c, err := readRawErr(conn)
	require.NoError(t, err)
	return c
}

// readRawErr is readRaw for a goroutine other than the test's.
func readRawErr(conn net.Conn) (*Command, error) {
	// NB: a bound for a hung server, not a speed requirement: 5 s ran out
	// between two answers of a 300,000-frame test under -race on a loaded
	// machine.
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	var p [4]byte
	if _, err := io.ReadFull(conn, p[:]); err != nil {
		return nil, err
	}
	b := make([]byte, 4+binary.BigEndian.Uint32(p[:]))
	copy(b, p[:])
	if _, err := io.ReadFull(conn, b[4:]); err != nil {
		return nil, err
	}
	c, _, err := DecodeFrame(b, 0)
	return c, err
}
