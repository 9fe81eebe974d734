package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPut_RefusedAppendKeepsQueueOffsets: a put the commitlog refuses
// before encoding it (the retry delay after an ENOSPC) gives back no queue
// offset it did not take: the next stored message continues the queue.
func TestPut_RefusedAppendKeepsQueueOffsets(t *testing.T) {
	d := &diskFault{under: "commitlog"}
	o := testOpts()
	o.OpenFile = d.open
	s := mustOpen(t, testConf(t.TempDir()), o)
	defer s.Close()
	for range 3 {
		mustPut(t, s, msg("t", 0, "before"))
	}
	d.failNext.Store(1)
	require.Equal(t, PutServiceNotAvailable, s.Put(t.Context(), msg("t", 0, "ENOSPC")).Status)
	require.Equal(t, PutServiceNotAvailable, s.Put(t.Context(), msg("t", 0, "refused")).Status,
		"refused without a write while the retry delay runs")
	var r PutResult
	require.Eventually(t, func() bool {
		r = s.Put(t.Context(), msg("t", 0, "after"))
		return r.Status == PutOK
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(3), r.QueueOffset)
	require.Equal(t, int64(4), s.QueueNext("t", 0))
}
