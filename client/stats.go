package client

import (
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// topicCounters are a push consumer's running totals for one topic.
type topicCounters struct {
	pulls, pullNanos, pulled          int64 // pulls that found messages, their time, their messages
	batches, consumeNanos, ok, failed int64 // handler calls, their time, messages acknowledged and failed
}

func (c *topicCounters) minus(o topicCounters) topicCounters {
	return topicCounters{pulls: c.pulls - o.pulls, pullNanos: c.pullNanos - o.pullNanos, pulled: c.pulled - o.pulled,
		batches: c.batches - o.batches, consumeNanos: c.consumeNanos - o.consumeNanos, ok: c.ok - o.ok, failed: c.failed - o.failed}
}

type statsSample struct {
	at time.Time
	c  map[string]topicCounters
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
type consumeStats struct {
	mu      sync.Mutex
	now     map[string]*topicCounters // guarded by mu
	last    time.Time                 // guarded by mu: the last event's time
	samples []statsSample             // guarded by mu: oldest first
}

func newConsumeStats(start time.Time) *consumeStats {
	return &consumeStats{now: map[string]*topicCounters{}, last: start, samples: []statsSample{{at: start}}}
}

// pulledMsgs counts a pull of topic that found n messages in rt, answered
// at now.
func (s *consumeStats) pulledMsgs(topic string, n int, rt time.Duration, now time.Time) {
	s.mu.Lock()
	c := s.eventLocked(topic, now)
	c.pulls++
	c.pullNanos += int64(rt)
	c.pulled += int64(n)
	s.mu.Unlock()
}

// consumed counts a handler call of topic over n messages that took took
// and returned at now.
func (s *consumeStats) consumed(topic string, n int, ok bool, took time.Duration, now time.Time) {
	s.mu.Lock()
	c := s.eventLocked(topic, now)
	c.batches++
	c.consumeNanos += int64(took)
	if ok {
		c.ok += int64(n)
	} else {
		c.failed += int64(n)
	}
	s.mu.Unlock()
}

// eventLocked samples the totals when the last sample is old enough, and
// returns topic's counters for an event at now to be added to.
// REQUIRES: mu held.
func (s *consumeStats) eventLocked(topic string, now time.Time) *topicCounters {
	// NB: a sample is taken at the last event's time, whose totals hold
	// until now: 10 s after the previous sample, or at once before a quiet
	// spell of 10 s ends.
	if prev := s.samples[len(s.samples)-1].at; s.last.After(prev) &&
		(s.last.Sub(prev) >= statsSampleEvery || now.Sub(s.last) >= statsSampleEvery) {
		s.samples = append(s.samples, statsSample{at: s.last, c: s.snapshotLocked()})
		// NB: keep the newest sample at least statsKeep old: the hour's base.
		k := 0
		for k+1 < len(s.samples) && now.Sub(s.samples[k+1].at) >= statsKeep {
			k++
		}
		if k > 0 {
			s.samples = append(s.samples[:0], s.samples[k:]...)
		}
	}
	if now.After(s.last) {
		s.last = now
	}
	c := s.now[topic]
	if c == nil {
		c = &topicCounters{}
		s.now[topic] = c
	}
	return c
}

// REQUIRES: mu held.
func (s *consumeStats) snapshotLocked() map[string]topicCounters {
	c := make(map[string]topicCounters, len(s.now))
	for t, v := range s.now {
		c[t] = *v
	}
	return c
}

// baseLocked returns the totals age before now: the current ones when
// nothing happened since, else the newest sample at least age old, or the
// oldest.
// REQUIRES: mu held.
func (s *consumeStats) baseLocked(now time.Time, age time.Duration) statsSample {
	if now.Sub(s.last) >= age {
		return statsSample{at: now.Add(-age), c: s.snapshotLocked()}
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
	minute, hour := s.baseLocked(now, time.Minute), s.baseLocked(now, statsKeep)
	secs := now.Sub(minute.at).Seconds()
	out := make(map[string]protocol.ConsumeStatus, len(s.now))
	for t, cur := range s.now {
		d := cur.minus(minute.c[t])
		st := protocol.ConsumeStatus{ConsumeFailedMsgs: cur.failed - hour.c[t].failed}
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
