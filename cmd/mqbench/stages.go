package main

import (
	"math"
	"runtime/metrics"
	"time"
)

// Stages breaks an e2e run's latency down: the part before the broker's
// store timestamp and the part after it (that timestamp is in ms, so each
// part is off by up to 1 ms), and what mqbench's own runtime cost, its
// producers and consumers sharing the process: stop-the-world GC pauses
// and how long runnable goroutines waited for a thread (a 2-core machine
// shared with the broker makes these a part of every tail).
type Stages struct {
	ToStoreP99    float64 `json:"to_store_p99_ms"`
	ToStoreP999   float64 `json:"to_store_p999_ms"`
	ToStoreMax    float64 `json:"to_store_max_ms"`
	FromStoreP99  float64 `json:"from_store_p99_ms"`
	FromStoreP999 float64 `json:"from_store_p999_ms"`
	FromStoreMax  float64 `json:"from_store_max_ms"`
	GCPauses      uint64  `json:"client_gc_pauses"`
	GCPauseMax    float64 `json:"client_gc_pause_max_ms"`
	SchedP99      float64 `json:"client_sched_latency_p99_ms"`
	SchedP999     float64 `json:"client_sched_latency_p999_ms"`
	// Stale counts the messages of an earlier run to the same topic
	// delivered during this one, left out of every figure.
	Stale int64 `json:"stale_messages,omitempty"`
}

// The runtime's histograms read at the start and the end of a run.
var runtimeSamples = []string{"/sched/pauses/total/gc:seconds", "/sched/latencies:seconds"}

func readRuntime() []metrics.Sample {
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, name := range runtimeSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	return s
}

func stages(c *counters, before, after []metrics.Sample) *Stages {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	st := &Stages{
		ToStoreP99: ms(c.toStore.quantile(0.99)), ToStoreP999: ms(c.toStore.quantile(0.999)), ToStoreMax: ms(c.toStore.max),
		FromStoreP99: ms(c.fromStore.quantile(0.99)), FromStoreP999: ms(c.fromStore.quantile(0.999)), FromStoreMax: ms(c.fromStore.max),
		Stale: c.stale.Load(),
	}
	gc := histDelta(before[0], after[0])
	st.GCPauses = gc.count()
	st.GCPauseMax = gc.quantile(1) * 1000
	sched := histDelta(before[1], after[1])
	st.SchedP99, st.SchedP999 = sched.quantile(0.99)*1000, sched.quantile(0.999)*1000
	return st
}

// runtimeHist is the difference of two reads of a runtime histogram.
type runtimeHist struct {
	counts  []uint64
	buckets []float64
}

func histDelta(before, after metrics.Sample) runtimeHist {
	if after.Value.Kind() != metrics.KindFloat64Histogram || before.Value.Kind() != metrics.KindFloat64Histogram {
		return runtimeHist{}
	}
	a, b := after.Value.Float64Histogram(), before.Value.Float64Histogram()
	h := runtimeHist{counts: make([]uint64, len(a.Counts)), buckets: a.Buckets}
	for i := range a.Counts {
		h.counts[i] = a.Counts[i]
		if i < len(b.Counts) {
			h.counts[i] -= b.Counts[i]
		}
	}
	return h
}

func (h runtimeHist) count() uint64 {
	var n uint64
	for _, c := range h.counts {
		n += c
	}
	return n
}

// quantile returns the upper bound (in seconds) of the bucket holding the
// q quantile, the lower bound for the last, unbounded bucket; 0 when empty.
func (h runtimeHist) quantile(q float64) float64 {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank && c > 0 {
			if hi := h.buckets[i+1]; !math.IsInf(hi, 1) {
				return hi
			}
			return h.buckets[i]
		}
	}
	return 0
}
