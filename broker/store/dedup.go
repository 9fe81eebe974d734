package store

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/internal/message"
)

// DedupOptions configure the duplicate window (exactly-once publishing).
type DedupOptions struct {
	// Window is how long a stored message's UNIQ_KEY is remembered per
	// topic; 0 turns the window off.
	Window time.Duration
	// MaxKeys bounds the keys remembered; past it the oldest leave first
	// (the window is cut short). Default 2,000,000.
	MaxKeys int
}

// Topic prefixes whose messages are never deduplicated: a consumer's
// send-back (and the client's fallback send to the retry topic) carries the
// original UNIQ_KEY on purpose, once per retry.
const (
	retryTopicPrefix = "%RETRY%"
	dlqTopicPrefix   = "%DLQ%"
)

// dedupKey is a 128-bit hash of a topic and a UNIQ_KEY: two of them are
// equal by chance with probability 2^-128, and the window keeps no string
// per message.
type dedupKey struct{ a, b uint64 }

// The seeds of dedupKey, random per process: the window is rebuilt from
// the log at start, never saved.
var dedupSeeds = [4]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed(), maphash.MakeSeed(), maphash.MakeSeed()}

func dedupKeyOf(topic, key string) dedupKey {
	return dedupKey{
		a: maphash.String(dedupSeeds[0], key) ^ maphash.String(dedupSeeds[2], topic),
		b: maphash.String(dedupSeeds[1], key) ^ maphash.String(dedupSeeds[3], topic),
	}
}

// dedupKeyOfBytes is dedupKeyOf of byte slices (the dispatcher's record
// fields), without a string.
func dedupKeyOfBytes(topic, key []byte) dedupKey {
	return dedupKey{
		a: maphash.Bytes(dedupSeeds[0], key) ^ maphash.Bytes(dedupSeeds[2], topic),
		b: maphash.Bytes(dedupSeeds[1], key) ^ maphash.Bytes(dedupSeeds[3], topic),
	}
}

// dedupTopic reports whether messages of a topic are deduplicated: every
// topic but retry and dead-letter topics.
func dedupTopic(topic string) bool {
	return !strings.HasPrefix(topic, retryTopicPrefix) && !strings.HasPrefix(topic, dlqTopicPrefix)
}

// dedupEntry is what the window remembers of a stored message: what its
// send was answered.
type dedupEntry struct {
	key         dedupKey
	pos         int64 // commitlog offset (the offset message id); pendingPos while its put is under way
	queueOffset int64
	ts          int64 // store time, unix ms
	size        int32 // record bytes (a duplicate waits until pos+size is durable in sync mode)
	queueID     int32
}

// pendingPos marks an entry whose put is still under putMu: the request
// and batch member it came from are in queueOffset and size.
const pendingPos = -1

// dedupWindow remembers, per topic, the UNIQ_KEY of every message stored in
// the last window, oldest first, at most max of them.
//
// Entries sit in a ring in insertion order (about store time order: the put
// path inserts as it stores; the dispatcher adds what the put path did not,
// at open and on a replica); the map finds a key's newest entry by its
// sequence number. An entry whose key now maps to a newer sequence (or to
// none: a failed put) is dead and leaves with its turn.
type dedupWindow struct {
	window int64 // ms
	max    int
	now    func() time.Time

	mu   sync.Mutex
	idx  map[dedupKey]uint64 // key → sequence of its entry
	ring []dedupEntry        // ring[(seq) % len(ring)] for seq in [head, head+n)
	head uint64
	n    int

	hits, misses, expired, cut atomic.Int64 // metrics
	keys                       atomic.Int64 // len(idx), for status without the lock
}

func newDedupWindow(o DedupOptions, now func() time.Time) *dedupWindow {
	if o.Window <= 0 {
		return nil
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = 2_000_000
	}
	return &dedupWindow{window: o.Window.Milliseconds(), max: o.MaxKeys, now: now,
		idx: map[dedupKey]uint64{}, ring: make([]dedupEntry, min(1024, o.MaxKeys))}
}

// nowMs is the window's clock in unix ms.
func (w *dedupWindow) nowMs() int64 { return w.now().UnixMilli() }

