package pop

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExtend_KeepsTheHandle: an extended offset stays in flight past the
// invisible time it was popped with and the handle the client got stays
// current (ack it, change it); a handle not current is not extended; a
// handle never extended is invalid once its invisible time is over (the
// SimpleConsumer's strict check).
func TestExtend_KeepsTheHandle(t *testing.T) {
	tab := New()
	now := time.Unix(1_800_000_000, 0)
	ds := tab.Pop("b", "g", "T", 0, 0, 3, 3, 60*time.Second, now)
	require.Len(t, ds, 3)
	h0, h1, h2 := ds[0].Handle, ds[1].Handle, ds[2].Handle

	now = now.Add(40 * time.Second)
	require.NoError(t, tab.Extend("g", h0, 60*time.Second, now))
	require.NoError(t, tab.Extend("g", h1, 60*time.Second, now))
	a, err := tab.Attempt("g", h0, now)
	require.NoError(t, err)
	require.Equal(t, int32(1), a)

	now = now.Add(30 * time.Second) // 70 s after the pop: h2's time is over
	_, err = tab.Attempt("g", h2, now)
	require.True(t, errors.Is(err, ErrInvalidHandle), "h2 was not extended: its time is over")
	require.True(t, errors.Is(tab.Extend("g", h2, time.Minute, now), ErrInvalidHandle))
	re := tab.Pop("b", "g", "T", 0, 0, 3, 3, 60*time.Second, now)
	require.Len(t, re, 1, "h0 and h1 extended, h2 delivered again")
	require.Equal(t, [2]int64{2, 2}, [2]int64{re[0].Offset, int64(re[0].Attempt)})
	require.NoError(t, tab.Ack("g", h0, now), "the handle the client got, after its VisibleAt")
	require.True(t, errors.Is(tab.Extend("g", h0, time.Minute, now), ErrInvalidHandle), "acked")
	nh, err := tab.Change("g", h1, time.Second, now)
	require.NoError(t, err)
	require.NotEqual(t, h1.Nonce, nh.Nonce)
	require.True(t, errors.Is(tab.Extend("g", h1, time.Minute, now), ErrInvalidHandle), "changed: a new handle")

	re = tab.Pop("b", "g", "T", 0, 0, 3, 3, 60*time.Second, now.Add(2*time.Second))
	require.Len(t, re, 1, "h1 after its change")
	require.Equal(t, [2]int64{1, 2}, [2]int64{re[0].Offset, int64(re[0].Attempt)})
}
