package client

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// topicTotals are a push consumer's running totals for one topic.
type topicTotals struct {
	pulls, pullNanos, pulled          int64 // pulls that found messages, their time, their messages
	batches, consumeNanos, ok, failed int64 // handler calls, their time, messages acknowledged and failed
}

func (c topicTotals) minus(o topicTotals) topicTotals {
	return topicTotals{pulls: c.pulls - o.pulls, pullNanos: c.pullNanos - o.pullNanos, pulled: c.pulled - o.pulled,
		batches: c.batches - o.batches, consumeNanos: c.consumeNanos - o.consumeNanos, ok: c.ok - o.ok, failed: c.failed - o.failed}
}

// topicCounters are topicTotals counted without a lock.
type topicCounters struct {
	pulls, pullNanos, pulled          atomic.Int64
	batches, consumeNanos, ok, failed atomic.Int64
}

func (c *topicCounters) load() topicTotals {
	return topicTotals{pulls: c.pulls.Load(), pullNanos: c.pullNanos.Load(), pulled: c.pulled.Load(),
		batches: c.batches.Load(), consumeNanos: c.consumeNanos.Load(), ok: c.ok.Load(), failed: c.failed.Load()}
}

type statsSample struct {
	at time.Time
	c  map[string]topicTotals
}

// Sampling of consumeStats: a sample at most every statsSampleEvery, kept
// for statsKeep.
const (
	statsSampleEvery = 10 * time.Second
	statsKeep        = time.Hour
)

// consumeStats counts what a push consumer pulls and consumes, by topic,
// for the status table of GET_CONSUMER_RUNNING_INFO: rates and mean times
// over the last minute, failures over the last hour, as RocketMQ reports
// them. The totals are sampled as events arrive, at most every 10 s, so no
// goroutine keeps the windows: before an event is counted, the totals are
// those of the previous event's time, and stay so until this one. A window
// starts at the newest sample at least its length old (or at the start).
//
// NB: an event (a handled batch: a message, by default) costs atomic adds;
// the lock is taken only to sample, and by status.
type consumeStats struct {
	topics  sync.Map     // topic → *topicCounters
	last    atomic.Int64 // unix ns of the last event
	sampled atomic.Int64 // unix ns of the newest sample

	mu      sync.Mutex
	samples []statsSample // guarded by mu: oldest first
}

func newConsumeStats(start time.Time) *consumeStats {
	s := &consumeStats{samples: []statsSample{{at: start}}}
	s.last.Store(start.UnixNano())
	s.sampled.Store(start.UnixNano())
	return s
}

// pulledMsgs counts a pull of topic that found n messages in rt, answered
// at now.
func (s *consumeStats) pulledMsgs(topic string, n int, rt time.Duration, now time.Time) {
	c := s.event(topic, now)
	c.pulls.Add(1)
	c.pullNanos.Add(int64(rt))
	c.pulled.Add(int64(n))
}

// consumed counts a handler call of topic over n messages that took took
// and returned at now.
func (s *consumeStats) consumed(topic string, n int, ok bool, took time.Duration, now time.Time) {
	c := s.event(topic, now)
	c.batches.Add(1)
	c.consumeNanos.Add(int64(took))
	if ok {
		c.ok.Add(int64(n))
	} else {
		c.failed.Add(int64(n))
	}
}

// event samples the totals when a sample is due (the last event is 10 s
// after the previous sample, or a quiet spell of 10 s ends), and returns
// topic's counters for an event at now to be added to.
func (s *consumeStats) event(topic string, now time.Time) *topicCounters {
	n := now.UnixNano()
	if last, prev := s.last.Load(), s.sampled.Load(); last > prev &&
		(last-prev >= int64(statsSampleEvery) || n-last >= int64(statsSampleEvery)) {
		s.sample(now)
	}
	for {
		if l := s.last.Load(); n <= l || s.last.CompareAndSwap(l, n) {
			break
		}
	}
	if c, ok := s.topics.Load(topic); ok {
		return c.(*topicCounters)
	}
	c, _ := s.topics.LoadOrStore(topic, &topicCounters{})
	return c.(*topicCounters)
}

// sample records the totals at the last event's time, whose totals hold
// until now, and drops the samples no window needs.
func (s *consumeStats) sample(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, prev := s.last.Load(), s.sampled.Load()
	n := now.UnixNano()
	if last <= prev || last-prev < int64(statsSampleEvery) && n-last < int64(statsSampleEvery) {
		return // NB: another event sampled meanwhile
	}
	s.samples = append(s.samples, statsSample{at: time.Unix(0, last), c: s.snapshot()})
	s.sampled.Store(last)
	// NB: keep the newest sample at least statsKeep old: the hour's base.
	k := 0
	for k+1 < len(s.samples) && now.Sub(s.samples[k+1].at) >= statsKeep {
		k++
	}
	if k > 0 {
		s.samples = append(s.samples[:0], s.samples[k:]...)
	}
}

func (s *consumeStats) snapshot() map[string]topicTotals {
	out := map[string]topicTotals{}
	s.topics.Range(func(t, c any) bool {
		out[t.(string)] = c.(*topicCounters).load()
		return true
	})
	return out
}

// baseLocked returns the totals age before now: cur when nothing happened
// since, else the newest sample at least age old, or the oldest.
// REQUIRES: mu held.
func (s *consumeStats) baseLocked(now time.Time, age time.Duration, cur map[string]topicTotals) statsSample {
	if now.Sub(time.Unix(0, s.last.Load())) >= age {
		return statsSample{at: now.Add(-age), c: cur}
	}
	base := s.samples[0]
	for _, sm := range s.samples[1:] {
		if now.Sub(sm.at) < age {
			break
		}
		base = sm
	}
	return base
}

// status returns the status table at now.
func (s *consumeStats) status(now time.Time) map[string]protocol.ConsumeStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.snapshot()
	minute, hour := s.baseLocked(now, time.Minute, cur), s.baseLocked(now, statsKeep, cur)
	secs := now.Sub(minute.at).Seconds()
	out := make(map[string]protocol.ConsumeStatus, len(cur))
	for t, c := range cur {
		d := c.minus(minute.c[t])
		st := protocol.ConsumeStatus{ConsumeFailedMsgs: c.failed - hour.c[t].failed}
		if secs > 0 {
			st.PullTPS = float64(d.pulled) / secs
			st.ConsumeOKTPS = float64(d.ok) / secs
			st.ConsumeFailedTPS = float64(d.failed) / secs
		}
		if d.pulls > 0 {
			st.PullRT = float64(d.pullNanos) / float64(d.pulls) / 1e6
		}
		if d.batches > 0 {
			st.ConsumeRT = float64(d.consumeNanos) / float64(d.batches) / 1e6
		}
		out[t] = st
	}
	return out
}
