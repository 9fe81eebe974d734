package main

import (
	"math"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRuntimeHist: a run's histogram is the later read minus the earlier,
// and a quantile is the upper bound of the bucket holding it.
func TestRuntimeHist(t *testing.T) {
	buckets := []float64{0, 0.001, 0.002, 0.004, math.Inf(1)}
	read := func(counts ...uint64) metrics.Sample {
		s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
		metrics.Read(s) // NB: a histogram Value can only come from Read
		h := s[0].Value.Float64Histogram()
		h.Buckets, h.Counts = buckets, counts
		return s[0]
	}
	h := histDelta(read(5, 1, 0, 0), read(5+90, 1+9, 0+1, 0))
	require.Equal(t, uint64(100), h.count())
	require.Equal(t, 0.001, h.quantile(0.5))
	require.Equal(t, 0.002, h.quantile(0.99))
	require.Equal(t, 0.004, h.quantile(1))

	h = histDelta(read(0, 0, 0, 0), read(0, 0, 0, 3))
	require.Equal(t, 0.004, h.quantile(1), "the last bucket is unbounded: its lower bound")
	require.Zero(t, histDelta(read(0, 0, 0, 0), read(0, 0, 0, 0)).quantile(0.99))
}
