package commitlog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fillBatch encodes records of the given sizes back to back, as a batch
// send does (one Append of their total size).
func fillBatch(sizes []int, seed0 uint64) func(at Offset, dst []byte) error {
	return func(at Offset, dst []byte) error {
		p := 0
		for i, sz := range sizes {
			if err := fillTest(seed0+uint64(i))(at+Offset(p), dst[p:p+sz]); err != nil {
				return err
			}
			p += sz
		}
		return nil
	}
}

// appendBatches appends n batches of 2 to 32 records, returning each record.
func appendBatches(t testing.TB, l *Log, r *rand.Rand, n int, seed0 uint64) []want {
	t.Helper()
	var ws []want
	seed := seed0
	for range n {
		sizes := randomSizes(r, 2+r.IntN(31), testHeader, 300)
		total := 0
		for _, sz := range sizes {
			total += sz
		}
		at, err := l.Append(total, fillBatch(sizes, seed))
		require.NoError(t, err)
		for i, sz := range sizes {
			ws = append(ws, want{at: at, size: sz, seed: seed + uint64(i)})
			at += Offset(sz)
		}
		seed += uint64(len(sizes))
	}
	return ws
}

// A checkpoint taken after a batch append names a record that ends where
// the checkpoint does, so recovery after a crash starts from it. It named
// the batch's first record and was thrown away ("has TOTALSIZE 1193, want
// 152704"): every crash with batch producers rescanned the whole log.
func TestRecover_CheckpointAfterBatches(t *testing.T) {
	opts := testOptions(64 << 10)
	r := rand.New(rand.NewPCG(7, 11))

	t.Run("saved by Close", func(t *testing.T) {
		dir := t.TempDir()
		o := opts
		o.CheckpointInterval = time.Hour // only Close saves one
		l := mustOpen(t, dir, o)
		ws := appendBatches(t, l, r, 40, 0)
		cpEnd := l.Next()
		require.NoError(t, l.Close())
		l = mustOpen(t, dir, o)
		require.True(t, l.Recovery().Clean)
		ws = append(ws, appendBatches(t, l, r, 10, 1<<20)...)
		require.NoError(t, l.WaitDurableNow(context.Background(), l.Next()))
		snap := copyDir(t, dir) // NB: as a kill -9 leaves it: abort file, checkpoint of the Close
		require.NoError(t, l.Close())

		l = mustOpen(t, snap, o)
		info := l.Recovery()
		require.False(t, info.Clean)
		require.True(t, info.FromCheckpoint, info.CheckpointProblem)
		require.Empty(t, info.CheckpointProblem)
		require.Equal(t, cpEnd, info.ScanFrom)
		require.Equal(t, int64(ws[len(ws)-1].end()-cpEnd), info.Scanned)
		requireRecords(t, l, ws)
		require.NoError(t, l.Close())
	})

	t.Run("saved by the flusher", func(t *testing.T) {
		dir := t.TempDir()
		o := opts
		o.CheckpointInterval = time.Nanosecond // every fsync saves one
		l := mustOpen(t, dir, o)
		ws := appendBatches(t, l, r, 60, 0)
		end := l.Next()
		require.NoError(t, l.WaitDurableNow(context.Background(), end))
		var cp checkpoint
		require.Eventually(t, func() bool { // NB: saved after the fsync's waiters are woken
			c, ok, err := readCheckpoint(dir)
			cp = c
			return err == nil && ok && c.Next == end
		}, 10*time.Second, time.Millisecond)
		snap := copyDir(t, dir)
		require.NoError(t, l.Close())

		l = mustOpen(t, snap, o)
		info := l.Recovery()
		require.False(t, info.Clean)
		require.True(t, info.FromCheckpoint, info.CheckpointProblem)
		require.Equal(t, cp.Next, info.ScanFrom)
		requireRecords(t, l, ws)
		require.NoError(t, l.Close())
	})
}

// A checkpoint of an earlier version names a batch's first record: recovery
// checks each record of the batch up to the checkpoint's end and uses it,
// and refuses it, saying why, when one of them is damaged.
func TestRecover_CheckpointNamingABatchsFirstRecord(t *testing.T) {
	opts := testOptions(64 << 10)
	opts.CheckpointInterval = time.Hour
	r := rand.New(rand.NewPCG(3, 5))
	dir := t.TempDir()
	l := mustOpen(t, dir, opts)
	ws := appendBatches(t, l, r, 20, 0)
	sizes := []int{100, 200, 300, 400}
	at, err := l.Append(1000, fillBatch(sizes, 1<<30))
	require.NoError(t, err)
	for i, sz := range sizes {
		ws = append(ws, want{at: at, size: sz, seed: 1<<30 + uint64(i)})
		at += Offset(sz)
	}
	end := l.Next()
	require.NoError(t, l.WaitDurableNow(context.Background(), end))
	snap := copyDir(t, dir)
	require.NoError(t, l.Close())
	old := encodeCheckpoint(checkpoint{Next: end, Tail: end - 1000, SavedAt: time.Now()})
	require.NoError(t, os.WriteFile(filepath.Join(snap, checkpointName), old, 0o644))
	damaged := copyDir(t, snap)

	l = mustOpen(t, snap, opts)
	info := l.Recovery()
	require.True(t, info.FromCheckpoint, info.CheckpointProblem)
	require.Equal(t, end, info.ScanFrom)
	requireRecords(t, l, ws)
	require.NoError(t, l.Close())

	// The batch's third record loses a byte of its payload.
	third := end - 700 + testHeader
	f, err := os.OpenFile(segmentPath(damaged, third-third%Offset(opts.SegmentSize)), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff ^ ws[len(ws)-2].bytes()[testHeader]}, int64(third%Offset(opts.SegmentSize)))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	l = mustOpen(t, damaged, opts)
	info = l.Recovery()
	require.False(t, info.FromCheckpoint)
	require.Contains(t, info.CheckpointProblem, fmt.Sprintf("checkpoint record at %d invalid", end-700))
	require.NoError(t, l.Close())
}
