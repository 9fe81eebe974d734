package keyindex

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// crashCopy builds an index with n records (slots 5, 7 entries per file),
// syncs it if asked, and returns a copy of its files taken without Close,
// plus the model and the newest file's name.
func crashCopy(t *testing.T, n int, sync bool) (dir string, m model, newest string) {
	t.Helper()
	live := t.TempDir()
	x := openIdx(t, live, 5, 8)
	m = fillKeys(t, x, n, 3)
	if sync {
		require.NoError(t, x.Sync())
	}
	dir = t.TempDir()
	copyDir(t, live, dir)
	names := indexFiles(t, dir)
	return dir, m, filepath.Join(dir, names[len(names)-1])
}

// TestRecover_TruncationMatrix cuts the newest file at every length: the
// index keeps exactly the whole entries before the cut.
func TestRecover_TruncationMatrix(t *testing.T) {
	const n = 10 // file 0: 7 entries (sealed), file 1: 3 entries
	_, _, newest := crashCopy(t, n, true)
	full := fileLen(t, newest)
	start := int64(headerSize + 5*slotSize + entrySize) // entry 1
	for cut := int64(0); cut <= full; cut++ {
		if cut > headerSize && cut < start-2 {
			continue // inside the slot hole: same as cut=start-1
		}
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir, m, newest := crashCopy(t, n, true)
			require.NoError(t, os.Truncate(newest, cut))
			x := openIdx(t, dir, 5, 8)
			whole := max(0, (cut-start)/entrySize) // entries of file 1 left
			kept := m.below(int64(7+whole) * 100)
			requireModel(t, x, kept, 3)
			require.Equal(t, (6+whole)*100, x.MaxPos())
			if whole == 0 {
				require.NoFileExists(t, newest)
			} else {
				require.Equal(t, start+whole*entrySize, fileLen(t, newest))
			}
			// Re-dispatch from the checkpoint: already indexed records are
			// skipped, the rest indexed again.
			for i := 5; i < n+1; i++ {
				pos := int64(i) * 100
				if pos >= x.MaxPos() {
					kept.put(t, x, Key("T", fmt.Sprintf("K%d", i%3)), pos, t0+int64(i)*1000)
				} else {
					require.NoError(t, x.Put(Key("T", fmt.Sprintf("K%d", i%3)), pos, t0+int64(i)*1000))
				}
			}
			requireModel(t, x, kept, 3)
		})
	}
}

func TestRecover_Damage(t *testing.T) {
	const n = 10
	entryAt := func(k int) int64 { return int64(headerSize + 5*slotSize + k*entrySize) }
	for _, tc := range []struct {
		name   string
		sync   bool
		damage func(t *testing.T, dir, newest string)
		kept   int64 // records 0..kept-1 survive
	}{
		{"unsynced buffer is lost", false, func(*testing.T, string, string) {}, 7},
		{"synced, no damage", true, func(*testing.T, string, string) {}, 10},
		{"zeroed entry", true, func(t *testing.T, _, newest string) {
			writeAt(t, newest, entryAt(2), make([]byte, entrySize))
		}, 8},
		{"stale entry copied over", true, func(t *testing.T, _, newest string) {
			b := readAt(t, newest, entryAt(1), entrySize)
			writeAt(t, newest, entryAt(3), b)
		}, 9},
		{"random bytes", true, func(t *testing.T, _, newest string) {
			writeAt(t, newest, entryAt(2)+3, []byte{0x13, 0x57, 0x9b, 0xdf, 0x11})
		}, 8},
		{"prevIndex not the slot head", true, func(t *testing.T, _, newest string) {
			writeAt(t, newest, entryAt(3)+16, []byte{0, 0, 0, 2})
		}, 9},
		{"zeroed header", true, func(t *testing.T, _, newest string) {
			writeAt(t, newest, 0, make([]byte, headerSize))
		}, 7},
		{"garbage header counters are ignored", true, func(t *testing.T, _, newest string) {
			writeAt(t, newest, hEndTs, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			writeAt(t, newest, hCount, []byte{0x7f, 0xff, 0xff, 0xff})
		}, 10},
		{"empty newest file", true, func(t *testing.T, _, newest string) {
			require.NoError(t, os.Truncate(newest, 0))
		}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, m, newest := crashCopy(t, n, tc.sync)
			tc.damage(t, dir, newest)
			x := openIdx(t, dir, 5, 8)
			// As the store does after commitlog recovery: this also drops
			// a damaged entry whose position looks too large.
			require.NoError(t, x.TruncateAfterPos(n*100))
			requireModel(t, x, m.below(tc.kept*100), 3)
			require.Equal(t, (tc.kept-1)*100, x.MaxPos())
			m2 := m.below(tc.kept * 100)
			m2.put(t, x, Key("T", "K0"), 5000, t0+50_000)
			requireModel(t, x, m2, 3)
		})
	}
}

// TestRecover_DamagedSealedFile damages a sealed (trusted) file: queries
// must not panic or loop, and a truncated copy or a scrambled slot table
// must not make them return positions never indexed under the key. Random
// bytes in an entry (bit rot) can forge a plausible position: the format
// has no checksum, and callers recheck the key on the record anyway.
func TestRecover_DamagedSealedFile(t *testing.T) {
	const n = 20 // files of 7 entries: two sealed, one active
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 200 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			live := t.TempDir()
			x := openIdx(t, live, 5, 8)
			m := fillKeys(t, x, n, 3)
			require.NoError(t, x.Close())
			sealed := filepath.Join(live, fmt.Sprintf("%020d", rng.IntN(2)))
			size := fileLen(t, sealed)
			switch round % 3 {
			case 0: // truncated copy
				require.NoError(t, os.Truncate(sealed, rng.Int64N(size)))
			case 1: // random bytes anywhere
				off := rng.Int64N(size)
				b := make([]byte, 1+rng.IntN(24))
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				writeAt(t, sealed, off, b[:min(int64(len(b)), size-off)])
			case 2: // random slot table
				b := make([]byte, 5*slotSize)
				for i := range b {
					b[i] = byte(rng.IntN(9))
				}
				writeAt(t, sealed, headerSize, b)
			}
			x2, err := Open(live, Options{SlotsPerFile: 5, EntriesPerFile: 8})
			require.NoError(t, err)
			defer x2.Close()
			for k := range 3 {
				key := Key("T", fmt.Sprintf("K%d", k))
				got, err := x2.Query(key, 0, 1<<62, 100)
				if err != nil {
					continue // a read error on a damaged file is fine
				}
				if round%3 == 1 {
					continue
				}
				for _, p := range got {
					require.True(t, slices.Contains(m[key], p), "%s: %d never indexed", key, p)
				}
			}
		})
	}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

func readAt(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	return b
}
