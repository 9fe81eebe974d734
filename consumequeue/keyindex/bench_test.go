package keyindex

import (
	"strconv"
	"testing"
)

func BenchmarkIndexPut(b *testing.B) {
	x := openIdx(b, b.TempDir(), DefaultSlotsPerFile, DefaultEntriesPerFile)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = Key("TopicTest", "ORDER-"+strconv.Itoa(i*7919))
	}
	b.ReportAllocs()
	var i int64
	for b.Loop() {
		if err := x.Put(keys[i&4095], i*200, t0+i); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkIndexQuery(b *testing.B) {
	x := openIdx(b, b.TempDir(), 1<<14, 1<<17)
	for i := range int64(200_000) { // two sealed files and an active one
		if err := x.Put(Key("TopicTest", "ORDER-"+strconv.FormatInt(i%5000, 10)), i*200, t0+i); err != nil {
			b.Fatal(err)
		}
	}
	key := Key("TopicTest", "ORDER-42")
	b.ReportAllocs()
	for b.Loop() {
		got, err := x.Query(key, 0, 1<<62, 32)
		if err != nil || len(got) != 32 {
			b.Fatal(err, len(got))
		}
	}
}