// lookupLocked returns the live entry of k and its sequence.
// REQUIRES: w.mu held.
func (w *dedupWindow) lookupLocked(k dedupKey, now int64) (*dedupEntry, uint64, bool) {
	seq, ok := w.idx[k]
	if !ok {
		return nil, 0, false
	}
	e := &w.ring[seq%uint64(len(w.ring))]
	if e.pos != pendingPos && e.ts < now-w.window {
		return nil, 0, false // NB: expired, not yet evicted
	}
	return e, seq, true
}

// insertLocked appends e as k's newest entry and returns its sequence,
// evicting expired entries and, at the bound, the oldest.
// REQUIRES: w.mu held.
func (w *dedupWindow) insertLocked(e dedupEntry, now int64) uint64 {
	w.evictLocked(now)
	if w.n == w.max {
		w.popLocked(true)
	}
	if w.n == len(w.ring) {
		w.growLocked()
	}
	seq := w.head + uint64(w.n)
	w.ring[seq%uint64(len(w.ring))] = e
	w.n++
	w.idx[e.key] = seq
	w.keys.Store(int64(len(w.idx)))
	return seq
}

// evictLocked drops the expired entries at the head.
// REQUIRES: w.mu held.
func (w *dedupWindow) evictLocked(now int64) {
	for w.n > 0 {
		e := &w.ring[w.head%uint64(len(w.ring))]
		if e.pos == pendingPos || e.ts >= now-w.window {
			return
		}
		w.popLocked(false)
	}
}

// popLocked drops the head entry; cut says the bound forced it out.
// REQUIRES: w.mu held, w.n > 0.
func (w *dedupWindow) popLocked(cut bool) {
	e := &w.ring[w.head%uint64(len(w.ring))]
	if seq, ok := w.idx[e.key]; ok && seq == w.head {
		delete(w.idx, e.key)
		if cut {
			w.cut.Add(1)
		} else {
			w.expired.Add(1)
		}
	}
	*e = dedupEntry{}
	w.head++
	w.n--
	w.keys.Store(int64(len(w.idx)))
}

// growLocked doubles the ring (up to max), keeping sequence positions.
// REQUIRES: w.mu held.
func (w *dedupWindow) growLocked() {
	ring := make([]dedupEntry, min(2*len(w.ring), w.max))
	for i := range w.n {
		seq := w.head + uint64(i)
		ring[seq%uint64(len(ring))] = w.ring[seq%uint64(len(w.ring))]
	}
	w.ring = ring
}

// removeLocked forgets k's entry of sequence seq (a put that failed).
// REQUIRES: w.mu held.
func (w *dedupWindow) removeLocked(k dedupKey, seq uint64) {
	if cur, ok := w.idx[k]; ok && cur == seq {
		delete(w.idx, k)
		w.keys.Store(int64(len(w.idx)))
	}
}

// fillLocked turns the pending entry of sequence seq into a stored one.
// REQUIRES: w.mu held.
func (w *dedupWindow) fillLocked(seq uint64, pos, queueOffset, ts int64, size, queueID int32) {
	if seq < w.head || seq >= w.head+uint64(w.n) {
		return // NB: cut by the bound meanwhile
	}
	e := &w.ring[seq%uint64(len(w.ring))]
	e.pos, e.queueOffset, e.ts, e.size, e.queueID = pos, queueOffset, ts, size, queueID
}

// add records a stored message's key unless the window has it: the
// dispatcher's feed (open, replicas), which the put path has mostly done
// already.
func (w *dedupWindow) add(e dedupEntry) {
	now := w.nowMs()
	if e.ts < now-w.window {
		return
	}
	w.mu.Lock()
	if _, _, ok := w.lookupLocked(e.key, now); !ok {
		w.insertLocked(e, now)
	}
	w.mu.Unlock()
}

// DedupStatus is the duplicate window's state (mqadmin brokerStatus,
// metrics).
type DedupStatus struct {
	Enabled bool
	Window  time.Duration
	MaxKeys int
	// Keys are the keys remembered now; Oldest the store time of the
	// oldest (unix ms, 0 when none): the window covers now - Oldest.
	Keys   int64
	Oldest int64
	// Hits are sends answered from the window (batch members count one
	// each), Misses the sends with a key that were stored, Expired the keys
	// that left at the window's end, Cut the keys the bound forced out
	// before it.
	Hits, Misses, Expired, Cut int64
}

