package commitlog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// crashedLog builds a log of records over several segments and returns a
// snapshot of its directory taken while it was open (abort file present),
// with a checkpoint covering the first cpRecords records only.
func crashedLog(t *testing.T, opts Options, sizes []int, cpRecords int) (snap string, ws []want) {
	t.Helper()
	dir := t.TempDir()
	opts.CheckpointInterval = time.Hour // only Close saves a checkpoint
	l := mustOpen(t, dir, opts)
	ws = appendSizes(t, l, sizes[:cpRecords], 0)
	require.NoError(t, l.Close())
	l = mustOpen(t, dir, opts)
	ws = append(ws, appendSizes(t, l, sizes[cpRecords:], uint64(cpRecords))...)
	require.NoError(t, l.WaitDurableNow(context.Background(), l.Next()))
	snap = copyDir(t, dir)
	require.NoError(t, l.Close())
	return snap, ws
}

// prefixBefore returns the records that end at or before cut, and where the
// recovered log must end: after the last of them, or at the next segment when
// a blank (which lies before cut) ended its segment.
func prefixBefore(ws []want, cut Offset) ([]want, Offset) {
	var p []want
	var end Offset
	for _, w := range ws {
		if w.end() > cut {
			if w.at > end && w.at <= cut {
				end = w.at // the blank before w survived
			}
			break
		}
		p = append(p, w)
		end = w.end()
	}
	return p, end
}

// checkRecovered opens dir and asserts it holds exactly ws, ends where ws
// ends (or at the segment start after a trailing blank), and takes a new
// append at its end.
func checkRecovered(t *testing.T, dir string, opts Options, ws []want, end Offset) {
	t.Helper()
	l := mustOpen(t, dir, opts)
	defer l.Close()
	requireRecords(t, l, ws)
	require.Equal(t, end, l.Next(), "recovered end")
	w := appendOne(t, l, 64, 9999)
	if w.at != end {
		// The record did not fit in the rest of the segment.
		require.Equal(t, l.segmentEnd(end), w.at)
	}
	requireRecords(t, l, append(append([]want(nil), ws...), w))
}

// TestRecover_TruncationMatrix cuts the last segment at every byte of its
// last three records and at a seeded sample of other offsets, with and
// without a usable checkpoint, and checks that exactly the whole records
// before the cut survive.
func TestRecover_TruncationMatrix(t *testing.T) {
	const seg = 8192
	opts := testOptions(seg)
	r := rand.New(rand.NewPCG(7, 7))
	sizes := randomSizes(r, 60, testHeader, 500)
	snap, ws := crashedLog(t, opts, sizes, 40)
	last := ws[len(ws)-1]
	lastBase := last.at - last.at%seg
	require.Greater(t, lastBase, Offset(0), "records must span segments")

	var cuts []Offset
	for _, w := range ws[len(ws)-3:] {
		for c := max(w.at, lastBase); c <= w.end(); c++ {
			cuts = append(cuts, c)
		}
	}
	for range 200 {
		cuts = append(cuts, lastBase+Offset(r.Int64N(int64(last.end()-lastBase))))
	}
	for _, withCP := range []bool{true, false} {
		t.Run(fmt.Sprint("checkpoint=", withCP), func(t *testing.T) {
			for _, cut := range cuts {
				dir := copyDir(t, snap)
				if !withCP {
					require.NoError(t, os.Remove(filepath.Join(dir, checkpointName)))
				}
				require.NoError(t, os.Truncate(segmentPath(dir, lastBase), int64(cut-lastBase)))
				t.Run(fmt.Sprint("cut=", cut), func(t *testing.T) {
					p, end := prefixBefore(ws, cut)
					checkRecovered(t, dir, opts, p, end)
				})
				os.RemoveAll(dir)
			}
		})
	}
}

func TestRecover_ScansOnlyPastCheckpoint(t *testing.T) {
	opts := testOptions(8192)
	r := rand.New(rand.NewPCG(1, 1))
	sizes := randomSizes(r, 80, testHeader, 400)
	snap, ws := crashedLog(t, opts, sizes, 50)
	l := mustOpen(t, snap, opts)
	info := l.Recovery()
	require.False(t, info.Clean)
	require.True(t, info.FromCheckpoint, info.CheckpointProblem)
	require.Equal(t, ws[49].end(), info.ScanFrom)
	require.Equal(t, int64(ws[79].end()-ws[49].end()), info.Scanned)
	requireRecords(t, l, ws)
	require.NoError(t, l.Close())
}

