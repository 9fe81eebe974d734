package keyindex

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden reads index files written by an earlier version (3 slots,
// EntriesPerFile 3: a sealed file with two entries and an active one with
// one). The on-disk format must not change under us.
func TestGolden(t *testing.T) {
	golden := filepath.Join("testdata", "golden")
	if *update {
		require.NoError(t, os.RemoveAll(golden))
		x, err := Open(golden, Options{SlotsPerFile: 3, EntriesPerFile: 3})
		require.NoError(t, err)
		require.NoError(t, x.Put(Key("TopicTest", "A"), 0, t0))
		require.NoError(t, x.Put(Key("TopicTest", "B"), 100, t0+1500))
		require.NoError(t, x.Put(Key("TopicTest", "A"), 200, t0+2500))
		require.NoError(t, x.Close())
	}
	b, err := os.ReadFile(filepath.Join(golden, "00000000000000000000"))
	require.NoError(t, err)
	require.Len(t, b, headerSize+3*slotSize+3*entrySize)
	require.Equal(t, header{beginTs: t0, endTs: t0 + 1500, beginPos: 0, endPos: 100, slots: 3, count: 3}, decodeHeader(b))
	hA, hB := keyHash("TopicTest#A"), keyHash("TopicTest#B")
	entries := b[headerSize+3*slotSize:]
	require.Equal(t, entry{hash: hA, pos: 0, diff: 0, prev: 0}, decodeEntry(entries[1*entrySize:]))
	require.Equal(t, entry{hash: hB, pos: 100, diff: 1, prev: 0}, decodeEntry(entries[2*entrySize:]))

	dir := t.TempDir() // Open repairs and appends; never touch testdata
	copyDir(t, golden, dir)
	x := openIdx(t, dir, 3, 3)
	require.Equal(t, []int64{200, 0}, queryAll(t, x, "TopicTest#A"))
	require.Equal(t, []int64{100}, queryAll(t, x, "TopicTest#B"))
	require.Equal(t, int64(200), x.MaxPos())
}