// DedupStatus returns the window's state.
func (s *Store) DedupStatus() DedupStatus {
	w := s.dedup
	if w == nil {
		return DedupStatus{}
	}
	st := DedupStatus{Enabled: true, Window: time.Duration(w.window) * time.Millisecond, MaxKeys: w.max,
		Hits: w.hits.Load(), Misses: w.misses.Load()}
	w.mu.Lock()
	w.evictLocked(w.nowMs())
	for i := range w.n {
		seq := w.head + uint64(i)
		e := &w.ring[seq%uint64(len(w.ring))]
		if cur, ok := w.idx[e.key]; ok && cur == seq && e.pos != pendingPos {
			st.Oldest = e.ts
			break
		}
	}
	st.Keys = int64(len(w.idx))
	w.mu.Unlock()
	st.Expired, st.Cut = w.expired.Load(), w.cut.Load()
	return st
}

var (
	retryTopicPrefixBytes = []byte(retryTopicPrefix)
	dlqTopicPrefixBytes   = []byte(dlqTopicPrefix)
)

// feedDedup adds a dispatched record's key to the window, unless the put
// path did already: how the window learns of records this process did not
// put (open's rebuild, a replica's dispatcher). The records that count are
// those a send stores: with a UNIQ_KEY, not transactional (half messages
// are plain records of the half topic; commits are not), not in a retry or
// dead-letter topic, and not a delayed message moved to its real topic
// (its topic is its REAL_TOPIC). REQUIRES: the dispatching goroutine.
func (s *Store) feedDedup(di *message.DispatchInfo) {
	if len(di.UniqKey) == 0 || message.TxType(di.SysFlag) != message.TxNot ||
		bytes.HasPrefix(di.Topic, retryTopicPrefixBytes) || bytes.HasPrefix(di.Topic, dlqTopicPrefixBytes) ||
		bytes.Equal(di.Topic, di.RealTopic) {
		return
	}
	s.dedup.add(dedupEntry{key: dedupKeyOfBytes(di.Topic, di.UniqKey), pos: di.PhysicalOffset,
		queueOffset: di.QueueOffset, ts: di.StoreTimestamp, size: di.Size, queueID: di.QueueID})
}

// rebuildDedup fills the window from the log's last window of records and
// turns the dispatcher's feed on. The scan starts at the first record of
// the window in any consume queue (every record a send stores has a
// consume queue entry). REQUIRES: Open, after the catch-up dispatch.
func (s *Store) rebuildDedup() error {
	started := time.Now()
	since := s.dedup.nowMs() - s.dedup.window
	end := s.dispatched.Load()
	from := end
	s.cq.Queues(func(topic string, id int32, q *consumequeue.Queue) bool {
		off, err := q.SearchByTime(since, s.entryStoreTime)
		if err == nil && max(off, s.minOffset(q)) < q.Next() {
			var e consumequeue.Entry
			if e, err = q.Entry(max(off, s.minOffset(q))); err == nil {
				from = min(from, e.Pos)
			}
		}
		if err != nil {
			s.logger.Warn("store: duplicate window: cannot search a consume queue by time; scanning the whole log",
				"topic", topic, "queue_id", id, "err", err)
			from = int64(s.log.Min())
			return false
		}
		return true
	})
	from = max(from, int64(s.log.Min()))
	sc := s.log.NewScanner(commitlog.Offset(from), false)
	for int64(sc.Pos()) < end {
		if !sc.Scan() {
			var ce *commitlog.CorruptionError
			if errors.As(sc.Err(), &ce) {
				sc.SkipCorrupt() // NB: reported by dispatch
				continue
			}
			if sc.Err() != nil {
				return fmt.Errorf("store: rebuild the duplicate window: %w", sc.Err())
			}
			break
		}
		at, rec := sc.Record()
		if int64(at) >= end {
			break
		}
		if di, err := message.ReadDispatchInfo(rec); err == nil && di.StoreTimestamp >= since {
			s.feedDedup(&di)
		}
	}
	s.dedupFeed = true
	if n := s.dedup.keys.Load(); n > 0 {
		s.logger.Info("store: duplicate window rebuilt", "keys", n, "from", from, "bytes", end-from, "took", time.Since(started))
	}
	return nil
}
