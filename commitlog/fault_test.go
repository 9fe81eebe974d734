package commitlog

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var errEIO = &os.PathError{Op: "write", Path: "segment", Err: syscall.EIO}

// TestFault_WriteError: a failed write is not acknowledged, later appends
// get the sticky error, and a reopen keeps every acknowledged record.
func TestFault_WriteError(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(map[bool]string{false: "nothing written", true: "half written"}[partial], func(t *testing.T) {
			dir := t.TempDir()
			fs := &faultFS{}
			opts := testOptions(8192)
			opts.OpenFile = fs.open
			l := mustOpen(t, dir, opts)
			ws := appendSizes(t, l, []int{100, 200, 300}, 0)
			fs.set(func(fs *faultFS) { fs.failWriteAt, fs.writeErr, fs.partial = fs.writes+1, errEIO, partial })
			_, err := l.Append(400, fillTest(99))
			require.ErrorIs(t, err, ErrWriteFailed)
			require.ErrorIs(t, err, syscall.EIO)
			require.Equal(t, ws[2].end(), l.Next(), "the failed record is not part of the log")
			_, err = l.Append(100, fillTest(100))
			require.ErrorIs(t, err, ErrWriteFailed, "the error is sticky")
			require.ErrorContains(t, err, "refused until the log is reopened")
			require.ErrorIs(t, l.Close(), ErrWriteFailed, "Close reports the failure")

			l = mustOpen(t, dir, testOptions(8192))
			requireRecords(t, l, ws)
			ws = append(ws, appendOne(t, l, 150, 5))
			requireRecords(t, l, ws)
			require.NoError(t, l.Close())
		})
	}
}

// TestFault_SyncError: in sync mode a failed fsync fails the waiters, refuses
// appends for good, and a reopen keeps what was durable before it.
func TestFault_SyncError(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	opts := testOptions(8192)
	opts.SyncFlush = true
	opts.OpenFile = fs.open
	l := mustOpen(t, dir, opts)
	ws := appendSizes(t, l, []int{100, 200}, 0)
	require.NoError(t, l.WaitDurable(context.Background(), l.Next()))
	fs.set(func(fs *faultFS) { fs.failSyncAt, fs.syncErr = fs.syncs+1, errEIO })
	w := appendOne(t, l, 300, 2)
	err := l.WaitDurable(context.Background(), w.end())
	require.ErrorIs(t, err, ErrWriteFailed)
	require.ErrorContains(t, err, "fsync failed")
	_, err = l.Append(100, fillTest(3))
	require.ErrorIs(t, err, ErrWriteFailed)
	require.Error(t, l.Close(), "Close reports the failure")

	l = mustOpen(t, dir, testOptions(8192))
	defer l.Close()
	got := scanAll(t, l)
	require.GreaterOrEqual(t, len(got), len(ws), "everything acknowledged before the failure survives")
	requireRecords(t, l, append(ws, w)[:len(got)])
}

