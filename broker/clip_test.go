package broker

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestClip: a short value is logged as is; a long one is cut to clipLen
// bytes of valid UTF-8 and says how long it was.
func TestClip(t *testing.T) {
	require.Equal(t, "TagA || TagB", clip("TagA || TagB"))
	long := strings.Repeat("é", 1<<20) // NB: 2 bytes each: a cut may fall inside one
	c := clip("x" + long)
	require.Less(t, len(c), clipLen+32)
	require.True(t, utf8.ValidString(c))
	require.True(t, strings.HasSuffix(c, "... (2097153 bytes)"), c[len(c)-32:])
}
