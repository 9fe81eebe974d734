package console

import (
	"sync"
	"time"
)

// Point is one sample of a flow: a topic consumed by a group, a whole
// group, or a broker. Rates are per second since the previous point.
type Point struct {
	T           int64   `json:"t"`        // unix milliseconds
	Produced    int64   `json:"produced"` // messages stored so far (sum of queues' max offsets)
	Consumed    int64   `json:"consumed"` // messages consumed so far (sum of committed offsets)
	Lag         int64   `json:"lag"`      // messages not yet consumed; -1 when unknown
	LagMs       int64   `json:"lagMs"`    // age of the oldest unconsumed message; -1 when unknown
	Stored      int64   `json:"stored"`   // messages a topic holds (sum of max - min offsets); topics only
	ProduceRate float64 `json:"produceRate"`
	ConsumeRate float64 `json:"consumeRate"`
	// POP (RocketMQ 5) consumption of a group, summed over its queues;
	// groups only, all zero for a group that received nothing by POP.
	InFlight       int64   `json:"inFlight"`     // delivered, not acked
	Redeliveries   int64   `json:"redeliveries"` // since the brokers started
	DLQ            int64   `json:"dlq"`          // dead-lettered since the brokers started
	RedeliveryRate float64 `json:"redeliveryRate"`
}

// series is a flow's points of the last keep, oldest first.
type series struct {
	points []Point
}

// add appends p, filling its rates from the previous point, and drops
// points older than keep.
func (s *series) add(p Point, keep time.Duration) {
	if n := len(s.points); n > 0 {
		prev := s.points[n-1]
		if dt := float64(p.T-prev.T) / 1000; dt > 0 {
			p.ProduceRate = max(float64(p.Produced-prev.Produced)/dt, 0)
			p.ConsumeRate = max(float64(p.Consumed-prev.Consumed)/dt, 0)
			p.RedeliveryRate = max(float64(p.Redeliveries-prev.Redeliveries)/dt, 0) // NB: a restarted broker counts from 0
		}
	}
	s.points = append(s.points, p)
	cut := p.T - keep.Milliseconds()
	i := 0
	for i < len(s.points) && s.points[i].T < cut {
		i++
	}
	if i > 0 {
		s.points = append(s.points[:0], s.points[i:]...)
	}
}

func (s *series) last() (Point, bool) {
	if len(s.points) == 0 {
		return Point{}, false
	}
	return s.points[len(s.points)-1], true
}

// history holds the sampled series by key. Safe for concurrent use.
type history struct {
	keep time.Duration

	mu     sync.Mutex
	series map[string]*series // guarded by mu
	seen   map[string]int64   // key → time of the last point, guarded by mu
}

func newHistory(keep time.Duration) *history {
	return &history{keep: keep, series: map[string]*series{}, seen: map[string]int64{}}
}

// add appends p to key's series.
func (h *history) add(key string, p Point) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[key]
	if s == nil {
		s = &series{}
		h.series[key] = s
	}
	s.add(p, h.keep)
	h.seen[key] = p.T
}

// forget drops the series not added to since before (deleted topics and
// groups).
func (h *history) forget(before int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, t := range h.seen {
		if t < before {
			delete(h.series, k)
			delete(h.seen, k)
		}
	}
}

// points returns a copy of key's series; nil when it has none.
func (h *history) points(key string) []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[key]
	if s == nil {
		return nil
	}
	return append([]Point(nil), s.points...)
}

// last returns key's newest point.
func (h *history) last(key string) (Point, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[key]
	if s == nil {
		return Point{}, false
	}
	return s.last()
}

// Keys of the series.
func groupKey(group string) string       { return "g\x00" + group }
func flowKey(group, topic string) string { return "f\x00" + group + "\x00" + topic }
func topicKey(topic string) string       { return "t\x00" + topic }

const clusterKey = "c"
