package main

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 10000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	require.Equal(t, int64(10000), h.count())
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {0.999, 9990 * time.Microsecond}} {
		got := h.quantile(tc.q)
		require.InEpsilon(t, float64(tc.want), float64(got), 0.02, "q%.3f", tc.q)
	}
	require.Equal(t, 10*time.Millisecond, h.max)
	var e histogram
	require.Zero(t, e.quantile(0.5))
}

// TestHistogram_Range: values below 64 µs are exact; above, a value's
// bucket is at most 1/32 below it; 2^45 µs - 1 (407 days) is the last value
// in range, and longer values are clamped into the last bucket.
func TestHistogram_Range(t *testing.T) {
	const last = int64(1)<<45 - 1
	require.Equal(t, 407, int(time.Duration(last)*time.Microsecond/(24*time.Hour)))
	for us := int64(0); us <= last; us = min(us+1+us/7, last) {
		e, s := bucketOf(us)
		require.Less(t, e, len(histogram{}.counts), "%d µs", us)
		v := int64(s) << uint(e)
		require.LessOrEqual(t, v, us, "%d µs", us)
		require.LessOrEqual(t, 32*(us-v), v, "%d µs: bucket %d is more than 1/32 below", us, v)
		if us == last {
			require.Equal(t, [2]int{39, 63}, [2]int{e, s})
			break
		}
	}
	e, _ := bucketOf(last + 1)
	require.Equal(t, len(histogram{}.counts), e, "2^45 µs is past the range")

	var h histogram
	h.record(time.Duration(last+1) * time.Microsecond)
	h.record(time.Duration(math.MaxInt64)) // about 292 years
	require.Equal(t, int64(2), h.counts[39][63], "clamped into the last bucket")
	require.Equal(t, time.Duration(63)<<39*time.Microsecond, h.quantile(1))
	require.Equal(t, time.Duration(math.MaxInt64), h.max, "max keeps the value")
}