func TestRecover_ZeroedTail(t *testing.T) {
	permutations(t, func(t *testing.T, opts Options) {
		opts.SegmentSize = 8192
		r := rand.New(rand.NewPCG(2, 3))
		snap, ws := crashedLog(t, opts, randomSizes(r, 40, testHeader, 400), 20)
		last := ws[len(ws)-1]
		lastBase := last.at - last.at%8192
		for _, from := range []Offset{ws[len(ws)-2].at + 3, ws[len(ws)-1].at, lastBase + 1} {
			if from < lastBase {
				continue
			}
			dir := copyDir(t, snap)
			f, err := os.OpenFile(segmentPath(dir, lastBase), os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(make([]byte, int(last.end()-from)), int64(from-lastBase))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			p, end := prefixBefore(ws, from)
			checkRecovered(t, dir, opts, p, end)
		}
	})
}

// TestRecover_BitFlips flips one byte of a random record. In the last
// segment recovery cuts the log there; in an older segment it reports the
// corruption with segment and position, skips the rest of that segment and
// keeps the later ones; a scanner never returns the bad record.
func TestRecover_BitFlips(t *testing.T) {
	const seg = 8192
	opts := testOptions(seg)
	r := rand.New(rand.NewPCG(11, 13))
	snap, ws := crashedLog(t, opts, randomSizes(r, 80, testHeader, 500), 80)
	require.NoError(t, os.Remove(filepath.Join(snap, checkpointName))) // full scan
	lastBase := ws[len(ws)-1].at - ws[len(ws)-1].at%seg
	for i := range 60 {
		victim := ws[r.IntN(len(ws))]
		pos := victim.at + Offset(r.IntN(victim.size))
		t.Run(fmt.Sprintf("flip=%d/at=%d", i, pos), func(t *testing.T) {
			dir := copyDir(t, snap)
			defer os.RemoveAll(dir)
			base := pos - pos%seg
			f, err := os.OpenFile(segmentPath(dir, base), os.O_RDWR, 0)
			require.NoError(t, err)
			b := make([]byte, 1)
			_, err = f.ReadAt(b, int64(pos-base))
			require.NoError(t, err)
			b[0] ^= byte(1 + r.IntN(255))
			_, err = f.WriteAt(b, int64(pos-base))
			require.NoError(t, err)
			require.NoError(t, f.Close())

			if base == lastBase {
				p, end := prefixBefore(ws, victim.at)
				checkRecovered(t, dir, opts, p, end)
				return
			}
			l := mustOpen(t, dir, opts)
			defer l.Close()
			info := l.Recovery()
			require.Len(t, info.Corrupt, 1)
			ce := info.Corrupt[0]
			require.Equal(t, segmentName(base), ce.Segment)
			require.Equal(t, int64(victim.at-base), ce.Pos)
			require.Equal(t, ws[len(ws)-1].end(), l.Next(), "later segments are kept")
			// A scanner stops at the bad record with its location.
			s := l.NewScanner(l.Min(), false)
			for s.Scan() {
				at, _ := s.Record()
				require.Less(t, at, victim.at, "the bad record is never returned")
			}
			require.ErrorIs(t, s.Err(), ErrCorrupt)
			require.ErrorContains(t, s.Err(), segmentName(base))
			require.Equal(t, victim.at, s.Pos())
			// Skipping the segment resumes at the next one.
			s.SkipSegment()
			require.True(t, s.Scan())
			at, _ := s.Record()
			require.Equal(t, base+seg, at)
		})
	}
}

func TestRecover_BadCheckpointFallsBackToFullScan(t *testing.T) {
	opts := testOptions(8192)
	r := rand.New(rand.NewPCG(5, 5))
	snap, ws := crashedLog(t, opts, randomSizes(r, 40, testHeader, 400), 20)
	for name, damage := range map[string]func(path string){
		"garbage":  func(p string) { os.WriteFile(p, []byte("not a checkpoint"), 0o644) },
		"bit flip": func(p string) { b, _ := os.ReadFile(p); b[10] ^= 1; os.WriteFile(p, b, 0o644) },
		"past end": func(p string) { os.WriteFile(p, encodeCheckpoint(checkpoint{Next: 1 << 40, Tail: 1<<40 - 100}), 0o644) },
		"wrong rec": func(p string) {
			os.WriteFile(p, encodeCheckpoint(checkpoint{Next: ws[5].end() + 1, Tail: ws[5].at}), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyDir(t, snap)
			damage(filepath.Join(dir, checkpointName))
			l := mustOpen(t, dir, opts)
			info := l.Recovery()
			require.False(t, info.FromCheckpoint)
			require.NotEmpty(t, info.CheckpointProblem)
			require.Equal(t, Offset(0), info.ScanFrom)
			requireRecords(t, l, ws)
			require.NoError(t, l.Close())
		})
	}
}

func TestRecover_SegmentProblems(t *testing.T) {
	opts := testOptions(4096)
	dir := t.TempDir()
	l := mustOpen(t, dir, opts)
	appendSizes(t, l, []int{3000, 3000, 3000, 3000}, 0)
	require.NoError(t, l.Close())

	t.Run("missing middle segment", func(t *testing.T) {
		d := copyDir(t, dir)
		require.NoError(t, os.Remove(segmentPath(d, 4096)))
		_, err := Open(d, opts)
		require.ErrorContains(t, err, "segments missing between")
	})
	t.Run("other segment size", func(t *testing.T) {
		o := opts
		o.SegmentSize = 8192
		_, err := Open(copyDir(t, dir), o)
		require.ErrorContains(t, err, "not aligned")
	})
	t.Run("all segments deleted keeps offsets", func(t *testing.T) {
		d := copyDir(t, dir)
		for _, b := range []Offset{0, 4096, 8192, 12288} {
			require.NoError(t, os.Remove(segmentPath(d, b)))
		}
		l := mustOpen(t, d, opts)
		defer l.Close()
		require.Equal(t, Offset(16384), l.Next(), "new records never reuse old offsets")
		w := appendOne(t, l, 100, 1)
		require.Equal(t, Offset(16384), w.at)
	})
}

// TestValidate_RecoveringFlag: recovery and a Thorough scanner ask
// Validate for its full checks (the store checks body CRCs then), a live
// scanner does not (the records are this process's own, as RocketMQ's
// dispatcher trusts them).
func TestValidate_RecoveringFlag(t *testing.T) {
	opts := testOptions(8192)
	var live, recovering atomic.Int64
	opts.Validate = func(rec []byte, at Offset, rcv bool) error {
		if rcv {
			recovering.Add(1)
		} else {
			live.Add(1)
		}
		return testValidate(rec, at, rcv)
	}
	r := rand.New(rand.NewPCG(3, 3))
	snap, ws := crashedLog(t, opts, randomSizes(r, 40, testHeader, 400), 20)
	live.Store(0)
	recovering.Store(0)
	l := mustOpen(t, snap, opts)
	require.Positive(t, recovering.Load(), "recovery validated the records past its checkpoint")
	require.Zero(t, live.Load())
	recovering.Store(0)
	require.Len(t, scanAll(t, l), len(ws))
	require.Equal(t, int64(len(ws)), live.Load(), "a live scan validated every record")
	require.Zero(t, recovering.Load())
	s := l.NewScanner(l.Min(), false).Thorough()
	for s.Scan() {
	}
	require.NoError(t, s.Err())
	require.Equal(t, int64(len(ws)), recovering.Load(), "a thorough scan asks for the full checks")
	require.NoError(t, l.Close())
}

// TestRecover_TornOlderSegment: a power loss kept a newer segment's
// unsynced writes but lost the end of an older one's (zeros from a record
// to the segment's end). Past the checkpoint that is the torn end of the
// log, not corruption: recovery ends the log at the hole and deletes the
// newer segments, so the log is a prefix of what was written. A bad record
// with records after it in its segment stays corruption (TestRecover_BitFlips).
func TestRecover_TornOlderSegment(t *testing.T) {
	const seg = 8192
	opts := testOptions(seg)
	r := rand.New(rand.NewPCG(17, 19))
	snap, ws := crashedLog(t, opts, randomSizes(r, 80, testHeader, 500), 5)
	lastBase := ws[len(ws)-1].at - ws[len(ws)-1].at%seg
	var older []want // past the checkpoint, not in the last segment
	for _, w := range ws[5:] {
		if w.at < lastBase {
			older = append(older, w)
		}
	}
	require.NotEmpty(t, older)
	for i := range 10 {
		// A record of an older segment past the checkpoint, cut short
		// (torn) or gone entirely, and everything after it in its segment.
		victim := older[r.IntN(len(older))]
		cut := victim.at + Offset(r.IntN(victim.size))
		t.Run(fmt.Sprintf("cut=%d/at=%d", i, cut), func(t *testing.T) {
			dir := copyDir(t, snap)
			base := cut - cut%seg
			f, err := os.OpenFile(segmentPath(dir, base), os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(make([]byte, int(base+seg-cut)), int64(cut-base))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			l := mustOpen(t, dir, opts)
			info := l.Recovery()
			require.NoError(t, l.Close())
			require.Empty(t, info.Corrupt, "a torn end is no corruption")
			require.True(t, info.Truncated)
			// The log is the prefix before the cut: the newer segments'
			// records are gone.
			p, end := prefixBefore(ws, cut)
			checkRecovered(t, dir, opts, p, end)
		})
	}
}
