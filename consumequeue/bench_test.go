package consumequeue

import (
	"fmt"
	"testing"
)

// BenchmarkQueuePut measures the dispatcher's append. buf=1 is one pwrite
// per Put, buf=32 a fixed buffer of 32 entries per write, default the
// buffer that grows to 256 entries on a busy queue.
func BenchmarkQueuePut(b *testing.B) {
	for _, buf := range []int{1, DefaultWriteBufferEntries, 0} {
		name := fmt.Sprintf("buf=%d", buf)
		if buf == 0 {
			name = "default"
		}
		b.Run(name, func(b *testing.B) {
			s := openTest(b, b.TempDir(), DefaultEntriesPerFile, buf)
			q := mustQueue(b, s, "T", 0)
			b.ReportAllocs()
			b.SetBytes(EntrySize)
			var i int64
			for b.Loop() {
				if err := q.Put(i, Entry{Pos: i * 100, Size: 100, TagsCode: 7}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkQueueRead32 reads 32 entries per call: from the open active
// file, from a sealed file (opened per call), and from the write buffer.
func BenchmarkQueueRead32(b *testing.B) {
	const per = 4096
	for _, tc := range []struct {
		name string
		from func(next int64) int64
	}{
		{"active", func(next int64) int64 { return next - 1000 }},
		{"sealed", func(int64) int64 { return 100 }},
		{"buffered", func(next int64) int64 { return next - 20 }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := openTest(b, b.TempDir(), per, 64)
			q := mustQueue(b, s, "T", 0)
			for i := range int64(per + 3000) {
				if err := q.Put(i, Entry{Pos: i * 100, Size: 100}); err != nil {
					b.Fatal(err)
				}
			}
			from := tc.from(q.Next())
			dst := make([]Entry, 0, 32)
			b.ReportAllocs()
			for b.Loop() {
				got, err := q.Read(from, dst)
				if err != nil || len(got) == 0 {
					b.Fatal(err, len(got))
				}
			}
		})
	}
}
