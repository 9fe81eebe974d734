package consumequeue

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenEntries are stored in testdata/golden/TopicTest/0: two files of
// EntriesPerFile=2 (spec §7.3 layout, big-endian).
var goldenEntries = []Entry{
	{Pos: 0, Size: 180, TagsCode: 2598919},           // "TagA"
	{Pos: 180, Size: 181, TagsCode: 0},               // no tag
	{Pos: 1073741824, Size: 4194304, TagsCode: -123}, // second commitlog segment
}

// TestGolden decodes files written by an earlier version: the on-disk
// format must not change under us.
func TestGolden(t *testing.T) {
	golden := filepath.Join("testdata", "golden")
	if *update {
		require.NoError(t, os.RemoveAll(golden))
		s, err := OpenStore(golden, Options{EntriesPerFile: 2})
		require.NoError(t, err)
		q, err := s.Queue("TopicTest", 0)
		require.NoError(t, err)
		for i, e := range goldenEntries {
			require.NoError(t, q.Put(int64(i), e))
		}
		require.NoError(t, s.Close())
	}
	first, err := os.ReadFile(filepath.Join(golden, "TopicTest", "0", fileName(0)))
	require.NoError(t, err)
	require.Equal(t, []byte{
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 180, 0, 0, 0, 0, 0, 0x27, 0xa8, 0x07,
		0, 0, 0, 0, 0, 0, 0, 180, 0, 0, 0, 181, 0, 0, 0, 0, 0, 0, 0, 0,
	}, first)

	dir := t.TempDir() // Open may repair; never touch testdata
	copyTree(t, golden, dir)
	s := openTest(t, dir, 2, 4)
	q := s.Lookup("TopicTest", 0)
	require.NotNil(t, q)
	got, err := q.Read(0, make([]Entry, 0, 8))
	require.NoError(t, err)
	require.Equal(t, goldenEntries, got)
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	}))
}
