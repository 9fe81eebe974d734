package remoting

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIntern(t *testing.T) {
	for _, s := range []string{"", "a", "\x00", "\xff", "true", "queueId", "42", "not-a-known-key", "100"} {
		require.Equal(t, s, intern([]byte(s)))
	}
	b := []byte("queueId")
	s := intern(b)
	b[0] = 'X'
	require.Equal(t, "queueId", s, "an interned string does not alias its input")
	b = []byte("unknown-key")
	s = intern(b)
	b[0] = 'X'
	require.Equal(t, "unknown-key", s, "nor does a copied one")
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = intern([]byte("queueOffset")) }))
}