// TestFault_DiskFullWrite: ENOSPC refuses the failing append and the ones
// right after it with ErrDiskFull; appends resume by themselves once space
// is back; nothing acknowledged is lost and no partial record is left.
func TestFault_DiskFullWrite(t *testing.T) {
	for _, noPre := range []bool{false, true} {
		t.Run(map[bool]string{false: "prealloc", true: "no prealloc"}[noPre], func(t *testing.T) {
			dir := t.TempDir()
			fs := &faultFS{}
			opts := testOptions(8192)
			opts.NoPreallocate = noPre
			opts.OpenFile = fs.open
			// NB: long enough that the second Append surely lands within it.
			opts.DiskFullRetry = 500 * time.Millisecond
			opts.Retention.DiskUsage = func(string) (float64, error) { return 0.97, nil }
			opts.DiskFullHint = "free some space"
			l := mustOpen(t, dir, opts)
			ws := appendSizes(t, l, []int{100, 200}, 0)
			fs.set(func(fs *faultFS) { fs.failWriteAt, fs.writeErr, fs.partial = fs.writes+1, errENOSPC, true })
			_, err := l.Append(500, fillTest(50))
			require.ErrorIs(t, err, ErrDiskFull)
			var dfe *DiskFullError
			require.ErrorAs(t, err, &dfe)
			require.ErrorContains(t, err, "resume by themselves")
			require.ErrorContains(t, err, "(97.0% used)", "the remark says how full the disk is")
			require.ErrorContains(t, err, "; free some space", "and what to do")
			_, err = l.Append(100, fillTest(51))
			require.ErrorIs(t, err, ErrDiskFull, "refused while the retry delay runs")
			require.Eventually(t, func() bool {
				at, err := l.Append(120, fillTest(52))
				if err != nil {
					return false
				}
				ws = append(ws, want{at: at, size: 120, seed: 52})
				return true
			}, 5*time.Second, 5*time.Millisecond)
			require.Equal(t, ws[1].end(), ws[2].at, "the failed record left no gap")
			requireRecords(t, l, ws)
			snap := copyDir(t, dir)
			_, err = l.Append(100, fillTest(53))
			require.NoError(t, err)
			ws = append(ws, want{at: ws[2].end(), size: 100, seed: 53})
			fs.set(func(fs *faultFS) { fs.failWriteAt, fs.writeErr, fs.partial = fs.writes+1, errENOSPC, true })
			_, err = l.Append(100, fillTest(54))
			require.ErrorIs(t, err, ErrDiskFull)
			require.NoError(t, l.Close(), "a disk-full spell does not stop a clean close")
			l = mustOpen(t, dir, testOptions(8192))
			require.True(t, l.Recovery().Clean, "closed cleanly while the disk was full")
			requireRecords(t, l, ws)
			require.Equal(t, ws[3].end(), l.Next())
			require.NoError(t, l.Close())
			checkRecovered(t, snap, testOptions(8192), ws[:3], ws[2].end())
		})
	}
}

// TestFault_DiskFullOnRoll: a new segment that cannot be preallocated fails
// the append that needed it, leaves the log as it was, and appends resume
// once space is back.
func TestFault_DiskFullOnRoll(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	opts := testOptions(4096)
	opts.OpenFile = fs.open
	opts.DiskFullRetry = time.Millisecond
	l := mustOpen(t, dir, opts)
	ws := appendSizes(t, l, []int{3000}, 0)
	fs.set(func(fs *faultFS) { fs.preallocErr = &os.PathError{Op: "fallocate", Path: "x", Err: syscall.ENOSPC} })
	_, err := l.Append(3000, fillTest(1))
	require.ErrorIs(t, err, ErrDiskFull)
	require.Equal(t, ws[0].end(), l.Next())
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		require.NotEqual(t, segmentName(4096), e.Name(), "the failed segment file is removed")
	}
	time.Sleep(5 * time.Millisecond)
	_, err = l.Append(3000, fillTest(1))
	require.ErrorIs(t, err, ErrDiskFull, "still full")
	fs.set(func(fs *faultFS) { fs.preallocErr = nil })
	time.Sleep(5 * time.Millisecond)
	ws = append(ws, appendOne(t, l, 3000, 1))
	require.Equal(t, Offset(4096), ws[1].at)
	require.NoError(t, l.Close())
	checkRecovered(t, dir, testOptions(4096), ws, ws[1].end())
}

// TestFault_RefuseAppends: the owner refuses appends for lack of space with
// a remark naming the watermark, the use and its hint; they resume when it
// lifts the refusal.
func TestFault_RefuseAppends(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(4096))
	defer l.Close()
	appendOne(t, l, 100, 0)
	l.RefuseAppends(&DiskFullError{Watermark: 0.9, Used: 0.95, Hint: "free space"})
	_, err := l.Append(100, fillTest(1))
	require.ErrorIs(t, err, ErrDiskFull)
	require.EqualError(t, err, "commitlog: disk full: 95.0% used, above the 90.0% full watermark; "+
		"appends are refused until use is back under it; free space")
	l.RefuseAppends(nil)
	appendOne(t, l, 100, 2)
}

func TestFault_ClosedLog(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(4096))
	require.NoError(t, l.Close())
	_, err := l.Append(100, fillTest(0))
	require.ErrorIs(t, err, ErrClosed)
	require.True(t, errors.Is(l.WaitDurable(context.Background(), 1<<30), ErrClosed))
}
