package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// copyRaw streams src's bytes from the replica's Written() to src's end in
// pieces of random sizes (at most the rest of a segment), as a master's
// replication sender does, checking after each that the replica publishes
// only whole records.
func copyRaw(t *testing.T, src, dst *Log, r *rand.Rand) {
	t.Helper()
	buf := make([]byte, 64<<10)
	for from := max(dst.Written(), src.Min()); from < src.Next(); from = dst.Written() {
		n, err := src.ReadAt(buf[:1+r.IntN(len(buf))], from)
		if err != nil && n == 0 {
			t.Fatalf("read master at %d: %v", from, err)
		}
		require.NoError(t, dst.AppendRaw(from, buf[:n]))
		require.LessOrEqual(t, dst.Next(), dst.Written())
		// Every published byte is a whole record: a scan sees no error.
		sc := dst.NewScanner(dst.Min(), false)
		for sc.Scan() {
		}
		require.NoError(t, sc.Err(), "replica at %d/%d", dst.Next(), dst.Written())
	}
}

func TestAppendRaw_CopyIsByteForByte(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	opts := testOptions(64 << 10)
	master := mustOpen(t, t.TempDir(), opts)
	defer master.Close()
	ws := appendSizes(t, master, randomSizes(r, 400, testHeader, 3000), 7)

	replicaDir := t.TempDir()
	replica := mustOpen(t, replicaDir, opts)
	copyRaw(t, master, replica, r)
	require.Equal(t, master.Next(), replica.Next())
	requireRecords(t, replica, ws)
	// More appends on the master, streamed on: the replica follows.
	ws = append(ws, appendSizes(t, master, randomSizes(r, 200, testHeader, 3000), 8)...)
	copyRaw(t, master, replica, r)
	requireRecords(t, replica, ws)

	// A crash of the replica mid-record: reopened, it ends at the last
	// whole record, and the stream continues from there.
	ws = append(ws, appendSizes(t, master, []int{2000}, 9)...)
	last := ws[len(ws)-1]
	buf := make([]byte, 100)
	n, _ := master.ReadAt(buf, last.at)
	require.NoError(t, replica.AppendRaw(last.at, buf[:n]))
	require.Equal(t, last.at, replica.Next())
	require.Equal(t, last.at+100, replica.Written())
	require.NoError(t, replica.Close())
	replica = mustOpen(t, replicaDir, opts)
	defer replica.Close()
	require.Equal(t, last.at, replica.Written())
	copyRaw(t, master, replica, r)
	requireRecords(t, replica, ws)
	requireSameBytes(t, master, replica)
}

// requireSameBytes compares two logs' bytes over the replica's range.
func requireSameBytes(t *testing.T, master, replica *Log) {
	t.Helper()
	a, b := make([]byte, 4096), make([]byte, 4096)
	for at := replica.Min(); at < replica.Next(); {
		n, _ := master.ReadAt(a, at)
		m, _ := replica.ReadAt(b, at)
		require.Equal(t, n, m, "read sizes at %d", at)
		require.True(t, bytes.Equal(a[:n], b[:m]), "bytes differ at %d", at)
		at += Offset(n)
	}
}

func TestAppendRaw_EmptyReplicaStartsAtMastersMin(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	opts := testOptions(16 << 10)
	master := mustOpen(t, t.TempDir(), opts)
	defer master.Close()
	ws := appendSizes(t, master, randomSizes(r, 100, testHeader, 2000), 1)
	// Retention took the first two segments.
	master.segMu.Lock()
	for _, s := range master.segs[:2] {
		s.close()
	}
	master.segs = master.segs[2:]
	master.min.Store(int64(master.segs[0].base))
	master.segMu.Unlock()
	for len(ws) > 0 && ws[0].at < master.Min() {
		ws = ws[1:]
	}

	replica := mustOpen(t, t.TempDir(), opts)
	defer replica.Close()
	err := replica.AppendRaw(master.Min()+8, []byte{1})
	require.ErrorIs(t, err, ErrRawGap, "an empty replica starts at a segment's start only")
	copyRaw(t, master, replica, r)
	require.Equal(t, master.Min(), replica.Min())
	requireRecords(t, replica, ws)
	require.ErrorIs(t, replica.AppendRaw(replica.Written()+1, []byte{1}), ErrRawGap)
}

func TestAppendRaw_MalformedEnvelopeIsRefused(t *testing.T) {
	opts := testOptions(16 << 10)
	master := mustOpen(t, t.TempDir(), opts)
	defer master.Close()
	ws := appendSizes(t, master, []int{100, 200}, 1)
	replica := mustOpen(t, t.TempDir(), opts)
	defer replica.Close()
	b := make([]byte, 300)
	_, err := master.ReadAt(b, 0)
	require.NoError(t, err)
	binary.BigEndian.PutUint32(b[104:108], 0x12345678) // the second record's MAGICCODE
	err = replica.AppendRaw(0, b)
	var ce *CorruptionError
	require.True(t, errors.As(err, &ce), "got %v", err)
	require.Equal(t, Offset(100), ce.Offset)
	require.Equal(t, ws[0].end(), replica.Next(), "the first record is published")
	require.Equal(t, replica.Next(), replica.Written(), "the refused bytes are dropped")
	// The good bytes continue from there.
	_, err = master.ReadAt(b[:200], 100)
	require.NoError(t, err)
	require.NoError(t, replica.AppendRaw(100, b[:200]))
	requireRecords(t, replica, ws)
}

func TestNextChanged_WakesOnAppend(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(16<<10))
	defer l.Close()
	ch := l.NextChanged()
	select {
	case <-ch:
		t.Fatal("closed before any append")
	default:
	}
	appendOne(t, l, 100, 1)
	<-ch // NB: a hang here fails the test by its timeout
	ch = l.NextChanged()
	appendOne(t, l, 100, 2)
	<-ch
}

func TestOpen_CutAtRecordBoundary(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	opts := testOptions(16 << 10)
	dir := t.TempDir()
	l := mustOpen(t, dir, opts)
	ws := appendSizes(t, l, randomSizes(r, 60, testHeader, 1500), 1)
	require.NoError(t, l.Close())

	// Inside a record: refused, and the log is left whole.
	cut := opts
	cut.Cut, cut.CutAt = true, ws[30].at+1
	_, err := Open(dir, cut)
	require.ErrorIs(t, err, ErrNotBoundary)
	l = mustOpen(t, dir, opts)
	requireRecords(t, l, ws)
	require.NoError(t, l.Close())

	seg := 0 // a record at the start of a segment
	for i, w := range ws {
		if i > 20 && i < 50 && w.at%(16<<10) == 0 {
			seg = i
		}
	}
	require.NotZero(t, seg)
	for _, k := range []int{50, seg, 20, 0} {
		cut.CutAt = ws[k].at
		l = mustOpen(t, dir, cut)
		require.Equal(t, ws[k].at, l.Next())
		requireRecords(t, l, ws[:k])
		// Appends continue from the cut, and survive a reopen.
		ws = append(ws[:k], appendSizes(t, l, []int{100, 2000}, uint64(100+k))...)
		require.NoError(t, l.Close())
		l = mustOpen(t, dir, opts)
		requireRecords(t, l, ws)
		require.NoError(t, l.Close())
	}
}
