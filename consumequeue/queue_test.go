package consumequeue

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEntry_EncodeDecode(t *testing.T) {
	for _, e := range []Entry{
		{},
		{Pos: 1, Size: 2, TagsCode: 3},
		{Pos: 1<<62 + 5, Size: 1<<31 - 1, TagsCode: -1},
		{Pos: -1, Size: -1, TagsCode: -1 << 63},
		blankEntry,
	} {
		b := appendEntry(nil, e)
		require.Len(t, b, EntrySize)
		require.Equal(t, e, getEntry(b))
		var c [EntrySize]byte
		putEntry(c[:], e)
		require.Equal(t, b, c[:])
	}
	// Big-endian layout, spec §7.3.
	b := appendEntry(nil, Entry{Pos: 0x0102030405060708, Size: 0x090a0b0c, TagsCode: 0x0d0e0f1011121314})
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, b)
}

func TestFileName(t *testing.T) {
	for _, tc := range []struct {
		off  int64
		name string
	}{
		{0, "00000000000000000000"},
		{6_000_000, "00000000000006000000"},
		{1<<63 - 1, "09223372036854775807"},
	} {
		require.Equal(t, tc.name, fileName(tc.off))
		got, ok := parseFileName(tc.name)
		require.True(t, ok)
		require.Equal(t, tc.off, got)
	}
	for _, bad := range []string{"", "0", "0000000000000000000a", "000000000000000000000", "99999999999999999999", "-0000000000000000001"} {
		_, ok := parseFileName(bad)
		require.False(t, ok, bad)
	}
}

func TestQueue_PutReadAcrossFiles(t *testing.T) {
	for _, buf := range []int{1, 3, 32} {
		for _, n := range []int64{0, 1, 3, 4, 5, 8, 13} {
			t.Run(fmt.Sprintf("buf=%d/n=%d", buf, n), func(t *testing.T) {
				dir := t.TempDir()
				s := openTest(t, dir, 4, buf)
				q := mustQueue(t, s, "T", 0)
				putRange(t, q, 0, n)
				require.Equal(t, n, q.Next())
				require.Equal(t, int64(0), q.Min())
				for from := int64(0); from <= n; from++ {
					requireEntries(t, q, from, n)
				}
				// A small dst caps the read.
				if n >= 3 {
					got, err := q.Read(1, make([]Entry, 1, 2))
					require.NoError(t, err)
					require.Equal(t, []Entry{testEntry(1), testEntry(2)}, got)
				}
				got, err := q.Read(n+5, make([]Entry, 0, 4))
				require.NoError(t, err)
				require.Empty(t, got)
				if n > 0 {
					require.Equal(t, testEntry(n-1).End(), q.LastPos())
					e, err := q.Entry(n - 1)
					require.NoError(t, err)
					require.Equal(t, testEntry(n-1), e)
				}
				_, err = q.Entry(n)
				require.ErrorIs(t, err, ErrOffsetOverflow)

				require.NoError(t, s.Close())
				want := (n + 3) / 4
				if n == 0 {
					require.NoDirExists(t, dir+"/T/0") // made lazily by the first Put
					return
				}
				require.Len(t, queueFiles(t, dir, "T", "0"), int(want))
				s2 := openTest(t, dir, 4, buf)
				q2 := s2.Lookup("T", 0)
				require.NotNil(t, q2)
				require.Equal(t, n, q2.Next())
				requireEntries(t, q2, 0, n)
				putRange(t, q2, n, n+6)
				requireEntries(t, q2, 0, n+6)
			})
		}
	}
}

func TestQueue_RePut(t *testing.T) {
	s := openTest(t, t.TempDir(), 4, 8)
	q := mustQueue(t, s, "T", 1)
	putRange(t, q, 0, 10)
	// Re-dispatch of entries already indexed is a no-op, in files and in
	// the write buffer alike.
	putRange(t, q, 0, 10)
	require.Equal(t, int64(10), q.Next())

	for _, tc := range []struct {
		name  string
		index int64
		e     Entry
		want  error
	}{
		{"mismatch in file", 1, Entry{Pos: 100, Size: 11, TagsCode: 1}, ErrMismatch},
		{"mismatch in buffer", 9, Entry{Pos: 1, Size: 1}, ErrMismatch},
		{"gap", 11, testEntry(11), ErrGap},
		{"far gap", 1000, testEntry(1000), ErrGap},
		{"negative size", 10, Entry{Pos: 2000, Size: -1}, ErrInvalidEntry},
		{"zero size", 10, Entry{Pos: 2000}, ErrInvalidEntry},
		{"negative pos", 10, Entry{Pos: -5, Size: 1}, ErrInvalidEntry},
		{"position going backwards", 10, Entry{Pos: 905, Size: 1}, ErrInvalidEntry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, q.Put(tc.index, tc.e), tc.want)
			require.Equal(t, int64(10), q.Next())
		})
	}
	putRange(t, q, 10, 12)
	requireEntries(t, q, 0, 12)
}

