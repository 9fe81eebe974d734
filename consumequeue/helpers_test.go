package consumequeue

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// testEntry is the entry the tests put at queue offset i: positions grow by
// 100 per offset, so entry i ends at i*100+size <= (i+1)*100.
func testEntry(i int64) Entry {
	return Entry{Pos: i * 100, Size: int32(10 + i%50), TagsCode: i*31 - 7}
}

func openTest(t testing.TB, dir string, per int32, buf int) *Store {
	t.Helper()
	s, err := OpenStore(dir, Options{EntriesPerFile: per, WriteBufferEntries: buf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustQueue(t testing.TB, s *Store, topic string, id int32) *Queue {
	t.Helper()
	q, err := s.Queue(topic, id)
	require.NoError(t, err)
	return q
}

// putRange puts testEntry(i) for i in [from, to).
func putRange(t testing.TB, q *Queue, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		require.NoError(t, q.Put(i, testEntry(i)), "put %d", i)
	}
}

// requireEntries checks that [from, to) reads back as testEntry.
func requireEntries(t testing.TB, q *Queue, from, to int64) {
	t.Helper()
	got, err := q.Read(from, make([]Entry, 0, to-from+3))
	require.NoError(t, err)
	require.Len(t, got, int(to-from))
	for i, e := range got {
		require.Equal(t, testEntry(from+int64(i)), e, "offset %d", from+int64(i))
	}
}

// queueFiles lists the file names of a queue directory.
func queueFiles(t testing.TB, dir, topic string, id string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, topic, id))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// encodeEntries returns the on-disk bytes of entries.
func encodeEntries(es ...Entry) []byte {
	var b []byte
	for _, e := range es {
		b = appendEntry(b, e)
	}
	return b
}

// writeQueueFile writes a raw file into <dir>/<topic>/<id>/.
func writeQueueFile(t testing.TB, dir, topic, id string, byteOff int64, data []byte) string {
	t.Helper()
	qdir := filepath.Join(dir, topic, id)
	require.NoError(t, os.MkdirAll(qdir, 0o755))
	path := filepath.Join(qdir, fileName(byteOff))
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}
