package commitlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSegmentName(t *testing.T) {
	for _, tc := range []struct {
		base Offset
		name string
	}{
		{0, "00000000000000000000"},
		{1073741824, "00000000001073741824"},
		{9223372036854775807, "09223372036854775807"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, segmentName(tc.base))
			got, ok := parseSegmentName(tc.name)
			require.True(t, ok)
			require.Equal(t, tc.base, got)
		})
	}
	for _, bad := range []string{"", "0", "0000000000000000000a", "000000000000000000000", "checkpoint", "00000000000000000000.tmp", "-0000000000000000001", "99999999999999999999"} {
		t.Run("bad/"+bad, func(t *testing.T) {
			_, ok := parseSegmentName(bad)
			require.False(t, ok)
		})
	}
}

// permutations runs a test body for each flush mode, segment size and
// preallocation setting.
func permutations(t *testing.T, body func(t *testing.T, opts Options)) {
	for _, sync := range []bool{false, true} {
		for _, seg := range []int64{4096, 1 << 20} {
			for _, noPre := range []bool{false, true} {
				name := fmt.Sprintf("sync=%v/seg=%d/prealloc=%v", sync, seg, !noPre)
				t.Run(name, func(t *testing.T) {
					opts := testOptions(seg)
					opts.SyncFlush = sync
					opts.NoPreallocate = noPre
					body(t, opts)
				})
			}
		}
	}
}

func TestLog_AppendRead(t *testing.T) {
	permutations(t, func(t *testing.T, opts Options) {
		dir := t.TempDir()
		l := mustOpen(t, dir, opts)
		r := rand.New(rand.NewPCG(1, 2))
		ws := appendSizes(t, l, randomSizes(r, 300, testHeader, 700), 0)
		require.Equal(t, ws[len(ws)-1].end(), l.Next())
		require.NoError(t, l.WaitDurableNow(context.Background(), l.Next()))
		require.GreaterOrEqual(t, l.Durable(), l.Next())
		requireRecords(t, l, ws)
		if opts.SegmentSize == 4096 {
			require.Greater(t, len(l.segs), 2, "test must span segments")
		}
		require.NoError(t, l.Close())
		require.NoError(t, l.Close(), "Close is idempotent")

		l = mustOpen(t, dir, opts)
		info := l.Recovery()
		require.True(t, info.Clean)
		require.True(t, info.FromCheckpoint, info.CheckpointProblem)
		require.Zero(t, info.Scanned, "a clean reopen scans nothing")
		require.Equal(t, ws[len(ws)-1].end(), l.Next())
		requireRecords(t, l, ws)
		ws = append(ws, appendSizes(t, l, randomSizes(r, 50, testHeader, 700), 1000)...)
		requireRecords(t, l, ws)
		require.NoError(t, l.Close())
	})
}

func TestLog_AppendErrors(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(4096))
	defer l.Close()
	_, err := l.Append(4096-7, fillTest(0))
	require.ErrorIs(t, err, ErrRecordTooLarge)
	_, err = l.Append(testHeader-1, fillTest(0))
	require.ErrorIs(t, err, ErrRecordTooLarge)
	_, err = l.Append(100, func(at Offset, dst []byte) error { return fillTest(0)(at, dst[:99]) })
	require.ErrorIs(t, err, ErrBadFill)
	boom := errors.New("boom")
	_, err = l.Append(100, func(Offset, []byte) error { return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, Offset(0), l.Next(), "failed appends leave no trace")
	w := appendOne(t, l, 100, 7)
	require.Equal(t, Offset(0), w.at)
	_, err = l.ReadAt(make([]byte, 10), 100)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
}

// TestBoundary sweeps record sizes around the room left in a segment so that
// the exact-fit, blank-fill and roll paths all run.
func TestBoundary(t *testing.T) {
	const seg = 4096
	first := 1000
	left := seg - first
	for size := left - envelopeSize - 4; size <= left-envelopeSize+4; size++ {
		t.Run(fmt.Sprint("size=", size), func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(seg)
			l := mustOpen(t, dir, opts)
			ws := []want{appendOne(t, l, first, 1), appendOne(t, l, size, 2)}
			if size+envelopeSize <= left {
				require.Equal(t, Offset(first), ws[1].at, "fits in the first segment")
			} else {
				require.Equal(t, Offset(seg), ws[1].at, "rolled to the second segment")
			}
			ws = append(ws, appendOne(t, l, 100, 3))
			requireRecords(t, l, ws)
			require.NoError(t, l.Close())
			l = mustOpen(t, dir, opts)
			requireRecords(t, l, ws)
			require.Equal(t, ws[2].end(), l.Next())
			require.NoError(t, l.Close())
		})
	}
}

