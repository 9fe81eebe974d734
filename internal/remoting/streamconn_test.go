package remoting

import (
	"bytes"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStreamReader_HeldBytesStay: bytes handed out and not released are
// never moved nor overwritten when the buffer makes room, and released
// ones make room in place.
func TestStreamReader_HeldBytesStay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	out, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer out.Close()
	in, err := ln.Accept()
	require.NoError(t, err)
	s := newStreamConn(in.(*net.TCPConn))
	defer s.Close()
	r := s.Reader()

	send := func(p []byte) {
		go func() { _, _ = out.Write(p) }()
	}
	send([]byte("held"))
	held, err := r.Next(4)
	require.NoError(t, err)
	// Far more than the buffer holds: it must make room, without
	// touching the held bytes.
	fill := bytes.Repeat([]byte{'x'}, 4*streamReadMin)
	send(fill)
	got, err := r.Next(len(fill))
	require.NoError(t, err)
	require.Equal(t, fill, got)
	require.Equal(t, "held", string(held))

	require.NoError(t, r.Release())
	require.Zero(t, r.Len())
	send([]byte("next"))
	p, err := r.Peek(4)
	require.NoError(t, err)
	require.Equal(t, "next", string(p))
	require.NoError(t, r.Skip(4))

	// A peer that closes ends a wait with an error, not a hang.
	require.NoError(t, out.Close())
	_, err = r.Next(1)
	require.Error(t, err)
}
