package remoting

import "runtime/metrics"

// bytesAllocated returns about how many heap bytes f allocated. It reads
// the cumulative allocation counter, so a GC during f hides nothing; small
// objects are counted a span at a time and other goroutines' allocations
// can only inflate the number. (runtime/metrics, unlike ReadMemStats, does
// not stop the world: cheap enough for every fuzz execution.)
func bytesAllocated(f func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}
