package main

import (
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
	e.record(2 * time.Hour) // beyond the range: clamped into the last bucket, max kept
	require.Equal(t, 2*time.Hour, e.max)
}
