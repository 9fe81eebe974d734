package message

import (
	"math"
	"math/rand/v2"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
)

// refHashCode is spec §7.3 verbatim: h = 31*h + c over the UTF-16 units.
func refHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

func TestTagsHashCode(t *testing.T) {
	tests := []struct {
		tag  string
		want int64
	}{
		{"", 0},
		{"TagA", 2598919}, // also in the Go client's heartbeat codeSet (capture 07)
		{"TagB", 2598920},
		{"TagBig", -1797401818}, // capture 07: negative, sign-extended
		{"Hello World", -862545276},
		{"hello world", 1794106052},
		{"标签", 857175},   // U+6807 U+7B7E: 0x6807*31 + 0x7B7E
		{"😀", 1772899},   // surrogates D83D DE00: 0xD83D*31 + 0xDE00
		{"\xff", 0xFFFD}, // invalid UTF-8 hashes as U+FFFD
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, TagsHashCode(tc.tag), "%q", tc.tag)
		require.Equal(t, int64(refHashCode(tc.tag)), TagsHashCode(tc.tag), "%q", tc.tag)
	}

	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("aZ09-_ é标签😀\U0010FFFF\u07FF\u0800\uFFFF")
	for range 1000 {
		rs := make([]rune, r.IntN(40))
		for i := range rs {
			rs[i] = alphabet[r.IntN(len(alphabet))]
		}
		s := string(rs)
		require.Equal(t, int64(refHashCode(s)), TagsHashCode(s), "%q", s)
	}
}

func TestKeyHash(t *testing.T) {
	require.Equal(t, int32(math.MinInt32), refHashCode("polygenelubricants"))
	require.Equal(t, int32(0), KeyHash("polygenelubricants"), "MinInt32 maps to 0")
	require.Equal(t, int32(862545276), KeyHash("Hello World"))
	require.Equal(t, int32(1794106052), KeyHash("hello world"))
	require.Equal(t, int32(0), KeyHash(""))

	require.Equal(t, int32(454970722), KeyHash("SluiceTopic#order-1001"))
	require.Equal(t, KeyHash("SluiceTopic#order-1001"), IndexKeyHash([]byte("SluiceTopic"), []byte("order-1001")))
	require.Equal(t, KeyHash("标签#键😀"), IndexKeyHash([]byte("标签"), []byte("键😀")))
	require.Equal(t, KeyHash("#"), IndexKeyHash(nil, nil))
}
