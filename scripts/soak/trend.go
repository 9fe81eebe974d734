package main

import "fmt"

// Limit says when a series grows without bound: the slope of its
// least-squares line over the second half of the run is above PerHour
// (units per hour) and adds more than Floor over that half (what noise
// alone can add in a short run).
type Limit struct {
	Name, Flag, Unit string
	PerHour, Floor   float64
	value            func(Sample) float64
}

// DefaultLimits are generous for a broker at a steady rate: after warm-up
// none of these should grow at all.
func DefaultLimits() []Limit {
	mib := func(b float64) float64 { return b / (1 << 20) }
	return []Limit{
		{"resident memory", "rss", "MiB", 64, 16, func(s Sample) float64 { return mib(s.RSS) }},
		{"heap in use", "heap", "MiB", 32, 16, func(s Sample) float64 { return mib(s.Heap) }},
		{"goroutines", "goroutines", "goroutines", 100, 20, func(s Sample) float64 { return s.Goroutines }},
		{"open descriptors", "fds", "descriptors", 50, 10, func(s Sample) float64 { return s.FDs }},
	}
}

// Trend is one series' verdict.
type Trend struct {
	Limit
	PerHour float64 // fitted slope over the second half
	Added   float64 // what the slope adds over the second half
	Grows   bool
}

func (t Trend) String() string {
	verdict := "flat"
	if t.Grows {
		verdict = "GROWS WITHOUT BOUND"
	}
	return fmt.Sprintf("%-17s %+9.2f %s/hour over the second half (%+.2f in it; limit %.0f/hour beyond %.0f): %s",
		t.Name, t.PerHour, t.Unit, t.Added, t.Limit.PerHour, t.Floor, verdict)
}

// trends fits each limit's series over the second half of samples.
func trends(samples []Sample, limits []Limit) []Trend {
	half := samples[len(samples)/2:]
	out := make([]Trend, 0, len(limits))
	for _, l := range limits {
		xs, ys := make([]float64, len(half)), make([]float64, len(half))
		for i, s := range half {
			xs[i], ys[i] = s.At.Hours(), l.value(s)
		}
		slope := fitSlope(xs, ys)
		span := xs[len(xs)-1] - xs[0]
		tr := Trend{Limit: l, PerHour: slope, Added: slope * span}
		tr.Grows = slope > l.PerHour && tr.Added > l.Floor
		out = append(out, tr)
	}
	return out
}

// fitSlope is the slope of the least-squares line through (xs, ys); 0 for
// fewer than two distinct xs.
func fitSlope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if n < 2 || d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}
