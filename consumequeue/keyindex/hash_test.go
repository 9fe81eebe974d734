package keyindex

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeyHash(t *testing.T) {
	// Java String.hashCode values; keyHash is their absolute value.
	for _, tc := range []struct {
		s    string
		java int32
	}{
		{"", 0},
		{"a", 97},
		{"hello", 99162322},
		{"Hello World", -862545276},
		{"polygenelubricants", -2147483648}, // MinInt32 → 0
		{"\U0001F600", 1772899},             // surrogate pair
		{"é", 233},
		{"TopicTest#KEY0", -1656969517},
		{"主题#键", 634204136},
		{"Aa", 2112},
		{"BB", 2112},
	} {
		t.Run(tc.s, func(t *testing.T) {
			want := tc.java
			if want == -2147483648 {
				want = 0
			} else if want < 0 {
				want = -want
			}
			require.Equal(t, want, keyHash(tc.s))
		})
	}
	require.Equal(t, "TopicTest#KEY0", Key("TopicTest", "KEY0"))
}
