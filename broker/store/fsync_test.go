//go:build linux && (amd64 || arm64)

package store

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/fsync"
)

// The store's own files (segments, consume queues, key index, checkpoints)
// are fsynced through internal/fsync's AIO path, not by system calls that
// keep a scheduler slot.
func TestStore_FsyncsThroughAIO(t *testing.T) {
	require.Equal(t, "aio", fsync.Mode())
	c := testConf(t.TempDir())
	c.Flush = "sync"
	s := mustOpen(t, c, testOpts())
	defer s.Close()
	waitDispatched(t, s)

	before := fsync.AIOCalls()
	mustPut(t, s, msg("t", 1, "a")) // NB: sync mode: answered once the segment's fdatasync is done
	afterPut := fsync.AIOCalls()
	require.Greater(t, afterPut, before, "the put's fdatasync did not go through AIO")

	waitDispatched(t, s)
	require.NoError(t, s.saveCheckpoints())
	// NB: the queue's file and directories, the key index's file, and the two
	// checkpoints (a file and its directory each).
	require.GreaterOrEqual(t, fsync.AIOCalls()-afterPut, uint64(5), "the checkpoint's fsyncs did not go through AIO")

	// The commitlog's own checkpoint and directory: its SyncFile.
	require.Equal(t, reflect.ValueOf(syncFile).Pointer(), reflect.ValueOf(s.logOptions().SyncFile).Pointer())
}
