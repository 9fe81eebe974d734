package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStore_TruncateAfterPos(t *testing.T) {
	const n = 14 // per=4: files 0, 80, 160, 240 (2 entries)
	tests := []struct {
		name     string
		pos      int64
		wantNext int64
		wantLeft []string
	}{
		{"past the end", testEntry(n-1).End() + 1000, n, []string{fileName(0), fileName(80), fileName(160), fileName(240)}},
		{"exactly the end", testEntry(n - 1).End(), n, []string{fileName(0), fileName(80), fileName(160), fileName(240)}},
		{"inside the last file", testEntry(12).End(), 13, []string{fileName(0), fileName(80), fileName(160), fileName(240)}},
		{"mid third file", testEntry(9).End(), 10, []string{fileName(0), fileName(80), fileName(160)}},
		{"at a file boundary", testEntry(7).End(), 8, []string{fileName(0), fileName(80)}},
		{"one byte short of an entry end", testEntry(7).End() - 1, 7, []string{fileName(0), fileName(80)}},
		{"between two records", testEntry(5).End() + 3, 6, []string{fileName(0), fileName(80)}},
		{"everything", 0, 0, []string{fileName(0)}},
	}
	for _, buf := range []int{1, 32} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("buf=%d/%s", buf, tc.name), func(t *testing.T) {
				dir := t.TempDir()
				s := openTest(t, dir, 4, buf)
				q := mustQueue(t, s, "T", 0)
				putRange(t, q, 0, n)
				other := mustQueue(t, s, "U", 3)
				putRange(t, other, 0, 3)

				require.NoError(t, s.TruncateAfterPos(tc.pos))
				require.Equal(t, tc.wantNext, q.Next())
				require.Equal(t, int64(0), q.Min())
				requireEntries(t, q, 0, tc.wantNext)
				require.Equal(t, tc.wantLeft, queueFiles(t, dir, "T", "0"))
				wantOther := int64(3)
				for wantOther > 0 && testEntry(wantOther-1).End() > tc.pos {
					wantOther--
				}
				require.Equal(t, wantOther, other.Next())
				require.LessOrEqual(t, s.MaxPos(), tc.pos)
				if tc.wantNext > 0 {
					require.Equal(t, testEntry(tc.wantNext-1).End(), q.LastPos())
				}
				// Dispatch continues at the new end.
				putRange(t, q, tc.wantNext, n+3)
				requireEntries(t, q, 0, n+3)
				require.NoError(t, s.Close())

				s2 := openTest(t, dir, 4, buf)
				q2 := s2.Lookup("T", 0)
				require.Equal(t, int64(n+3), q2.Next())
				requireEntries(t, q2, 0, n+3)
			})
		}
	}
}

func TestStore_TruncateAfterPos_QueueAtOffset(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, 4, 4)
	q := mustQueue(t, s, "T", 0)
	putRange(t, q, 50, 57)
	require.NoError(t, s.TruncateAfterPos(0))
	require.Equal(t, int64(50), q.Min())
	require.Equal(t, int64(50), q.Next())
	require.Equal(t, int64(0), q.LastPos())
	require.Equal(t, []string{fileName(1000)}, queueFiles(t, dir, "T", "0"))
	require.NoError(t, s.Close())

	// The kept empty first file preserves the queue's offsets.
	s2 := openTest(t, dir, 4, 4)
	q2 := s2.Lookup("T", 0)
	require.Equal(t, int64(50), q2.Next())
	putRange(t, q2, 50, 52)
	requireEntries(t, q2, 50, 52)
}