func TestLog_ExactFillThenRoll(t *testing.T) {
	// A record that leaves exactly 8 bytes, then one that must roll: the
	// blank is only an envelope.
	const seg = 4096
	dir := t.TempDir()
	opts := testOptions(seg)
	l := mustOpen(t, dir, opts)
	ws := []want{appendOne(t, l, seg-envelopeSize, 1), appendOne(t, l, 50, 2)}
	require.Equal(t, Offset(seg), ws[1].at)
	require.NoError(t, l.Close())
	l = mustOpen(t, dir, opts)
	requireRecords(t, l, ws)
	require.NoError(t, l.Close())
}

func TestLog_ReopenAfterBlankEndsLastSegment(t *testing.T) {
	// Close right after a roll that created no record in the new segment
	// is impossible (the roll happens inside Append), but a crash between
	// the blank and the first record leaves an empty last segment: recovery
	// drops it and the next append recreates it.
	const seg = 4096
	dir := t.TempDir()
	opts := testOptions(seg)
	l := mustOpen(t, dir, opts)
	ws := []want{appendOne(t, l, 3000, 1), appendOne(t, l, 2000, 2)}
	require.NoError(t, l.WaitDurableNow(context.Background(), l.Next()))
	snap := copyDir(t, dir)
	require.NoError(t, l.Close())
	// Zero the second segment as if its record never reached the disk.
	require.NoError(t, os.Truncate(segmentPath(snap, seg), 0))
	l = mustOpen(t, snap, opts)
	require.Equal(t, []string{segmentName(seg)}, l.Recovery().RemovedSegments)
	require.Equal(t, Offset(seg), l.Next(), "the blank ends the log")
	requireRecords(t, l, ws[:1])
	ws2 := appendOne(t, l, 2000, 3)
	require.Equal(t, Offset(seg), ws2.at)
	requireRecords(t, l, []want{ws[0], ws2})
	require.NoError(t, l.Close())
}

func TestLog_ConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(64 << 10)
	l := mustOpen(t, dir, opts)
	defer l.Close()
	var mu sync.Mutex
	var ws []want
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := l.NewScanner(0, false)
			n := 0
			for {
				for s.Scan() {
					at, rec := s.Record()
					mu.Lock()
					w := ws[n]
					mu.Unlock()
					if w.at != at || len(rec) != w.size {
						t.Errorf("record %d: got %d/%d want %d/%d", n, at, len(rec), w.at, w.size)
						return
					}
					n++
				}
				if s.Err() != nil {
					t.Errorf("scan: %v", s.Err())
					return
				}
				select {
				case <-done:
					if s.Pos() == l.Next() {
						return
					}
				default:
				}
			}
		}()
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		size := testHeader + r.IntN(600)
		mu.Lock()
		// NB: hold mu across Append so readers never see a record before
		// its want is listed.
		at, err := l.Append(size, fillTest(uint64(i)))
		require.NoError(t, err)
		ws = append(ws, want{at: at, size: size, seed: uint64(i)})
		mu.Unlock()
	}
	close(done)
	wg.Wait()
}

func TestLog_GroupCommitSharesFsyncs(t *testing.T) {
	fs := &faultFS{}
	opts := testOptions(1 << 20)
	opts.SyncFlush = true
	opts.OpenFile = fs.open
	l := mustOpen(t, t.TempDir(), opts)
	defer l.Close()
	before := fs.syncCount()
	var appendMu sync.Mutex
	var wg sync.WaitGroup
	const writers, per = 32, 50
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				appendMu.Lock()
				at, err := l.Append(200, fillTest(uint64(w*per+i)))
				appendMu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.WaitDurable(context.Background(), at+200); err != nil {
					t.Error(err)
					return
				}
				if l.Durable() < at+200 {
					t.Errorf("WaitDurable returned before %d was durable", at+200)
				}
			}
		}()
	}
	wg.Wait()
	syncs := fs.syncCount() - before
	t.Logf("%d records, %d fsyncs", writers*per, syncs)
	require.Less(t, syncs, writers*per, "concurrent waiters must share fsyncs")
}

