package broker

import (
	"sync"
	"sync/atomic"
)

// stats counts what the broker did, for runtime info and metrics.
type stats struct {
	busy atomic.Int64 // sends refused with SYSTEM_BUSY
	// subsRefused counts heartbeats' subscriptions refused (a bad SQL92
	// expression, an unknown type): their log line is rate-limited.
	subsRefused atomic.Int64

	mu sync.Mutex
	// guarded by mu:
	put map[string]*counter // by topic
	get map[string]*counter
}

type counter struct{ msgs, bytes int64 }

func (s *stats) recordPut(topic string, msgs, bytes int) { s.record(&s.put, topic, msgs, bytes) }
func (s *stats) recordGet(topic string, msgs, bytes int) { s.record(&s.get, topic, msgs, bytes) }

func (s *stats) record(m *map[string]*counter, topic string, msgs, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *m == nil {
		*m = map[string]*counter{}
	}
	c := (*m)[topic]
	if c == nil {
		c = &counter{}
		(*m)[topic] = c
	}
	c.msgs += int64(msgs)
	c.bytes += int64(bytes)
}

// totals returns the messages put and got over all topics.
func (s *stats) totals() (putMsgs, putBytes, getMsgs, getBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.put {
		putMsgs += c.msgs
		putBytes += c.bytes
	}
	for _, c := range s.get {
		getMsgs += c.msgs
		getBytes += c.bytes
	}
	return
}