func TestStore_DeleteBelowPos(t *testing.T) {
	const n = 14 // per=4: files 0, 80, 160, 240 (2 entries)
	tests := []struct {
		name        string
		minPos      int64
		wantDeleted int
		wantMin     int64
		wantLeft    []string
	}{
		{"nothing", 0, 0, 0, []string{fileName(0), fileName(80), fileName(160), fileName(240)}},
		{"inside the first file", testEntry(1).End(), 0, 2, []string{fileName(0), fileName(80), fileName(160), fileName(240)}},
		{"whole first file", testEntry(3).End(), 1, 4, []string{fileName(80), fileName(160), fileName(240)}},
		{"first file and part of the second", testEntry(5).End(), 1, 6, []string{fileName(80), fileName(160), fileName(240)}},
		{"all but the active file", testEntry(11).End(), 3, 12, []string{fileName(240)}},
		{"everything: active file stays", 1 << 40, 3, n, []string{fileName(240)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, 4, 32)
			q := mustQueue(t, s, "T", 0)
			putRange(t, q, 0, n)

			deleted, err := s.DeleteBelowPos(tc.minPos)
			require.NoError(t, err)
			require.Equal(t, tc.wantDeleted, deleted)
			require.Equal(t, tc.wantMin, q.Min())
			require.Equal(t, int64(n), q.Next())
			require.Equal(t, testEntry(n-1).End(), q.LastPos())
			require.Equal(t, tc.wantLeft, queueFiles(t, dir, "T", "0"))
			requireEntries(t, q, tc.wantMin, n)
			if tc.wantMin > 0 {
				_, err := q.Read(tc.wantMin-1, make([]Entry, 0, 4))
				require.ErrorIs(t, err, ErrOffsetBelowMin)
				_, err = q.Entry(0)
				require.ErrorIs(t, err, ErrOffsetBelowMin)
				// Re-dispatch below Min is a no-op.
				require.NoError(t, q.Put(tc.wantMin-1, Entry{Pos: 1, Size: 1}))
			}
			putRange(t, q, n, n+3)
			require.NoError(t, s.Close())

			// Min after reopen is the first file's start; retention raises it
			// again (the store calls DeleteBelowPos with the commitlog min).
			s2 := openTest(t, dir, 4, 32)
			q2 := s2.Lookup("T", 0)
			first, _ := parseFileName(tc.wantLeft[0])
			require.Equal(t, first/EntrySize, q2.Min())
			_, err = s2.DeleteBelowPos(tc.minPos)
			require.NoError(t, err)
			wantMin := tc.wantMin
			if wantMin == n {
				wantMin = n + 3 // the entries put after the first retention are gone too
			}
			require.Equal(t, wantMin, q2.Min())
			requireEntries(t, q2, wantMin, n+3)
		})
	}
}

func TestStore_SyncWritesAndClosesIdleFiles(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, 4, 32)
	q := mustQueue(t, s, "T", 0)
	putRange(t, q, 0, 3)
	path := filepath.Join(dir, "T", "0", fileName(0))
	require.Equal(t, int64(0), fileSize(t, path)) // still buffered
	requireEntries(t, q, 0, 3)                    // but visible

	require.NoError(t, s.Sync())
	require.Equal(t, int64(3*EntrySize), fileSize(t, path))
	require.NotNil(t, q.segs[0].w)
	require.NoError(t, s.Sync())
	require.NotNil(t, q.segs[0].w)
	require.NoError(t, s.Sync())
	require.Nil(t, q.segs[0].w, "idle active file is closed")
	requireEntries(t, q, 0, 3) // readers open it on demand and cache the handle
	require.NotNil(t, q.segs[0].r.Load())
	require.NoError(t, s.Sync()) // used since the last Sync: kept
	require.NotNil(t, q.segs[0].r.Load())
	require.NoError(t, s.Sync()) // unused: closed
	require.Nil(t, q.segs[0].r.Load())
	putRange(t, q, 3, 9) // the writer reopens its own handle
	require.NotNil(t, q.segs[len(q.segs)-1].w)
	require.NoError(t, s.Sync())
	require.Empty(t, q.pending)
	requireEntries(t, q, 0, 9)
}

