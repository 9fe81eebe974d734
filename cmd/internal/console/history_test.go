package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHistory: rates are per second since the previous point (never
// negative, as after a reset offset), points older than the window are
// dropped, and series not sampled since a time are forgotten.
func TestHistory(t *testing.T) {
	h := newHistory(10 * time.Second)
	h.add("a", Point{T: 1_000, Produced: 100, Consumed: 50})
	h.add("a", Point{T: 3_000, Produced: 300, Consumed: 40})
	pts := h.points("a")
	require.Len(t, pts, 2)
	require.Zero(t, pts[0].ProduceRate)
	require.Equal(t, 100.0, pts[1].ProduceRate)
	require.Zero(t, pts[1].ConsumeRate, "a consumed total going back is no negative rate")

	h.add("a", Point{T: 12_500, Produced: 300, Consumed: 300})
	pts = h.points("a")
	require.Equal(t, []int64{3_000, 12_500}, []int64{pts[0].T, pts[1].T}, "1 000 is older than 10 s")
	last, ok := h.last("a")
	require.True(t, ok)
	require.InDelta(t, 260.0/9.5, last.ConsumeRate, 1e-9)

	h.add("b", Point{T: 5_000})
	h.forget(6_000)
	require.Nil(t, h.points("b"))
	require.Len(t, h.points("a"), 2)
	_, ok = h.last("b")
	require.False(t, ok)
}
