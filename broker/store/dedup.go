package store

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
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
// path inserts as it stores; the dispatcher adds what it did not, at open
// and on a slave). A key's live entry is found through slots, an
// open-addressing table (linear probing, at most half full, deletion by
// backward shift: no tombstones, unlike a Go map under this churn of one
// insert and one delete per message). A slot holds the low 32 bits of the
// key's first hash (its home slot and a tag that spares most probes a
// ring read) and the ring index + 1; 0 is empty. An entry no slot points
// to (superseded, or its put failed) is dead (zero key) and leaves with its
// turn.
type dedupWindow struct {
	window int64 // ms
	max    int
	now    func() time.Time

	mu    sync.Mutex
	ring  []dedupEntry // ring[seq % len(ring)] for seq in [head, head+n)
	head  uint64
	n     int
	slots []uint64 // tag<<32 | ring index+1; len a power of 2, >= 2*len(ring)
	live  int      // entries a slot points to

	hits, misses, expired, cut atomic.Int64 // metrics
	keys                       atomic.Int64 // live, for status without the lock
}

func newDedupWindow(o DedupOptions, now func() time.Time) *dedupWindow {
	if o.Window <= 0 {
		return nil
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = 2_000_000
	}
	w := &dedupWindow{window: o.Window.Milliseconds(), max: o.MaxKeys, now: now}
	w.resize(min(1024, o.MaxKeys))
	return w
}

// nowMs is the window's clock in unix ms.
func (w *dedupWindow) nowMs() int64 { return w.now().UnixMilli() }

func (w *dedupWindow) mask() uint64 { return uint64(len(w.slots) - 1) }

// find returns the slot of k's live entry, or -1.
// REQUIRES: w.mu held.
func (w *dedupWindow) find(k dedupKey) int {
	tag, m := uint64(uint32(k.a)), w.mask()
	for i := tag & m; ; i = (i + 1) & m {
		sl := w.slots[i]
		if sl == 0 {
			return -1
		}
		if sl>>32 == tag && w.ring[sl&0xFFFFFFFF-1].key == k {
			return int(i)
		}
	}
}

// place points a free slot of k's probe sequence to ring index ri.
// REQUIRES: w.mu held, k not in slots, slots at most half full.
func (w *dedupWindow) place(k dedupKey, ri int) {
	tag, m := uint64(uint32(k.a)), w.mask()
	i := tag & m
	for w.slots[i] != 0 {
		i = (i + 1) & m
	}
	w.slots[i] = tag<<32 | uint64(ri+1)
}

// unslot empties slot i, shifting back the entries after it that probing
// would no longer reach. REQUIRES: w.mu held.
func (w *dedupWindow) unslot(i int) {
	m := w.mask()
	for j := (uint64(i) + 1) & m; w.slots[j] != 0; j = (j + 1) & m {
		home := (w.slots[j] >> 32) & m
		// NB: the entry at j stays when its home is cyclically in (i, j].
		if (uint64(i) < j && uint64(i) < home && home <= j) || (uint64(i) > j && (home > uint64(i) || home <= j)) {
			continue
		}
		w.slots[i] = w.slots[j]
		i = int(j)
	}
	w.slots[i] = 0
}

// lookupLocked returns k's entry unless it has none or it is expired.
// REQUIRES: w.mu held.
func (w *dedupWindow) lookupLocked(k dedupKey, now int64) (*dedupEntry, bool) {
	i := w.find(k)
	if i < 0 {
		return nil, false
	}
	e := &w.ring[w.slots[i]&0xFFFFFFFF-1]
	if e.pos != pendingPos && e.ts < now-w.window {
		return nil, false // NB: expired, not yet evicted
	}
	return e, true
}

