//go:build linux && (amd64 || arm64)

package store

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/consumequeue/keyindex"
	"github.com/sluicemq/sluice/internal/fsync"
)

func funcPtr(f any) uintptr { return reflect.ValueOf(f).Pointer() }

// The store's files (segments in async flush mode, consume queues, key
// index, checkpoints) are fsynced through internal/fsync's AIO path, not by
// system calls that keep a scheduler slot; in sync flush mode the segments
// keep the system call, which answers sooner under load.
func TestStore_FsyncsThroughAIO(t *testing.T) {
	require.Equal(t, "aio", fsync.Mode())
	// The openers' files: each Sync is one AIO call (no store is open yet,
	// so nothing else fsyncs meanwhile).
	dir := t.TempDir()
	lf, err := openLogFile(filepath.Join(dir, "seg"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer lf.Close()
	qf, err := openIndexFile[consumequeue.File](filepath.Join(dir, "cq"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer qf.Close()
	for _, f := range []interface{ Sync() error }{lf, qf} {
		before := fsync.AIOCalls()
		require.NoError(t, f.Sync())
		require.Equal(t, before+1, fsync.AIOCalls(), "%T.Sync did not go through AIO", f)
	}

	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	require.Equal(t, funcPtr(openLogFile), funcPtr(s.opts.OpenFile))
	require.Equal(t, funcPtr(openIndexFile[consumequeue.File]), funcPtr(s.opts.ConsumeQueue.OpenFile))
	require.Equal(t, funcPtr(openIndexFile[keyindex.File]), funcPtr(s.opts.KeyIndex.OpenFile))
	require.Equal(t, funcPtr(syncFile), funcPtr(s.logOptions().SyncFile), "the commitlog's checkpoint and directory")

	c := testConf(t.TempDir())
	c.Flush = "sync"
	ss := mustOpen(t, c, testOpts())
	defer ss.Close()
	require.Equal(t, funcPtr(commitlog.OSOpenFile), funcPtr(ss.opts.OpenFile), "sync mode: the segments' fdatasync is the system call")
	require.Equal(t, funcPtr(openIndexFile[consumequeue.File]), funcPtr(ss.opts.ConsumeQueue.OpenFile))

	// A checkpoint's fsyncs: the queue's file and directories, the key
	// index's file, and two state files with their directories.
	mustPut(t, ss, msg("t", 1, "a"))
	waitDispatched(t, ss)
	before := fsync.AIOCalls()
	require.NoError(t, ss.saveCheckpoints())
	require.GreaterOrEqual(t, fsync.AIOCalls()-before, uint64(5))
}
