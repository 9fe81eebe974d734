package keyindex

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIndex_PutQuery(t *testing.T) {
	for _, tc := range []struct {
		name           string
		slots, entries int32
	}{
		{"one slot", 1, 1000},
		{"few slots", 3, 1000},
		{"many slots", 1009, 1000},
		{"roll every 3 entries", 7, 4},
		{"roll every entry", 5, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			x := openIdx(t, dir, tc.slots, tc.entries)
			require.Equal(t, int64(-1), x.MaxPos())
			m := fillKeys(t, x, 50, 7)
			require.Equal(t, int64(49*100), x.MaxPos())
			requireModel(t, x, m, 7)
			require.Empty(t, queryAll(t, x, Key("T", "missing")))
			require.Empty(t, queryAll(t, x, Key("U", "K1")))

			// max caps the result, newest first.
			got, err := x.Query(Key("T", "K3"), 0, 1<<62, 2)
			require.NoError(t, err)
			require.Equal(t, m.want(Key("T", "K3"), 2), got)
			got, err = x.Query(Key("T", "K3"), 0, 1<<62, 0)
			require.NoError(t, err)
			require.Empty(t, got)

			require.NoError(t, x.Close())
			require.NoError(t, x.Close())
			_, err = x.Query(Key("T", "K3"), 0, 1, 1)
			require.ErrorIs(t, err, ErrClosed)
			require.ErrorIs(t, x.Put("k", 1, 1), ErrClosed)

			x2 := openIdx(t, dir, tc.slots, tc.entries)
			require.Equal(t, int64(49*100), x2.MaxPos())
			requireModel(t, x2, m, 7)
			m.put(t, x2, Key("T", "K0"), 50*100, t0+50_000)
			requireModel(t, x2, m, 7)
		})
	}
}

func TestIndex_Roll(t *testing.T) {
	dir := t.TempDir()
	x := openIdx(t, dir, 3, 4)
	m := fillKeys(t, x, 10, 2)
	// 3 entries per file; the Put that fills a file seals it.
	require.Equal(t, []string{fmt.Sprintf("%020d", 0), fmt.Sprintf("%020d", 1), fmt.Sprintf("%020d", 2), fmt.Sprintf("%020d", 3)}, indexFiles(t, dir))
	require.Len(t, x.files, 4)
	require.NotNil(t, x.active)
	require.Equal(t, int32(2), x.active.count) // one entry in the newest file
	sealedSize := int64(headerSize + 3*slotSize + 4*entrySize)
	for _, f := range x.files[:3] {
		require.Nil(t, f.f)
		require.Equal(t, int32(4), f.count)
		require.Equal(t, sealedSize, fileSizeOf(t, f.path))
	}
	requireModel(t, x, m, 2)
}

func TestIndex_Collisions(t *testing.T) {
	// "Aa" and "BB" have the same Java hash: Query returns both, and the
	// caller rechecks the key on the record.
	x := openIdx(t, t.TempDir(), 2, 100)
	require.NoError(t, x.Put("Aa", 100, t0))
	require.NoError(t, x.Put("BB", 200, t0))
	require.NoError(t, x.Put("Ab", 300, t0)) // other hash, maybe same slot
	require.Equal(t, []int64{200, 100}, queryAll(t, x, "Aa"))
	require.Equal(t, []int64{200, 100}, queryAll(t, x, "BB"))
	require.Equal(t, []int64{300}, queryAll(t, x, "Ab"))
}

