package commitlog

import (
	"bytes"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// warmFS records the writes made through the descriptors the warmer opens:
// every file opened without O_CREATE once the log is open (recovery opens
// existing segments the same way, so tests start from an empty directory).
type warmFS struct {
	mu        sync.Mutex
	armed     bool
	zeros     map[string][][2]int64 // path → [off, end) the warmer wrote
	nonZero   int                   // warmer writes holding a non-zero byte
	writeErr  error                 // fails every warmer write while set
	syncErr   error                 // fails every warmer fsync while set
	warmOpens int
}

func (fs *warmFS) open(path string, flag int, perm os.FileMode) (File, error) {
	f, err := OSOpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.armed || flag&os.O_CREATE != 0 {
		return f, nil
	}
	fs.warmOpens++
	return &warmFile{File: f, fs: fs, path: path}, nil
}

func (fs *warmFS) arm() {
	fs.mu.Lock()
	fs.armed = true
	fs.mu.Unlock()
}

// covered reports whether the warmer wrote every byte of [lo, hi) of path.
func (fs *warmFS) covered(path string, lo, hi int64) bool {
	fs.mu.Lock()
	rs := append([][2]int64(nil), fs.zeros[path]...)
	fs.mu.Unlock()
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	for _, r := range rs {
		if r[0] > lo {
			break
		}
		lo = max(lo, r[1])
	}
	return lo >= hi
}

type warmFile struct {
	File
	fs   *warmFS
	path string
}

func (f *warmFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	err := f.fs.writeErr
	if err == nil {
		if f.fs.zeros == nil {
			f.fs.zeros = map[string][][2]int64{}
		}
		f.fs.zeros[f.path] = append(f.fs.zeros[f.path], [2]int64{off, off + int64(len(p))})
		if bytes.IndexFunc(p, func(r rune) bool { return r != 0 }) >= 0 {
			f.fs.nonZero++
		}
	}
	f.fs.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *warmFile) Sync() error {
	f.fs.mu.Lock()
	err := f.fs.syncErr
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Sync()
}

func openWarm(t *testing.T, dir string, segSize, ahead int64) (*Log, *warmFS) {
	t.Helper()
	fs := &warmFS{}
	opts := testOptions(segSize)
	opts.SyncFlush = true
	opts.WarmAhead = ahead
	opts.OpenFile = fs.open
	l := mustOpen(t, dir, opts)
	fs.arm()
	return l, fs
}

// TestWarm_StaysAhead: the warmer writes zeros over the bytes just past the
// end of the log, and moves on to a new segment when the log rolls.
func TestWarm_StaysAhead(t *testing.T) {
	const seg, ahead = 16 << 20, 4 << 20
	dir := t.TempDir()
	l, fs := openWarm(t, dir, seg, ahead)
	ws := appendSizes(t, l, []int{5000, 70000, 300}, 0)
	end := int64(l.Next())
	path := segmentPath(dir, 0)
	require.Eventually(t, func() bool {
		return fs.covered(path, (end+4095)&^4095, end+ahead-warmPiece)
	}, 10*time.Second, 5*time.Millisecond, "the warmer did not cover [end, end+ahead-1MiB)")

	// 10 MiB more: the warmer follows the end of the log.
	for i := 0; i < 160; i++ {
		ws = append(ws, appendOne(t, l, 64<<10, uint64(100+i)))
	}
	end = int64(l.Next())
	require.Eventually(t, func() bool {
		return fs.covered(path, (end+4095)&^4095, min(seg, end+ahead-warmPiece))
	}, 10*time.Second, 5*time.Millisecond)

	// Past the first segment: the next one is warmed from its start.
	for int64(l.Next()) < seg {
		ws = append(ws, appendOne(t, l, 64<<10, uint64(len(ws))))
	}
	end = int64(l.Next())
	require.Eventually(t, func() bool {
		return fs.covered(segmentPath(dir, seg), (end-seg+4095)&^4095, end-seg+ahead-warmPiece)
	}, 10*time.Second, 5*time.Millisecond, "the new segment is not warmed")
	fs.mu.Lock()
	require.Zero(t, fs.nonZero, "the warmer writes zeros only")
	fs.mu.Unlock()
	requireRecords(t, l, ws)
	require.NoError(t, l.Close())
}

// TestWarm_NeverOverwritesRecords: appends outrun the warmer (which fsyncs
// every piece), so it keeps choosing pieces just past the end of the log
// while records are written there. Every record must survive, in memory and
// after a reopen.
func TestWarm_NeverOverwritesRecords(t *testing.T) {
	dir := t.TempDir()
	l, fs := openWarm(t, dir, 4<<20, 2<<20)
	r := rand.New(rand.NewPCG(7, 7))
	var ws []want
	for int64(l.Next()) < 48<<20 {
		ws = append(ws, appendOne(t, l, 100+r.IntN(32<<10), uint64(len(ws))))
	}
	fs.mu.Lock()
	pieces := 0
	for _, rs := range fs.zeros {
		pieces += len(rs)
	}
	fs.mu.Unlock()
	require.Greater(t, pieces, 5, "the warmer must have run alongside the appends")
	requireRecords(t, l, ws)
	require.NoError(t, l.Close())

	l = mustOpen(t, dir, testOptions(4<<20))
	requireRecords(t, l, ws)
	require.NoError(t, l.Close())
}

// TestWarm_FailuresLeaveTheLogAlone: the warmer's write and fsync errors stop
// the warming of that segment and nothing else.
func TestWarm_FailuresLeaveTheLogAlone(t *testing.T) {
	for _, name := range []string{"write", "fsync"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			fs := &warmFS{}
			if name == "write" {
				fs.writeErr = errEIO
			} else {
				fs.syncErr = errEIO
			}
			opts := testOptions(4 << 20)
			opts.SyncFlush = true
			opts.WarmAhead = 2 << 20
			opts.OpenFile = fs.open
			l := mustOpen(t, dir, opts)
			fs.arm()
			var ws []want
			for int64(l.Next()) < 10<<20 {
				ws = append(ws, appendOne(t, l, 30000, uint64(len(ws))))
				if len(ws)%50 == 0 {
					require.NoError(t, l.WaitDurable(t.Context(), l.Next()))
				}
			}
			require.NoError(t, l.WaitDurable(t.Context(), l.Next()))
			requireRecords(t, l, ws)
			require.NoError(t, l.Close())
			fs.mu.Lock()
			require.Positive(t, fs.warmOpens, "the warmer must have tried")
			fs.mu.Unlock()
		})
	}
}

func TestWarm_Options(t *testing.T) {
	opts := testOptions(4 << 20)
	opts.WarmAhead = -1
	_, err := Open(t.TempDir(), opts)
	require.ErrorContains(t, err, "negative warm-ahead")

	opts.WarmAhead = 1000
	l := mustOpen(t, t.TempDir(), opts)
	require.NotNil(t, l.warm)
	require.EqualValues(t, 2*warmPiece, l.warm.ahead, "raised to two pieces")
	require.NoError(t, l.Close())

	opts.NoPreallocate = true
	l = mustOpen(t, t.TempDir(), opts)
	require.Nil(t, l.warm, "warming a file that grows would preallocate it")
	require.NoError(t, l.Close())
}