func TestLog_AppendBatch(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(4096)
	l := mustOpen(t, dir, opts)
	appendOne(t, l, 3000, 0)
	sizes := []int{300, 400, 500}
	at, err := l.Append(1200, func(at Offset, dst []byte) error {
		p := 0
		for i, sz := range sizes {
			_ = fillTest(uint64(10+i))(at+Offset(p), dst[p:p+sz])
			p += sz
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, Offset(4096), at, "a batch moves to the next segment as a whole")
	ws := []want{{0, 3000, 0}, {4096, 300, 10}, {4396, 400, 11}, {4796, 500, 12}}
	requireRecords(t, l, ws)
	_, err = l.Append(600, func(at Offset, dst []byte) error {
		_ = fillTest(1)(at, dst[:300])
		return fillTest(2)(at+300, dst[300:590])
	})
	require.ErrorIs(t, err, ErrBadFill, "records must tile the append")
	require.NoError(t, l.Close())
	l = mustOpen(t, dir, opts)
	requireRecords(t, l, ws)
	require.NoError(t, l.Close())
}

// Options.SyncFile fsyncs the checkpoint and the log's directory; a failure
// it reports is the checkpoint's.
func TestLog_SyncFile(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var synced []string
	opts := testOptions(1 << 20)
	opts.SyncFile = func(f *os.File) error {
		mu.Lock()
		synced = append(synced, filepath.Base(f.Name()))
		mu.Unlock()
		return f.Sync()
	}
	l := mustOpen(t, dir, opts)
	appendOne(t, l, 100, 1)
	require.NoError(t, l.Close()) // NB: saves a checkpoint
	mu.Lock()
	require.Contains(t, synced, checkpointName+".tmp")
	require.Contains(t, synced, filepath.Base(dir))
	mu.Unlock()

	opts.SyncFile = func(f *os.File) error {
		if filepath.Base(f.Name()) == checkpointName+".tmp" {
			return syscall.EIO
		}
		return f.Sync()
	}
	l = mustOpen(t, dir, opts)
	appendOne(t, l, 100, 2)
	require.ErrorIs(t, l.Close(), syscall.EIO)
}

// TestScanner_Validating: a scanner given its own check uses it in place
// of Options.Validate (which it no longer calls), with the record's offset
// and the full flag of its kind; a refusal is a CorruptionError that says
// where and how long the record is; other scanners keep the log's check.
func TestScanner_Validating(t *testing.T) {
	opts := testOptions(1 << 20)
	var logChecks int
	opts.Validate = func(rec []byte, at Offset, full bool) error {
		logChecks++
		return testValidate(rec, at, full)
	}
	l := mustOpen(t, t.TempDir(), opts)
	defer l.Close()
	ws := appendSizes(t, l, []int{100, 200, 300}, 1)
	logChecks = 0
	var seen []Offset
	var fulls []bool
	own := func(rec []byte, at Offset, full bool) error {
		seen, fulls = append(seen, at), append(fulls, full)
		if at == ws[1].at {
			return errors.New("refused")
		}
		return nil
	}
	s := l.NewScanner(0, false).Validating(own)
	require.True(t, s.Scan())
	require.False(t, s.Scan())
	var ce *CorruptionError
	require.ErrorAs(t, s.Err(), &ce)
	require.Equal(t, ws[1].at, ce.Offset)
	require.Equal(t, int32(ws[1].size), ce.Size, "SkipCorrupt passes the record alone")
	require.Contains(t, ce.Reason, "refused")
	require.Equal(t, []Offset{ws[0].at, ws[1].at}, seen)
	require.Zero(t, logChecks, "Options.Validate called beside the scanner's own check")
	s.SkipCorrupt()
	require.True(t, s.Scan())
	at, _ := s.Record()
	require.Equal(t, ws[2].at, at)

	seen, fulls = nil, nil
	th := l.NewScanner(0, false).Thorough().Validating(own)
	for range 10 {
		if !th.Scan() {
			if th.Err() == nil {
				break
			}
			th.SkipCorrupt()
		}
	}
	require.Equal(t, []bool{true, true, true}, fulls, "a thorough scanner asks for the full checks")

	n := 0
	for d := l.NewScanner(0, false); d.Scan(); n++ {
	}
	require.Equal(t, 3, n)
	require.Equal(t, 3, logChecks, "the log's own check for the others")
}
