package remoting

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClient_DialRefused: a call to an address nothing listens on fails
// as Go's dialer says it, "connection refused" with the address, not with
// netpoll's "connection has been closed by peer".
func TestClient_DialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c := newClient(t, SerializeMsgpack)
	_, err = c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(codeEcho, nil, nil))
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Contains(t, err.Error(), "dial tcp "+addr+": connect: connection refused")
	require.NotContains(t, err.Error(), "closed by peer")
}
