package message

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTagCodeSet: short and long sets (list and map) answer alike; nil
// takes every code.
func TestTagCodeSet(t *testing.T) {
	var none *TagCodeSet
	require.True(t, none.Has(42))
	require.Nil(t, none.Codes())
	require.Nil(t, NewTagCodeSet(nil))
	for _, n := range []int{1, tagSetMapFrom - 1, tagSetMapFrom, 1000} {
		codes := make([]int64, n)
		for i := range codes {
			codes[i] = int64(i*7 - 3)
		}
		s := NewTagCodeSet(codes)
		require.Equal(t, n >= tagSetMapFrom, s.set != nil, "n %d", n)
		require.Equal(t, codes, s.Codes())
		for _, c := range codes {
			require.True(t, s.Has(c), "n %d code %d", n, c)
		}
		require.False(t, s.Has(-1), "n %d", n)
		require.False(t, s.Has(int64(n*7)), "n %d", n)
	}
}

// BenchmarkTagCodeSet: a lookup in a subscription of 10,000 tags, as each
// consume-queue entry a pull scans makes one, against the list search it
// replaced.
func BenchmarkTagCodeSet(b *testing.B) {
	codes := make([]int64, 10000)
	for i := range codes {
		codes[i] = TagsHashCode("tag-" + string(rune('a'+i%26)) + string(rune(i)))
	}
	s := NewTagCodeSet(codes)
	b.Run("set", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_ = s.Has(int64(i))
		}
	})
	b.Run("list", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_ = slices.Contains(codes, int64(i))
		}
	})
}
