package consumequeue

import (
	"errors"
	"testing"
)

// FuzzOpen writes arbitrary bytes as a queue's first two files and checks
// that recovery never panics, either rejects the geometry (ErrCorrupt) or
// yields a queue whose entries are all valid, and that appends continue.
func FuzzOpen(f *testing.F) {
	full := encodeEntries(testEntry(0), testEntry(1), testEntry(2), testEntry(3))
	f.Add(full, encodeEntries(testEntry(4)), uint8(0))
	f.Add(full[:47], []byte{}, uint8(1))
	f.Add(encodeEntries(blankEntry, testEntry(1)), []byte{0, 0, 0}, uint8(2))
	f.Add(full, encodeEntries(Entry{Pos: 1, Size: 1}), uint8(3))
	f.Fuzz(func(t *testing.T, a, b []byte, start uint8) {
		dir := t.TempDir()
		base := int64(start%8) * 4 * EntrySize
		writeQueueFile(t, dir, "T", "0", base, a)
		if len(b) > 0 {
			writeQueueFile(t, dir, "T", "0", base+4*EntrySize, b)
		}
		s, err := OpenStore(dir, Options{EntriesPerFile: 4})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		defer s.Close()
		q := s.Lookup("T", 0)
		if q.Min() > q.Next() || q.Min() < base/EntrySize {
			t.Fatalf("min %d next %d base %d", q.Min(), q.Next(), base/EntrySize)
		}
		got, err := q.Read(q.Min(), make([]Entry, 0, 16))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != q.Next()-q.Min() {
			t.Fatalf("read %d entries, want %d", len(got), q.Next()-q.Min())
		}
		var prev int64
		for _, e := range got {
			if !validEntry(e, prev) {
				t.Fatalf("invalid entry survived recovery: %+v after %d", e, prev)
			}
			prev = e.End()
		}
		if len(got) > 0 && q.LastPos() != prev {
			t.Fatalf("LastPos %d, want %d", q.LastPos(), prev)
		}
		next := q.Next()
		e := Entry{Pos: q.LastPos() + 5, Size: 3, TagsCode: 1}
		if err := q.Put(next, e); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2, err := OpenStore(dir, Options{EntriesPerFile: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		if q2 := s2.Lookup("T", 0); q2.Next() != next+1 {
			t.Fatalf("after reopen next %d, want %d", q2.Next(), next+1)
		}
	})
}
