package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	return len(entries)
}

// TestStore_SchedulesRetention: the store runs retention on its own
// schedule: the commitlog's expired segments go, and with them the consume
// queue and key index files that only point into them; what is left reads
// as before.
func TestStore_SchedulesRetention(t *testing.T) {
	c := testConf(t.TempDir())
	c.SegmentSize = 64 << 10
	c.ConsumeQueueEntries = 32
	c.FileReservedTime = time.Hour
	c.RetentionInterval = 10 * time.Millisecond
	o := testOpts()
	o.KeyIndex.EntriesPerFile = 32
	s := mustOpen(t, c, o)
	defer s.Close()
	const n = 300 // ~1 KiB each: five segments
	for i := range n {
		mustPut(t, s, msg("t", 0, fmt.Sprintf("%d-%s", i, strings.Repeat("x", 1000)), message.PropKeys, fmt.Sprintf("k%d", i)))
	}
	require.NoError(t, s.log.Sync(t.Context()))
	waitDispatched(t, s)
	segDir := filepath.Join(c.Dir, "commitlog")
	cqDir := filepath.Join(c.Dir, "consumequeue", "t", "0")
	idxDir := filepath.Join(c.Dir, "index")
	segs, cqFiles, idxFiles := countFiles(t, segDir), countFiles(t, cqDir), countFiles(t, idxDir)
	require.Zero(t, s.log.Min(), "young segments stay")

	// Every segment but the last was written two hours ago.
	last := commitlog.Offset(s.log.Next()) / commitlog.Offset(c.SegmentSize) * commitlog.Offset(c.SegmentSize)
	require.Greater(t, last, commitlog.Offset(2*c.SegmentSize))
	old := time.Now().Add(-2 * time.Hour)
	for base := commitlog.Offset(0); base < last; base += commitlog.Offset(c.SegmentSize) {
		require.NoError(t, os.Chtimes(filepath.Join(segDir, fmt.Sprintf("%020d", base)), old, old))
	}
	q := s.cq.Lookup("t", 0)
	require.Eventually(t, func() bool {
		return s.log.Min() == last && q.Min() > 0 && countFiles(t, idxDir) < idxFiles
	}, 10*time.Second, 5*time.Millisecond, "the store's loop retains the log, then trims its indexes")
	require.Less(t, countFiles(t, segDir), segs)
	require.Less(t, countFiles(t, cqDir), cqFiles, "consume queue files below the log's minimum are gone")

	first := s.MinOffset("t", 0)
	require.Greater(t, first, int64(0))
	got := bodies(t, get(t, s, "t", 0, first, 1).Body)
	require.Len(t, got, 1)
	require.True(t, strings.HasPrefix(got[0], fmt.Sprintf("%d-", first)), "the first message left reads as before")
	recs, err := s.QueryByKey("t", fmt.Sprintf("k%d", n-1), 0, time.Now().UnixMilli()+1000, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1, "keys of the messages left are found")
}
