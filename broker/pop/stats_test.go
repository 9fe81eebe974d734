package pop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTable_Stats: Stats counts a queue's offsets delivered and not acked
// (their invisible time over or not), the FIFO offsets waiting behind
// their message group's and those released by an ack and not delivered
// yet, and names the lowest offset in flight; a queue with nothing in
// flight says -1. Groups, topics and queues come sorted.
func TestTable_Stats(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	require.Empty(t, tb.Stats())
	// A: 0, 2, 5 (2 and 5 wait behind 0); B: 1, 4 (4 waits); none: 3, 6.
	first := tb.PopOrderly("b", "g", "T", 0, 0, 7, 10, 10*time.Second, now, groupsOf("A", "B", "A", "", "B", "A", ""))
	require.Len(t, first, 4)
	tb.Pop("b", "g", "S", 1, 0, 0, 10, time.Minute, now) // NB: nothing to pop: a queue with nothing in flight
	require.Equal(t, []QueueStats{
		{Group: "g", Topic: "S", Queue: 1, Oldest: -1},
		{Group: "g", Topic: "T", Queue: 0, InFlight: 4, Waiting: 3, Oldest: 0},
	}, tb.Stats())

	for _, d := range first {
		if d.Offset == 0 || d.Offset == 3 {
			require.NoError(t, tb.Ack("g", d.Handle, now))
		}
	}
	// 2 is released (visible now, not delivered): still waiting; 1 is the
	// lowest in flight, and stays in flight after its invisible time.
	require.Equal(t, QueueStats{Group: "g", Topic: "T", Queue: 0, InFlight: 2, Waiting: 3, Oldest: 1}, tb.Stats()[1])
	later := now.Add(time.Minute)
	require.Len(t, tb.PopOrderly("b", "g", "T", 0, 0, 7, 10, 10*time.Second, later, groupsOf("A", "B", "A", "", "B", "A", "")), 3,
		"1 and 6 again, 2 for the first time")
	require.Equal(t, QueueStats{Group: "g", Topic: "T", Queue: 0, InFlight: 3, Waiting: 2, Oldest: 1}, tb.Stats()[1])
}