func TestQueue_StartAtOffset(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, 4, 2)
	q := mustQueue(t, s, "T", 0)
	// A queue that never held an entry may start anywhere (rebuild from a
	// commitlog whose head was deleted).
	putRange(t, q, 1001, 1011)
	require.Equal(t, int64(1001), q.Min())
	require.Equal(t, int64(1011), q.Next())
	requireEntries(t, q, 1001, 1011)
	_, err := q.Read(1000, make([]Entry, 0, 4))
	require.ErrorIs(t, err, ErrOffsetBelowMin)
	require.NoError(t, q.Put(1005, testEntry(1005)))
	require.ErrorIs(t, q.Put(1012, testEntry(1012)), ErrGap)
	require.NoError(t, s.Close())

	require.Equal(t, []string{fileName(1001 * 20), fileName(1005 * 20), fileName(1009 * 20)}, queueFiles(t, dir, "T", "0"))
	s2 := openTest(t, dir, 4, 2)
	q2 := s2.Lookup("T", 0)
	require.Equal(t, int64(1001), q2.Min())
	require.Equal(t, int64(1011), q2.Next())
	requireEntries(t, q2, 1001, 1011)
}

func TestStore_QueueNames(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, 4, 1)
	for _, tc := range []struct {
		topic string
		id    int32
		ok    bool
	}{
		{"TopicTest", 0, true},
		{"%RETRY%group-1", 7, true},
		{"a|b_c-d", 2147483647, true},
		{"", 0, false},
		{".", 0, false},
		{"..", 0, false},
		{"a/b", 0, false},
		{`a\b`, 0, false},
		{"a\x00", 0, false},
		{"T", -1, false},
	} {
		t.Run(tc.topic+"/"+strconv.Itoa(int(tc.id)), func(t *testing.T) {
			q, err := s.Queue(tc.topic, tc.id)
			if !tc.ok {
				require.ErrorIs(t, err, ErrInvalidName)
				return
			}
			require.NoError(t, err)
			require.NoError(t, q.Put(0, testEntry(0)))
			again, err := s.Queue(tc.topic, tc.id)
			require.NoError(t, err)
			require.Same(t, q, again)
		})
	}
	require.Nil(t, s.Lookup("missing", 0))
	var seen []string
	s.Queues(func(topic string, id int32, q *Queue) bool {
		seen = append(seen, fmt.Sprintf("%s/%d", topic, id))
		return true
	})
	require.Equal(t, []string{"%RETRY%group-1/7", "TopicTest/0", "a|b_c-d/2147483647"}, seen)
	require.NoError(t, s.Close())

	s2 := openTest(t, dir, 4, 1)
	n := 0
	s2.Queues(func(string, int32, *Queue) bool { n++; return false })
	require.Equal(t, 1, n)
	require.Equal(t, int64(1), s2.Lookup("a|b_c-d", 2147483647).Next())
}

func TestStore_Closed(t *testing.T) {
	s := openTest(t, t.TempDir(), 4, 4)
	q := mustQueue(t, s, "T", 0)
	putRange(t, q, 0, 3)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	require.ErrorIs(t, q.Put(3, testEntry(3)), ErrClosed)
	_, err := q.Read(0, make([]Entry, 0, 4))
	require.ErrorIs(t, err, ErrClosed)
	_, err = q.Entry(0)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Queue("T", 1)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Sync(), ErrClosed)
	require.ErrorIs(t, s.TruncateAfterPos(0), ErrClosed)
	_, err = s.DeleteBelowPos(0)
	require.ErrorIs(t, err, ErrClosed)
	require.True(t, errors.Is(err, ErrClosed))
}

func TestStore_MaxPos(t *testing.T) {
	s := openTest(t, t.TempDir(), 4, 4)
	require.Equal(t, int64(0), s.MaxPos())
	putRange(t, mustQueue(t, s, "A", 0), 0, 3)
	putRange(t, mustQueue(t, s, "B", 0), 0, 7)
	putRange(t, mustQueue(t, s, "B", 1), 0, 5)
	require.Equal(t, testEntry(6).End(), s.MaxPos())
}

// The catch-up after a crash puts again, in order, entries already stored:
// each is compared with what is stored (read ahead a block at a time), a
// mismatch deep in a block is found, and a truncation forgets what was
// read ahead.
func TestQueue_RePutReadsAhead(t *testing.T) {
	s := openTest(t, t.TempDir(), 100, 8)
	q := mustQueue(t, s, "T", 0)
	putRange(t, q, 0, 1000)
	putRange(t, q, 0, 1000)
	require.Equal(t, int64(1000), q.Next())
	putRange(t, q, 0, 500)
	bad := testEntry(501)
	bad.TagsCode++
	require.ErrorIs(t, q.Put(501, bad), ErrMismatch)
	require.NoError(t, q.Put(500, testEntry(500)))

	// The read-ahead block holds 600..799; the queue is cut at 700 and
	// refilled with other entries: they are compared with the new ones.
	putRange(t, q, 600, 650)
	require.NoError(t, s.TruncateAfterPos(testEntry(699).End()))
	require.Equal(t, int64(700), q.Next())
	moved := func(i int64) Entry { e := testEntry(i); e.Pos += 10_000_000; return e }
	for i := int64(700); i < 720; i++ {
		require.NoError(t, q.Put(i, moved(i)))
	}
	require.NoError(t, q.Put(710, moved(710)))
	require.ErrorIs(t, q.Put(711, testEntry(711)), ErrMismatch)
}
