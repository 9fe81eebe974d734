package pop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTable_Reset: a reset moves a queue's next offset back (the offsets
// from there are delivered again, attempt 1) or forward (those skipped
// are never delivered); the offsets in flight are forgotten (their
// handles answer ErrInvalidHandle and no longer count in Committed);
// other queues and groups keep their state; a group that never popped
// has nothing to reset.
func TestTable_Reset(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	d := tb.Pop("b", "g", "T", 0, 0, 10, 10, time.Minute, now)
	require.Len(t, d, 10)
	for _, x := range d[:5] {
		require.NoError(t, tb.Ack("g", x.Handle, now))
	}
	other := tb.Pop("b", "h", "T", 0, 0, 10, 1, time.Minute, now)
	require.Len(t, other, 1)
	q1 := tb.Pop("b", "g", "T", 1, 0, 10, 1, time.Minute, now)
	require.Len(t, q1, 1)

	require.True(t, tb.Reset("g", "T", 0, 2), "back to 2")
	require.ErrorIs(t, tb.Ack("g", d[7].Handle, now), ErrInvalidHandle, "an in-flight handle from before the reset")
	off, ok := tb.Committed("g", "T", 0)
	require.True(t, ok)
	require.Equal(t, int64(2), off)
	again := tb.Pop("b", "g", "T", 0, 2, 10, 20, time.Minute, now)
	require.Len(t, again, 8)
	for i, x := range again {
		require.Equal(t, int64(2+i), x.Offset)
		require.Equal(t, int32(1), x.Attempt, "delivered as new")
	}
	require.NoError(t, tb.Ack("h", other[0].Handle, now), "another group's handle")
	require.NoError(t, tb.Ack("g", q1[0].Handle, now), "another queue's handle")

	require.True(t, tb.Reset("g", "T", 0, 8), "forward to 8")
	require.ErrorIs(t, tb.Ack("g", again[0].Handle, now), ErrInvalidHandle)
	fwd := tb.Pop("b", "g", "T", 0, 8, 10, 20, time.Minute, now.Add(2*time.Minute))
	require.Equal(t, map[int64]int32{8: 1, 9: 1}, offsets(fwd), "2..7 skipped, not redelivered once their time is over")

	require.False(t, tb.Reset("never", "T", 0, 3), "a group that never popped")
	_, ok = tb.Committed("never", "T", 0)
	require.False(t, ok)
	require.True(t, tb.Reset("g", "T", 0, -5))
	off, _ = tb.Committed("g", "T", 0)
	require.Equal(t, int64(0), off, "a negative offset is 0")
}

// TestTable_ResetFIFO: a reset forgets a queue's FIFO state (the message
// group's offset in flight and those waiting behind it): from the new
// offset the group flows again in order, one at a time.
func TestTable_ResetFIFO(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	gs := groupsOf("A", "A", "A", "A")
	first := tb.PopOrderly("b", "g", "T", 0, 0, 4, 10, time.Minute, now, gs)
	require.Equal(t, map[int64]int32{0: 1}, offsets(first), "1..3 wait behind 0")
	require.True(t, tb.Reset("g", "T", 0, 2))
	got := tb.PopOrderly("b", "g", "T", 0, 2, 4, 10, time.Minute, now, gs)
	require.Equal(t, map[int64]int32{2: 1}, offsets(got), "A from 2, nothing of the old waiting state")
	require.NoError(t, tb.Ack("g", got[0].Handle, now))
	got = tb.PopOrderly("b", "g", "T", 0, 2, 4, 10, time.Minute, now, gs)
	require.Equal(t, map[int64]int32{3: 1}, offsets(got))
	off, _ := tb.Committed("g", "T", 0)
	require.Equal(t, int64(3), off)
}

// TestOpen_ResetSurvivesRestart: a reset is saved: after a restart the
// queue pops from the reset offset and the handles forgotten stay so.
func TestOpen_ResetSurvivesRestart(t *testing.T) {
	path := t.TempDir() + "/pop"
	now := time.Unix(1_800_000_000, 0)
	tb, err := Open(path, nil)
	require.NoError(t, err)
	d := tb.Pop("b", "g", "T", 0, 0, 5, 10, time.Minute, now)
	require.Len(t, d, 5)
	require.NoError(t, tb.Persist())
	require.True(t, tb.Reset("g", "T", 0, 1))
	require.NoError(t, tb.Close())

	tb, err = Open(path, nil)
	require.NoError(t, err)
	defer tb.Close()
	require.ErrorIs(t, tb.Ack("g", d[3].Handle, now), ErrInvalidHandle, "forgotten before the restart")
	off, ok := tb.Committed("g", "T", 0)
	require.True(t, ok)
	require.Equal(t, int64(1), off)
	again := tb.Pop("b", "g", "T", 0, 1, 5, 10, time.Minute, now)
	require.Equal(t, map[int64]int32{1: 1, 2: 1, 3: 1, 4: 1}, offsets(again))
}

// TestTable_ResetStaleStart: the first unordered pop after a reset starts
// at the reset offset even when the start it names is higher (read
// before the reset's commit, or committed over it by an ack under way);
// the pops after it take their start as before (a queue's first offset
// past retention).
func TestTable_ResetStaleStart(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	d := tb.Pop("b", "g", "T", 0, 0, 10, 10, time.Minute, now)
	for _, x := range d {
		require.NoError(t, tb.Ack("g", x.Handle, now))
	}
	require.True(t, tb.Reset("g", "T", 0, 3))
	got := tb.Pop("b", "g", "T", 0, 10, 10, 2, time.Minute, now)
	require.Equal(t, map[int64]int32{3: 1, 4: 1}, offsets(got), "a start of 10 from before the reset")
	got = tb.Pop("b", "g", "T", 0, 8, 10, 10, time.Minute, now)
	require.Equal(t, map[int64]int32{8: 1, 9: 1}, offsets(got), "a later start past next moves it, as before")

	// An orderly pop takes the greater (documented).
	tb.Reset("g", "T", 0, 1)
	got = tb.PopOrderly("b", "g", "T", 0, 5, 10, 1, time.Minute, now, groupsOf("A", "A", "A", "A", "A", "A", "A", "A", "A", "A"))
	require.Equal(t, map[int64]int32{5: 1}, offsets(got))
}