func TestQueue_SearchByTime(t *testing.T) {
	times := []int64{5, 10, 10, 10, 20, 30, 30, 40}
	storeTime := func(e Entry) (int64, error) { return times[e.Pos/100], nil }
	s := openTest(t, t.TempDir(), 4, 4)
	q := mustQueue(t, s, "T", 0)

	got, err := q.SearchByTime(100, storeTime)
	require.NoError(t, err)
	require.Equal(t, int64(0), got, "empty queue")

	putRange(t, q, 0, int64(len(times)))
	for _, tc := range []struct{ ts, want int64 }{
		{-1, 0}, {0, 0}, {5, 0}, {6, 1}, {10, 1}, {11, 4}, {20, 4}, {29, 5}, {30, 5}, {31, 7}, {40, 7}, {41, 8}, {1 << 62, 8},
	} {
		t.Run(fmt.Sprint(tc.ts), func(t *testing.T) {
			got, err := q.SearchByTime(tc.ts, storeTime)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	// Before all → Min, also after retention.
	_, err = s.DeleteBelowPos(testEntry(2).End())
	require.NoError(t, err)
	got, err = q.SearchByTime(0, storeTime)
	require.NoError(t, err)
	require.Equal(t, int64(3), got)

	boom := errors.New("record gone")
	_, err = q.SearchByTime(0, func(Entry) (int64, error) { return 0, boom })
	require.ErrorIs(t, err, boom)
}

// TestQueue_EntryCacheAfterTruncate: the cached first entry does not
// outlive a truncation that lets the same index be written again.
func TestQueue_EntryCacheAfterTruncate(t *testing.T) {
	s := openTest(t, t.TempDir(), 4, 1)
	q := mustQueue(t, s, "T", 0)
	putRange(t, q, 0, 6)
	e, err := q.Entry(0)
	require.NoError(t, err)
	require.Equal(t, testEntry(0), e)
	require.NoError(t, s.TruncateAfterPos(0))
	again := Entry{Pos: 7, Size: 33, TagsCode: 1}
	require.NoError(t, q.Put(0, again))
	e, err = q.Entry(0)
	require.NoError(t, err)
	require.Equal(t, again, e)
}

// writeCounter is an opener that counts the writes of every file it opens.
type writeCounter struct{ writes atomic.Int64 }

func (c *writeCounter) open(path string, flag int, perm os.FileMode) (File, error) {
	f, err := OSOpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, c: c}, nil
}

type countedFile struct {
	File
	c *writeCounter
}

func (f *countedFile) WriteAt(p []byte, off int64) (int, error) {
	f.c.writes.Add(1)
	return f.File.WriteAt(p, off)
}

// TestQueue_WriteBufferGrowsWhenBusy: with the default options a queue's
// buffer doubles each time it fills, from 32 entries to 256, so a busy
// queue writes once per 256 Puts; a queue Sync closes for idleness starts
// over at 32; a buffer set by WriteBufferEntries alone stays as set.
func TestQueue_WriteBufferGrowsWhenBusy(t *testing.T) {
	var c writeCounter
	dir := t.TempDir()
	s, err := OpenStore(dir, Options{OpenFile: c.open})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	q := mustQueue(t, s, "T", 0)

	// Full at 32, 64, 128, then every 256: writes after 32, 96, 224, 480,
	// 736 and 992 entries.
	putRange(t, q, 0, 1000)
	require.Equal(t, int64(6), c.writes.Load())
	putRange(t, q, 1000, 1248)
	require.Equal(t, int64(7), c.writes.Load(), "the 1248th entry fills 256 again")
	requireEntries(t, q, 0, 1248)

	// Idle for two Syncs: the writer is closed and the buffer dropped.
	require.NoError(t, s.Sync())
	require.NoError(t, s.Sync())
	require.NoError(t, s.Sync())
	require.Nil(t, q.segs[len(q.segs)-1].w)
	before := c.writes.Load()
	putRange(t, q, 1248, 1280)
	require.Equal(t, before+1, c.writes.Load(), "32 entries fill the buffer of a queue that was idle")
	requireEntries(t, q, 0, 1280)

	var fixed writeCounter
	s2, err := OpenStore(t.TempDir(), Options{WriteBufferEntries: 4, OpenFile: fixed.open})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	putRange(t, mustQueue(t, s2, "T", 0), 0, 400)
	require.Equal(t, int64(100), fixed.writes.Load(), "a set buffer does not grow")
}