func TestIndex_TimeRange(t *testing.T) {
	x := openIdx(t, t.TempDir(), 11, 4) // files roll every 3 entries
	// Times are kept in whole seconds since the file's begin timestamp.
	require.NoError(t, x.Put("k", 100, t0))       // file 0 begins at t0
	require.NoError(t, x.Put("k", 200, t0+1500))  // stored as t0+1000
	require.NoError(t, x.Put("k", 300, t0+3999))  // stored as t0+3000
	require.NoError(t, x.Put("k", 400, t0+10000)) // file 1 begins here
	require.NoError(t, x.Put("k", 500, t0-5000))  // clock went back: clamped to t0+10000
	require.NoError(t, x.Put("k", 600, t0+20000))
	for _, tc := range []struct {
		begin, end int64
		want       []int64
	}{
		{t0, t0, []int64{100}},
		{t0 + 1, t0 + 999, nil},
		{t0 + 1000, t0 + 2000, []int64{200}},
		{t0 + 1000, t0 + 3000, []int64{300, 200}},
		{t0 + 3001, t0 + 9999, nil},
		{t0 + 10000, t0 + 10000, []int64{500, 400}},
		{t0 + 5000, t0 + 30000, []int64{600, 500, 400}},
		{0, 1 << 62, []int64{600, 500, 400, 300, 200, 100}},
		{t0 + 30000, t0, nil},
	} {
		t.Run(fmt.Sprintf("%d-%d", tc.begin-t0, tc.end-t0), func(t *testing.T) {
			got, err := x.Query("k", tc.begin, tc.end, 100)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestIndex_RePutIsIgnored(t *testing.T) {
	dir := t.TempDir()
	x := openIdx(t, dir, 5, 4)
	m := fillKeys(t, x, 6, 2)
	// Re-dispatch of earlier records: ignored.
	for i := range 5 {
		require.NoError(t, x.Put(Key("T", fmt.Sprintf("K%d", i%2)), int64(i)*100, t0+int64(i)*1000))
	}
	// The record at MaxPos again (a key not indexed before the crash, and
	// one that was): the repeat is not reported twice.
	require.NoError(t, x.Put(Key("T", "K1"), 500, t0+5000))
	m.put(t, x, Key("T", "K9"), 500, t0+5000)
	requireModel(t, x, m, 10)
	require.ErrorIs(t, x.Put("k", -1, t0), ErrInvalidPos)
}

func TestIndex_DeleteBelowPos(t *testing.T) {
	dir := t.TempDir()
	x := openIdx(t, dir, 5, 4)
	m := fillKeys(t, x, 10, 3) // files: [0,100,200] [300,400,500] [600,700,800] [900]
	for _, tc := range []struct {
		minPos    int64
		wantFiles int
	}{
		{0, 4}, {200, 4}, {201, 3}, {500, 3}, {600, 2}, {801, 1}, {1 << 40, 1},
	} {
		require.NoError(t, x.DeleteBelowPos(tc.minPos), tc.minPos)
		require.Len(t, indexFiles(t, dir), tc.wantFiles, tc.minPos)
	}
	// Only the newest file is left.
	want := model{}
	for k, ps := range m {
		for _, p := range ps {
			if p >= 900 {
				want[k] = append(want[k], p)
			}
		}
	}
	requireModel(t, x, want, 3)
	require.NoError(t, x.Close())
	x2 := openIdx(t, dir, 5, 4)
	requireModel(t, x2, want, 3)
	require.Equal(t, int64(900), x2.MaxPos())
}

func TestIndex_TruncateAfterPos(t *testing.T) {
	const n = 20 // positions 0..1900; 3 entries per file: 7 files
	for _, pos := range []int64{5000, 1901, 1900, 1850, 1800, 1700, 1550, 1500, 301, 100, 1, 0} {
		for _, sync := range []bool{false, true} {
			t.Run(fmt.Sprintf("pos=%d/sync=%v", pos, sync), func(t *testing.T) {
				dir := t.TempDir()
				x := openIdx(t, dir, 5, 4)
				m := fillKeys(t, x, n, 4)
				if sync {
					require.NoError(t, x.Sync())
				}
				require.NoError(t, x.TruncateAfterPos(pos))
				kept := m.below(pos)
				requireModel(t, x, kept, 4)
				wantMax := min(pos-1, (n-1)*100) / 100 * 100
				if pos == 0 {
					wantMax = -1
				}
				require.Equal(t, wantMax, x.MaxPos())

				// Dispatch re-indexes the records from the log end on.
				for i := min(int((pos+99)/100), n); i < n+2; i++ {
					kept.put(t, x, Key("T", fmt.Sprintf("K%d", i%4)), int64(i)*100, t0+int64(i)*1000)
				}
				requireModel(t, x, kept, 4)
				require.NoError(t, x.Close())
				x2 := openIdx(t, dir, 5, 4)
				requireModel(t, x2, kept, 4)
				require.Equal(t, int64((n+1)*100), x2.MaxPos())
			})
		}
	}
}

func TestIndex_Geometry(t *testing.T) {
	// Files keep their own slot count; a newest file of another geometry is
	// sealed on Open and new entries go to a new file.
	dir := t.TempDir()
	x := openIdx(t, dir, 3, 100)
	m := fillKeys(t, x, 5, 2)
	require.NoError(t, x.Close())
	x2 := openIdx(t, dir, 17, 100)
	require.Nil(t, x2.active)
	m.put(t, x2, Key("T", "K0"), 500, t0+5000)
	require.Equal(t, int32(17), x2.active.slots)
	requireModel(t, x2, m, 2)
	require.Len(t, indexFiles(t, dir), 2)
}

func fileSizeOf(t testing.TB, path string) int64 {
	t.Helper()
	return fileLen(t, filepath.Clean(path))
}
