package consumequeue

import (
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// faultFS is an opener whose files fail the next writes or fsyncs.
type faultFS struct {
	mu         sync.Mutex
	failWrites int   // the next failWrites WriteAt calls fail
	failSyncs  int   // the next failSyncs Sync calls of files (not dirs) fail
	short      bool  // a failing write writes half of its bytes first
	err        error // what they fail with
}

func (fs *faultFS) open(path string, flag int, perm os.FileMode) (File, error) {
	f, err := OSOpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, fs: fs}, nil
}

// take reports whether the next operation of a kind fails, counting it.
func (fs *faultFS) take(n *int) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if *n == 0 {
		return false
	}
	*n--
	return true
}

type faultFile struct {
	File
	fs *faultFS
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.take(&f.fs.failWrites) {
		n := 0
		if f.fs.short {
			n, _ = f.File.WriteAt(p[:len(p)/2], off)
		}
		return n, f.fs.err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if st, err := f.Stat(); err == nil && !st.IsDir() && f.fs.take(&f.fs.failSyncs) {
		return f.fs.err
	}
	return f.File.Sync()
}

var errNoSpace = &os.PathError{Op: "write", Path: "cq", Err: syscall.ENOSPC}

// TestQueue_WriteErrorRetried: a write that fails (ENOSPC, nothing or half
// written) fails the Put and changes nothing, so the same Put succeeds once
// space is back; every entry is then readable, and still there after a
// reopen.
func TestQueue_WriteErrorRetried(t *testing.T) {
	for _, short := range []bool{false, true} {
		dir := t.TempDir()
		fs := &faultFS{err: errNoSpace, short: short}
		s, err := OpenStore(dir, Options{EntriesPerFile: 4, WriteBufferEntries: 2, OpenFile: fs.open})
		require.NoError(t, err)
		q := mustQueue(t, s, "T", 0)
		putRange(t, q, 0, 3)
		fs.mu.Lock()
		fs.failWrites = 3
		fs.mu.Unlock()
		for range 3 {
			require.ErrorIs(t, q.Put(3, testEntry(3)), syscall.ENOSPC) // fills the buffer and the file
			require.Equal(t, int64(3), q.Next(), "the failed entry is not published")
			requireEntries(t, q, 0, 3)
		}
		putRange(t, q, 3, 10)
		requireEntries(t, q, 0, 10)
		require.NoError(t, s.Sync(), "a write error is not sticky")
		require.NoError(t, s.Close())

		s = openTest(t, dir, 4, 2)
		q = mustQueue(t, s, "T", 0)
		require.Equal(t, int64(10), q.Next())
		requireEntries(t, q, 0, 10)
	}
}

// TestQueue_SyncErrorSticky: a failed fsync fails the queue for good (its
// unsynced pages may be gone).
func TestQueue_SyncErrorSticky(t *testing.T) {
	fs := &faultFS{err: &os.PathError{Op: "fsync", Path: "cq", Err: syscall.EIO}}
	s, err := OpenStore(t.TempDir(), Options{EntriesPerFile: 4, WriteBufferEntries: 2, OpenFile: fs.open})
	require.NoError(t, err)
	q := mustQueue(t, s, "T", 0)
	putRange(t, q, 0, 1)
	fs.mu.Lock()
	fs.failSyncs = 1
	fs.mu.Unlock()
	require.ErrorIs(t, s.Sync(), syscall.EIO)
	require.ErrorIs(t, q.Put(1, testEntry(1)), syscall.EIO, "sticky")
	require.ErrorIs(t, s.Sync(), syscall.EIO)
	require.ErrorIs(t, s.Close(), syscall.EIO)
}
