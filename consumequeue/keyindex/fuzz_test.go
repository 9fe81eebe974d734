package keyindex

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds arbitrary bytes as the newest index file, after a valid
// header (or raw), and checks that Open, Query and Put never panic and that
// Put continues after MaxPos.
func FuzzOpen(f *testing.F) {
	var e []byte
	e = appendEntry(e, entry{hash: 1, pos: 10, diff: 0, prev: 0})
	e = appendEntry(e, entry{hash: 4, pos: 20, diff: 1, prev: 1})
	f.Add(append(make([]byte, 3*slotSize+entrySize), e...), true)
	f.Add(e, false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, data []byte, withHeader bool) {
		dir := t.TempDir()
		var file []byte
		if withHeader {
			h := header{beginTs: 1000, endTs: 1000, beginPos: 0, slots: 3, count: 1}
			file = make([]byte, headerSize)
			h.encode(file)
		}
		file = append(file, data...)
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000"), file, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := Open(dir, Options{SlotsPerFile: 3, EntriesPerFile: 1000})
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		for _, key := range []string{"", "a", "b", "c", "d"} {
			if _, err := x.Query(key, 0, 1<<62, 10); err != nil {
				t.Fatal(err)
			}
		}
		pos := max(x.MaxPos(), 0) + 1
		if err := x.Put("zz", pos, 5000); err != nil {
			t.Fatal(err)
		}
		got, err := x.Query("zz", 0, 1<<62, 1)
		if err != nil || len(got) != 1 || got[0] != pos {
			t.Fatalf("query after put: %v %v", got, err)
		}
	})
}