// insertLocked appends e as its key's entry and returns its sequence,
// evicting expired entries and, at the bound, the oldest; an expired entry
// of the key dies.
// REQUIRES: w.mu held.
func (w *dedupWindow) insertLocked(e dedupEntry, now int64) uint64 {
	w.evictLocked(now)
	if w.n == w.max {
		w.popLocked(true)
	}
	if w.n == len(w.ring) {
		w.resize(min(2*len(w.ring), w.max))
	}
	seq := w.head + uint64(w.n)
	ri := int(seq % uint64(len(w.ring)))
	w.ring[ri] = e
	w.n++
	if i := w.find(e.key); i >= 0 {
		// NB: the key's expired entry: it dies, its slot is the new one's.
		old := w.slots[i]
		w.ring[old&0xFFFFFFFF-1].key = dedupKey{}
		w.slots[i] = old&^0xFFFFFFFF | uint64(ri+1)
	} else {
		w.place(e.key, ri)
		w.live++
	}
	w.keys.Store(int64(w.live))
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
	if e.key != (dedupKey{}) {
		w.unslot(w.find(e.key))
		w.live--
		w.keys.Store(int64(w.live))
		if cut {
			w.cut.Add(1)
		} else {
			w.expired.Add(1)
		}
	}
	*e = dedupEntry{}
	w.head++
	w.n--
}

// resize gives the ring size entries (keeping sequence positions) and
// rebuilds the slots for it.
// REQUIRES: w.mu held, size >= w.n.
func (w *dedupWindow) resize(size int) {
	ring := make([]dedupEntry, size)
	for i := range w.n {
		seq := w.head + uint64(i)
		ring[seq%uint64(size)] = w.ring[seq%uint64(len(w.ring))]
	}
	w.ring = ring
	w.slots = make([]uint64, max(16, 1<<bits.Len(uint(2*size-1))))
	for i := range w.n {
		ri := int((w.head + uint64(i)) % uint64(size))
		if k := ring[ri].key; k != (dedupKey{}) {
			w.place(k, ri)
		}
	}
}

// removeLocked forgets the entry of sequence seq (a put that failed).
// REQUIRES: w.mu held.
func (w *dedupWindow) removeLocked(k dedupKey, seq uint64) {
	if seq < w.head || seq >= w.head+uint64(w.n) {
		return // NB: cut by the bound meanwhile
	}
	e := &w.ring[seq%uint64(len(w.ring))]
	if e.key != k {
		return
	}
	w.unslot(w.find(k))
	e.key = dedupKey{}
	w.live--
	w.keys.Store(int64(w.live))
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
	if _, ok := w.lookupLocked(e.key, now); !ok {
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
		if e := &w.ring[seq%uint64(len(w.ring))]; e.key != (dedupKey{}) && e.pos != pendingPos {
			st.Oldest = e.ts
			break
		}
	}
	st.Keys = int64(w.live)
	w.mu.Unlock()
	st.Expired, st.Cut = w.expired.Load(), w.cut.Load()
	return st
}

var (
	retryTopicPrefixBytes = []byte(retryTopicPrefix)
	dlqTopicPrefixBytes   = []byte(dlqTopicPrefix)
)

// SetDedupFeed turns on (or off) the dispatcher's feed of the duplicate
// window: each record it indexes adds its key, as open's rebuild does. A
// store whose log is written by replication, not by its put path (a
// slave), turns it on so that its window is ready when it becomes master;
// a master leaves it off: its put path records the keys of the sends it
// stores (the feed would look each up again, about 5% of the put cost).
func (s *Store) SetDedupFeed(on bool) {
	if s.dedup != nil {
		s.dedupFeed.Store(on)
	}
}

// feedDedup adds a dispatched record's key to the window, unless it has
// it: how the window learns of records this process did not put (open's
// rebuild, a slave's dispatcher). The records that count are
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

// rebuildDedup fills the window from the log's last window of records.
// The scan starts at the first record of
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
	if n := s.dedup.keys.Load(); n > 0 {
		s.logger.Info("store: duplicate window rebuilt", "keys", n, "from", from, "bytes", end-from, "took", time.Since(started))
	}
	return nil
}
