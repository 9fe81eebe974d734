package consumequeue

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeClosed writes entries [0, n) of queue T/0 and closes the store.
func writeClosed(t *testing.T, dir string, per int32, n int64) {
	t.Helper()
	s := openTest(t, dir, per, 4)
	putRange(t, mustQueue(t, s, "T", 0), 0, n)
	require.NoError(t, s.Close())
}

// TestRecover_TruncationMatrix cuts the last file at every byte length and
// checks that exactly the whole entries survive and appends continue there.
func TestRecover_TruncationMatrix(t *testing.T) {
	const per, n = 4, 7 // files: 0 (4 entries), 80 (3 entries, 60 bytes)
	for cut := int64(0); cut <= 60; cut++ {
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) {
			dir := t.TempDir()
			writeClosed(t, dir, per, n)
			last := filepath.Join(dir, "T", "0", fileName(80))
			require.NoError(t, os.Truncate(last, cut))

			s := openTest(t, dir, per, 4)
			q := s.Lookup("T", 0)
			want := 4 + cut/EntrySize
			require.Equal(t, want, q.Next())
			requireEntries(t, q, 0, want)
			require.Equal(t, testEntry(want-1).End(), q.LastPos())
			if cut < EntrySize {
				require.NoFileExists(t, last) // empty non-first file removed
			} else {
				require.Equal(t, cut/EntrySize*EntrySize, fileSize(t, last))
			}
			putRange(t, q, want, n+2)
			requireEntries(t, q, 0, n+2)
		})
	}
}

func TestRecover_Tail(t *testing.T) {
	zero := make([]byte, 3*EntrySize)
	tests := []struct {
		name     string
		files    map[int64][]byte // byte offset → contents
		wantMin  int64
		wantNext int64
		wantLeft []string // files left, by name
	}{
		{
			name:     "zeroed preallocated tail",
			files:    map[int64][]byte{0: append(encodeEntries(testEntry(0), testEntry(1)), zero[:2*EntrySize]...)},
			wantNext: 2,
			wantLeft: []string{fileName(0)},
		},
		{
			name:     "zeroed tail plus partial entry",
			files:    map[int64][]byte{0: append(encodeEntries(testEntry(0)), zero[:EntrySize+7]...)},
			wantNext: 1,
			wantLeft: []string{fileName(0)},
		},
		{
			name:     "all zero",
			files:    map[int64][]byte{0: zero},
			wantLeft: []string{fileName(0)},
		},
		{
			name: "invalid size mid-file ends the queue",
			files: map[int64][]byte{
				0:  encodeEntries(testEntry(0), Entry{Pos: 100, Size: -3}, testEntry(2), testEntry(3)),
				80: encodeEntries(testEntry(4)),
			},
			wantNext: 1,
			wantLeft: []string{fileName(0)},
		},
		{
			name: "negative pos mid-file",
			files: map[int64][]byte{
				0: encodeEntries(testEntry(0), testEntry(1), Entry{Pos: -1, Size: 5}, testEntry(3)),
			},
			wantNext: 2,
			wantLeft: []string{fileName(0)},
		},
		{
			name: "position going backwards in the second file",
			files: map[int64][]byte{
				0:  encodeEntries(testEntry(0), testEntry(1), testEntry(2), testEntry(3)),
				80: encodeEntries(testEntry(4), testEntry(1), testEntry(6)),
			},
			wantNext: 5,
			wantLeft: []string{fileName(0), fileName(80)},
		},
		{
			name: "invalid first entry of second file removes it",
			files: map[int64][]byte{
				0:  encodeEntries(testEntry(0), testEntry(1), testEntry(2), testEntry(3)),
				80: encodeEntries(Entry{}, testEntry(5)),
			},
			wantNext: 4,
			wantLeft: []string{fileName(0)},
		},
		{
			name: "short non-last file is a torn roll",
			files: map[int64][]byte{
				0:   encodeEntries(testEntry(0), testEntry(1), testEntry(2)),
				80:  encodeEntries(testEntry(4)),
				160: encodeEntries(testEntry(8)),
			},
			wantNext: 3,
			wantLeft: []string{fileName(0)},
		},
		{
			name: "missing middle file",
			files: map[int64][]byte{
				0:   encodeEntries(testEntry(0), testEntry(1), testEntry(2), testEntry(3)),
				160: encodeEntries(testEntry(8)),
			},
			wantNext: 4,
			wantLeft: []string{fileName(0)},
		},
		{
			name: "RocketMQ blank prefix",
			files: map[int64][]byte{
				0:  encodeEntries(blankEntry, blankEntry, blankEntry, testEntry(3)),
				80: encodeEntries(testEntry(4), testEntry(5)),
			},
			wantMin:  3,
			wantNext: 6,
			wantLeft: []string{fileName(0), fileName(80)},
		},
		{
			name: "blank after the prefix is invalid",
			files: map[int64][]byte{
				0: encodeEntries(blankEntry, testEntry(1), blankEntry, testEntry(3)),
			},
			wantMin:  1,
			wantNext: 2,
			wantLeft: []string{fileName(0)},
		},
		{
			name:     "empty first file at an offset keeps the offset",
			files:    map[int64][]byte{800: nil},
			wantMin:  40,
			wantNext: 40,
			wantLeft: []string{fileName(800)},
		},
		{
			name: "first file after retention, torn tail",
			files: map[int64][]byte{
				800: encodeEntries(testEntry(40), testEntry(41), testEntry(42), testEntry(43)),
				880: append(encodeEntries(testEntry(44)), 1, 2, 3),
			},
			wantMin:  40,
			wantNext: 45,
			wantLeft: []string{fileName(800), fileName(880)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for off, data := range tc.files {
				writeQueueFile(t, dir, "T", "0", off, data)
			}
			s := openTest(t, dir, 4, 4)
			q := s.Lookup("T", 0)
			require.NotNil(t, q)
			require.Equal(t, tc.wantMin, q.Min())
			require.Equal(t, tc.wantNext, q.Next())
			requireEntries(t, q, tc.wantMin, tc.wantNext)
			require.Equal(t, tc.wantLeft, queueFiles(t, dir, "T", "0"))
			// The files hold exactly the surviving entries.
			var total int64
			for _, name := range tc.wantLeft {
				total += fileSize(t, filepath.Join(dir, "T", "0", name))
			}
			first, _ := parseFileName(tc.wantLeft[0])
			require.Equal(t, tc.wantNext*EntrySize-first, total)
			if tc.wantNext > tc.wantMin {
				require.Equal(t, testEntry(tc.wantNext-1).End(), q.LastPos())
			} else {
				require.Equal(t, int64(0), q.LastPos())
			}
			// Appends continue at Next.
			putRange(t, q, tc.wantNext, tc.wantNext+5)
			requireEntries(t, q, tc.wantMin, tc.wantNext+5)
		})
	}
}

