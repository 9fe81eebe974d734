package main

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// histogram is an HDR-style latency histogram in fixed memory, in
// microseconds: values below 64 µs are exact; above, each power-of-two
// range [2^k, 2^(k+1)) is split into 32 linear sub-buckets, so a recorded
// value is at most 1/32 (3.1%) above its bucket's value. The 40 ranges
// reach 2^45 µs (about 407 days); a longer value is counted in the last
// bucket (max keeps it exactly).
type histogram struct {
	mu     sync.Mutex
	counts [40][subBuckets]int64
	total  int64
	max    time.Duration
}

const subBuckets = 64

func bucketOf(us int64) (int, int) {
	if us < subBuckets {
		return 0, int(us)
	}
	e := bits.Len64(uint64(us)) - 6 // us >> e is in [32, 64)
	return e, int(us >> uint(e))
}

func (h *histogram) record(d time.Duration) {
	us := max(d.Microseconds(), 0)
	e, s := bucketOf(us)
	if e >= len(h.counts) {
		e, s = len(h.counts)-1, subBuckets-1
	}
	h.mu.Lock()
	h.counts[e][s]++
	h.total++
	h.max = max(h.max, d)
	h.mu.Unlock()
}

// quantile returns the value at quantile q (0..1).
func (h *histogram) quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.total)))
	var seen int64
	for e := range h.counts {
		for s := range h.counts[e] {
			seen += h.counts[e][s]
			if seen >= rank {
				return time.Duration(int64(s)<<uint(e)) * time.Microsecond
			}
		}
	}
	return h.max
}

func (h *histogram) count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}
