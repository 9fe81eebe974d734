package main

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// histogram is an HDR-style latency histogram: values are kept in
// power-of-two ranges, each split into 64 linear sub-buckets, so every
// recorded value is within 1/64 (1.6%) of its bucket's value, from 1 µs to
// about an hour, in fixed memory.
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
