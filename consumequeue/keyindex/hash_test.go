package keyindex

import (
	"math"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

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

// javaHash is Java's String.hashCode over UTF-16 code units, the plain way.
func javaHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	switch {
	case h == math.MinInt32:
		return 0
	case h < 0:
		return -h
	}
	return h
}

// FuzzKeyHash: keyHash (four ASCII bytes a step) equals Java's hashCode
// taken one code unit at a time, and KeyHash of a topic and a key equals
// keyHash of Key(topic, key), for any valid UTF-8.
func FuzzKeyHash(f *testing.F) {
	for _, s := range []string{"", "abc", "C0A8010A00002A9F0000000000000000", "主题", "ab\U0001F600cdefgh", "abcd\u00e9fgh"} {
		f.Add("TopicTest", s)
	}
	f.Fuzz(func(t *testing.T, topic, key string) {
		full := Key(topic, key)
		// NB: records' bytes need not be UTF-8: the dispatcher's hash and
		// a query's agree on any bytes.
		require.Equal(t, keyHash(full), KeyHash([]byte(topic), []byte(key)), "%q", full)
		if utf8.ValidString(full) {
			require.Equal(t, javaHash(full), keyHash(full), "%q", full)
		}
	})
}

func BenchmarkKeyHash(b *testing.B) {
	k := Key("orders", "C0A8010A00002A9F0000000000000000")
	for b.Loop() {
		keyHash(k)
	}
}
