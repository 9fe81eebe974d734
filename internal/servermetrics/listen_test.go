package servermetrics

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestListen_BarePortIsLoopback(t *testing.T) {
	ln, err := Listen(":0")
	require.NoError(t, err)
	defer ln.Close()
	require.Contains(t, ln.Addr().String(), "127.0.0.1:")
}
