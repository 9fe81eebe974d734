package commitlog

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitPrecreated waits for the segment being created in the background, if
// any, and returns it. REQUIRES: the appender (the test).
func waitPrecreated(l *Log) *precreation {
	if l.pre != nil {
		<-l.pre.done
	}
	return l.pre
}

// seg is the segment size of the precreation tests.
const seg = 4096

// openPrecreating opens a log with PrecreateNext in a new folder.
func openPrecreating(t *testing.T) (string, Options, *Log) {
	dir := t.TempDir()
	opts := testOptions(seg)
	opts.PrecreateNext = true
	return dir, opts, mustOpen(t, dir, opts)
}

// TestPrecreate_RollUsesIt: with PrecreateNext the segment after the active
// one exists, preallocated, before the append that rolls into it; the roll
// takes it and the next one is made; Close removes the one not used.
func TestPrecreate_RollUsesIt(t *testing.T) {
	dir, _, l := openPrecreating(t)
	ws := []want{appendOne(t, l, 3000, 1)}
	p := waitPrecreated(l)
	require.NotNil(t, p)
	require.NoError(t, p.err)
	require.Equal(t, Offset(seg), p.base)
	fi, err := os.Stat(segmentPath(dir, seg))
	require.NoError(t, err, "the next segment is there before the roll")
	require.Equal(t, int64(seg), fi.Size(), "preallocated")

	ws = append(ws, appendOne(t, l, 3000, 2))
	require.Equal(t, Offset(seg), ws[1].at)
	require.Same(t, p.seg, l.active, "the roll took the segment made in the background")
	next := waitPrecreated(l)
	require.NotNil(t, next)
	require.Equal(t, Offset(2*seg), next.base)
	_, err = os.Stat(segmentPath(dir, 2*seg))
	require.NoError(t, err)

	require.NoError(t, l.Close())
	_, err = os.Stat(segmentPath(dir, 2*seg))
	require.ErrorIs(t, err, os.ErrNotExist, "Close removes the unused segment")
	checkRecovered(t, dir, testOptions(seg), ws, ws[1].end())
}

// TestPrecreate_CrashLeavesEmptyTail: a crash while the next segment exists
// unused leaves an empty trailing segment, which recovery drops; appends go
// on where the log ended.
func TestPrecreate_CrashLeavesEmptyTail(t *testing.T) {
	dir, opts, l := openPrecreating(t)
	ws := appendSizes(t, l, []int{3000, 500}, 1)
	require.NoError(t, waitPrecreated(l).err)
	snap := copyDir(t, dir) // NB: the crash: the files as they are now
	require.NoError(t, l.Close())

	l = mustOpen(t, snap, opts)
	require.Equal(t, []string{segmentName(seg)}, l.Recovery().RemovedSegments)
	require.Equal(t, ws[1].end(), l.Next())
	ws = append(ws, appendOne(t, l, 3000, 3))
	require.Equal(t, Offset(seg), ws[2].at, "the roll made the segment again")
	requireRecords(t, l, ws)
	require.NoError(t, l.Close())
}

// TestPrecreate_FailureFallsBack: a segment that could not be made in the
// background (a full disk) is made by the append that rolls, which
// reports the error if it fails again.
func TestPrecreate_FailureFallsBack(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	opts := testOptions(seg)
	opts.PrecreateNext = true
	opts.OpenFile = fs.open
	opts.DiskFullRetry = 1
	l := mustOpen(t, dir, opts)
	ws := []want{appendOne(t, l, 3000, 1)}
	require.NoError(t, waitPrecreated(l).err, "made before the disk filled")
	fs.set(func(fs *faultFS) { fs.preallocErr = &os.PathError{Op: "fallocate", Path: "x", Err: syscall.ENOSPC} })

	// The roll takes the made segment; the one after it fails.
	ws = append(ws, appendOne(t, l, 3000, 2))
	require.ErrorIs(t, waitPrecreated(l).err, syscall.ENOSPC)
	_, err := os.Stat(segmentPath(dir, 2*seg))
	require.ErrorIs(t, err, os.ErrNotExist, "the failed segment file is removed")
	_, err = l.Append(3000, fillTest(3))
	require.ErrorIs(t, err, ErrDiskFull, "the roll tried again and says why it failed")

	fs.set(func(fs *faultFS) { fs.preallocErr = nil })
	require.Eventually(t, func() bool {
		w, err := l.Append(3000, fillTest(3))
		if err == nil {
			ws = append(ws, want{at: w, size: 3000, seed: 3})
		}
		return err == nil
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, Offset(2*seg), ws[2].at)
	require.NoError(t, l.Close())
	checkRecovered(t, dir, testOptions(seg), ws, ws[2].end())
}