func TestRecover_Corrupt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[int64][]byte
	}{
		{"file longer than EntriesPerFile", map[int64][]byte{0: encodeEntries(testEntry(0), testEntry(1), testEntry(2), testEntry(3), testEntry(4))}},
		{"name not aligned to the first file", map[int64][]byte{0: encodeEntries(testEntry(0)), 100: encodeEntries(testEntry(5))}},
		{"name not a multiple of 20", map[int64][]byte{7: nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for off, data := range tc.files {
				writeQueueFile(t, dir, "T", "0", off, data)
			}
			_, err := OpenStore(dir, Options{EntriesPerFile: 4})
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func TestRecover_IgnoresForeignNames(t *testing.T) {
	dir := t.TempDir()
	writeClosed(t, dir, 4, 3)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "T", "0", "x.tmp"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "T", "007"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "T", "-1"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "T", "0", "00000000000000000080"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "Empty", "3"), 0o755))

	s := openTest(t, dir, 4, 4)
	var got []string
	s.Queues(func(topic string, id int32, q *Queue) bool {
		got = append(got, fmt.Sprintf("%s/%d:%d", topic, id, q.Next()))
		return true
	})
	require.Equal(t, []string{"Empty/3:0", "T/0:3"}, got)
	requireEntries(t, s.Lookup("T", 0), 0, 3)
}

// TestRecover_Window checks the scan window (last three files) against the
// end of the file before it.
func TestRecover_Window(t *testing.T) {
	dir := t.TempDir()
	writeClosed(t, dir, 4, 22) // six files
	s := openTest(t, dir, 4, 4)
	q := s.Lookup("T", 0)
	require.Equal(t, int64(22), q.Next())
	requireEntries(t, q, 0, 22)
	require.Len(t, queueFiles(t, dir, "T", "0"), 6)
}
