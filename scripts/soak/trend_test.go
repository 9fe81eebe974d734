package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFitSlope(t *testing.T) {
	require.InDelta(t, 2.0, fitSlope([]float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}), 1e-9)
	require.InDelta(t, 0.0, fitSlope([]float64{0, 1, 2, 3}, []float64{5, 4, 6, 5}), 0.5)
	require.Equal(t, 0.0, fitSlope([]float64{1}, []float64{1}))
	require.Equal(t, 0.0, fitSlope([]float64{1, 1}, []float64{1, 2}))
}

// TestTrends: a series that climbs through the second half fails its limit;
// one that climbed during warm-up and then stays flat, or wobbles within
// its noise floor, does not.
func TestTrends(t *testing.T) {
	var samples []Sample
	for i := range 20 {
		s := Sample{At: time.Duration(i) * time.Minute}
		s.Goroutines = 100 + float64(min(i, 5))*50 // warm-up, then flat
		s.FDs = 40 + float64(i%2)*3                // noise
		s.RSS = float64(50<<20 + i*(4<<20))        // 4 MiB a minute: a leak
		s.Heap = 20 << 20
		samples = append(samples, s)
	}
	got := map[string]Trend{}
	for _, tr := range trends(samples, DefaultLimits()) {
		got[tr.Flag] = tr
	}
	require.True(t, got["rss"].Grows, got["rss"].String())
	require.InDelta(t, 240, got["rss"].PerHour, 1)
	require.False(t, got["goroutines"].Grows, got["goroutines"].String())
	require.False(t, got["fds"].Grows, got["fds"].String())
	require.False(t, got["heap"].Grows, got["heap"].String())
}

func TestMinuteTicks(t *testing.T) {
	var got []string
	for _, tk := range (minuteTicks{}).Ticks(0, 3.02) {
		got = append(got, tk.Label)
	}
	require.Equal(t, []string{"0", "0.5", "1", "1.5", "2", "2.5", "3"}, got)
	require.Len(t, (minuteTicks{}).Ticks(0, 120), 9, "every 15 minutes over 2 hours")
}
