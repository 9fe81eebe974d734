package store

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/consumequeue/keyindex"
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

	prepareMin int // tests: the least table bytes the preparer makes (0: dedupPrepareMin)
	// rebuildHeld, tests: the rebuild after open waits until it is closed.
	rebuildHeld chan struct{}
}

// Topic prefixes whose messages are never deduplicated: a consumer's
// send-back (and the client's fallback send to the retry topic) carries the
// original UNIQ_KEY on purpose, once per retry.
const (
	retryTopicPrefix = "%RETRY%"
	dlqTopicPrefix   = "%DLQ%"
)

// dedupKey is a 128-bit hash of a topic and a UNIQ_KEY: two of them are
// equal by chance with probability about 2^-116, and the window keeps no
// string per message.
//
// The key's last byte stays out of the hash of its other bytes and topic,
// the group hash, and is added in its own bits instead (see groupKey). A
// producer's keys end in a sequence per millisecond in hex (see
// message.UniqIDGenerator), so the 16 keys of a group go to 16 adjacent
// home slots, two cache lines: the lookups, inserts and, 2M keys later,
// evictions of a producer's sends miss the cache once per 16 keys, not
// once per key, and keys of a group do not probe past each other. The
// misses were most of the window's cost (BenchmarkDedupCheckUniqKeys).
type dedupKey struct{ a, b uint64 }

// The seeds of dedupKey, random per process: the window is rebuilt from
// the log at start, never saved.
var dedupSeeds = [4]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed(), maphash.MakeSeed(), maphash.MakeSeed()}

func dedupKeyOf(topic, key string) dedupKey { return dedupTopicOf(topic).key(key) }

// dedupTopicHash is a topic's share of its keys' dedupKey: a batch's
// members hash their topic once.
type dedupTopicHash struct{ a, b uint64 }

func dedupTopicOf(topic string) dedupTopicHash {
	return dedupTopicHash{maphash.String(dedupSeeds[2], topic), maphash.String(dedupSeeds[3], topic)}
}

// key is the dedupKey of a UNIQ_KEY of the topic.
func (t dedupTopicHash) key(key string) dedupKey {
	group, last := splitLast(key)
	return groupKey(maphash.String(dedupSeeds[0], group)^t.a, maphash.String(dedupSeeds[1], group)^t.b, last)
}

// splitLast splits a key into its group (all but the last byte) and its
// last byte, -1 when it is empty (see groupKey).
func splitLast[K string | []byte](key K) (K, int) {
	n := len(key)
	if n == 0 {
		return key, -1
	}
	return key[:n-1], int(key[n-1])
}

// dedupKeyOfBytes is dedupKeyOf of byte slices (the dispatcher's record
// fields), without a string.
func dedupKeyOfBytes(topic, key []byte) dedupKey {
	group, last := splitLast(key)
	return groupKey(maphash.Bytes(dedupSeeds[0], group)^maphash.Bytes(dedupSeeds[2], topic),
		maphash.Bytes(dedupSeeds[1], group)^maphash.Bytes(dedupSeeds[3], topic), last)
}

// groupKey is the dedupKey of a key whose group hashes are a and b (its
// bytes but the last, and its topic) and whose last byte is last (-1: the
// key is empty). The low 31 bits of a are the key's slot tag (see
// dedupWindow): bits 0-3 are the hex digit last is (any other byte maps to
// 0-15 too), bits 4-23 come from the group hash, so that a table of up to
// 2^24 slots (8M keys) finds the group's 16 homes from them alone, and
// bits 24-30 are last's low 7 bits, so that keys of a group have distinct
// tags. b's top 9 bits are xored with last+1: keys of a group are distinct.
func groupKey(a, b uint64, last int) dedupKey {
	c := uint8(last)
	digit := uint64(c&0xF+9*(c>>6)) & 0xF // '0'-'9', 'A'-'F', 'a'-'f': 0-15
	return dedupKey{a: a&^(0x7F<<24|0xF) | uint64(c&0x7F)<<24 | digit, b: b ^ uint64(last+1)<<55}
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
// Entries sit in a queue in insertion order (about store time order: the
// put path inserts as it stores; the dispatcher adds what it did not, at
// open and on a slave), numbered by sequence, held in chunks of
// dedupChunk: a chunk the head leaves is reused at the tail, so the queue
// grows and shrinks without copying. A key's live entry is found through
// slots, an open-addressing table (linear probing, at most half full,
// deletion by backward shift: no tombstones, unlike a Go map under this
// churn of one insert and one delete per message). A slot holds the key's
// tag (the low 31 bits of its first hash, its home slot, with bit 31 set so
// that a used slot is never 0) and the low 32 bits of the entry's sequence;
// 0 is empty. An entry no slot points to (superseded, or its put failed) is
// dead (zero key) and leaves with its turn.
//
// The table doubles when half full, incrementally: the old table stays
// searchable while each insert moves a few of its slots to the new one
// (deleting there leaves dedupTomb, so that probes go on past it).
// The chunks and tables are mapped outside the Go heap (offheap.go): the
// collector neither scans nor counts them, and close frees them.
// While the window fills, a preparer goroutine maps the queue's next chunk
// and the table's next size ahead of need, their pages faulted in at once
// (the tables in huge pages where the kernel has them: mapSliceReady): the put
// path takes them ready instead of faulting page by page under the lock.
// A first chunk, and small tables, are mapped on the spot.
// NB: on the heap, 1M async 128 B sends into a fresh broker (the window
// then 64 MiB) raised its peak resident memory to 298-311 MB, against
// 117-119 MB off it (79-83k against 38k minor page faults, 4 alternated
// runs); 2.5M sends (the window full at 2M keys), 586-640 MB against
// 183 MB. CPU per message did not move (3.15-4.02 against 3.23-3.65 µs;
// 3.04-3.52 against 3.09-3.38).
// NB: the queue grew by copying and the table was rebuilt at once, under
// the lock every send takes: filling to 2M keys, the longest insert took
// 0.36-0.78 s (BenchmarkDedupFill), a stall of every send of the broker
// in the minutes after each start.
type dedupWindow struct {
	window int64 // ms
	max    int
	now    func() time.Time

	mu     sync.Mutex
	closed bool           // the tables are freed (Store.Close); nothing may touch them
	chunks [][]dedupEntry // the queue: sequence seq at chunks[(seq-base)/dedupChunk][(seq-base)%dedupChunk]
	base   uint64         // the first sequence of chunks[0], a multiple of dedupChunk
	spare  []dedupEntry   // a chunk the head left, for the tail
	head   uint64         // the oldest entry's sequence; [head, head+n) are in the queue
	n      int
	slots  []uint64 // len a power of 2, at most half used
	old    []uint64 // while the table grows: the previous one, not yet moved from old[moved:]
	moved  int
	live   int // entries a slot points to

	// What the preparer made ahead of need (see prepare).
	prepareMin int  // bytes: tables smaller than this are mapped on the spot
	prepareAt  int  // live keys from which the next table is asked for (math.MaxInt: none)
	preparing  bool // a preparer goroutine runs
	prepWG     sync.WaitGroup
	readyChunk []dedupEntry // the queue's next chunk, its pages faulted in
	readyTable []uint64     // the table's next size (2*len(slots)), its pages faulted in

	hits, misses, expired, cut atomic.Int64 // metrics
	keys                       atomic.Int64 // live, for status without the lock
}

const (
	// dedupChunk is the entries per chunk of the queue (192 KiB).
	// NB: chunks of 131,072 entries (6 MiB, in huge pages) made the full
	// window's lookups slower: BenchmarkDedupCheck 186-273 ns a key against
	// 146-158 (6 alternated runs).
	dedupChunk = 4096
	dedupMove  = 8 // old slots moved to the new table per insert while it grows
	dedupTomb  = 1 // an old table's deleted slot (a used slot has bit 63 set)
	// dedupPrepareMin is the least table (bytes) the preparer makes: a
	// smaller one, made on the heap, faults 32 pages at most.
	dedupPrepareMin = 256 << 10
)

func newDedupWindow(o DedupOptions, now func() time.Time) *dedupWindow {
	if o.Window <= 0 {
		return nil
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = 2_000_000
	}
	w := &dedupWindow{window: o.Window.Milliseconds(), max: o.MaxKeys, now: now}
	w.prepareMin = cmp.Or(o.prepareMin, dedupPrepareMin)
	w.slots = w.newTable(w.slotsFor(min(1024, o.MaxKeys)))
	w.setPrepareAt()
	return w
}

// close frees the window's tables (off the heap, see offheap.go); the
// window then remembers nothing and every use of it is skipped.
// It waits for a preparer under way, which frees what it made.
func (w *dedupWindow) close() {
	defer w.prepWG.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	for _, c := range w.chunks {
		unmapSlice(c)
	}
	unmapSlice(w.spare)
	unmapSlice(w.slots)
	unmapSlice(w.old)
	unmapSlice(w.readyChunk)
	unmapSlice(w.readyTable)
	w.chunks, w.spare, w.slots, w.old, w.n, w.live = nil, nil, nil, nil, 0, 0
	w.readyChunk, w.readyTable = nil, nil
	w.keys.Store(0)
}

// newTable returns a table of n empty slots, made on the spot: one smaller
// than prepareMin on the heap, where making it takes no lock of the
// process's memory map, a larger one (which the preparer had not ready) in
// a mapping of its own.
// NB: an mmap on the put path waited behind the preparer's faults of huge
// pages (mmap_lock): 14.5 ms once, for a table of 32 KiB.
func (w *dedupWindow) newTable(n int) []uint64 {
	if 8*n < w.prepareMin {
		return make([]uint64, n)
	}
	return mapSlice[uint64](n)
}

// slotsFor is the table size for n live keys: a power of 2, at least 2n.
func (w *dedupWindow) slotsFor(n int) int { return max(16, 1<<bits.Len(uint(2*n-1))) }

// nowMs is the window's clock in unix ms.
func (w *dedupWindow) nowMs() int64 { return w.now().UnixMilli() }

// entry returns the queue's entry of sequence seq.
// REQUIRES: w.mu held, seq in [head, head+n) or the next to append.
func (w *dedupWindow) entry(seq uint64) *dedupEntry {
	i := seq - w.base
	return &w.chunks[i/dedupChunk][i%dedupChunk]
}

// seqOf returns the sequence a used slot points to: the live one whose low
// 32 bits it holds (the queue holds fewer than 2^32 entries).
func (w *dedupWindow) seqOf(sl uint64) uint64 { return w.head + uint64(uint32(sl)-uint32(w.head)) }

// slotTag is k's tag in a slot's high half (see dedupWindow).
func slotTag(k dedupKey) uint64 { return uint64(uint32(k.a)) | 1<<31 }

// probe returns the index of k's slot in table t, or -1.
// REQUIRES: w.mu held.
func (w *dedupWindow) probe(t []uint64, k dedupKey) int {
	tag, m := slotTag(k), uint64(len(t)-1)
	for i := tag & m; ; i = (i + 1) & m {
		sl := t[i]
		if sl == 0 {
			return -1
		}
		if sl>>32 == tag && w.entry(w.seqOf(sl)).key == k {
			return int(i)
		}
	}
}

// find returns the table holding k's live entry's slot and its index, or
// (nil, -1). REQUIRES: w.mu held.
func (w *dedupWindow) find(k dedupKey) ([]uint64, int) {
	if i := w.probe(w.slots, k); i >= 0 {
		return w.slots, i
	}
	if w.old != nil {
		if i := w.probe(w.old, k); i >= 0 {
			return w.old, i
		}
	}
	return nil, -1
}

// place points a free slot of the table to sequence seq of key k, growing
// the table first when it is half full. REQUIRES: w.mu held, k has no slot.
func (w *dedupWindow) place(k dedupKey, seq uint64) {
	if 2*(w.live+1) > len(w.slots) {
		w.grow()
	}
	w.put(w.slots, slotTag(k)<<32|uint64(uint32(seq)))
	w.move(dedupMove)
}

// put stores the used slot value sl in its home slot of table t, or the
// first free one after it. REQUIRES: w.mu held, t less than full.
func (w *dedupWindow) put(t []uint64, sl uint64) {
	m := uint64(len(t) - 1)
	i := (sl >> 32) & m
	for t[i] != 0 {
		i = (i + 1) & m
	}
	t[i] = sl
}

// grow starts moving the table to one twice its size (finishing a move
// still under way first). REQUIRES: w.mu held.
func (w *dedupWindow) grow() {
	w.move(len(w.old))
	w.old, w.moved = w.slots, 0
	if len(w.readyTable) == 2*len(w.old) {
		w.slots, w.readyTable = w.readyTable, nil
	} else {
		w.slots = w.newTable(2 * len(w.old))
	}
	w.setPrepareAt()
}

// move moves up to n slots of the old table to the new one.
// REQUIRES: w.mu held.
func (w *dedupWindow) move(n int) {
	for ; n > 0 && w.old != nil; n-- {
		// NB: a moved slot becomes a tombstone, so that probes of the old
		// table go on past it; an empty one stays empty, so that they end
		// (the old table was at most half used, and gets no new slots).
		if sl := w.old[w.moved]; sl > dedupTomb {
			w.put(w.slots, sl)
			w.old[w.moved] = dedupTomb
		}
		if w.moved++; w.moved == len(w.old) {
			// NB: not under the lock every send takes: unmapping a table
			// of 16 MiB took milliseconds (BenchmarkDedupFill's longest).
			go unmapSlice(w.old)
			w.old = nil
		}
	}
}

// unslot empties slot i of table t: in the current table, shifting back the
// entries after it that probing would no longer reach; in the old one,
// leaving a tombstone. REQUIRES: w.mu held.
func (w *dedupWindow) unslot(t []uint64, i int) {
	if len(t) != len(w.slots) {
		t[i] = dedupTomb
		return
	}
	m := uint64(len(t) - 1)
	for j := (uint64(i) + 1) & m; t[j] != 0; j = (j + 1) & m {
		home := (t[j] >> 32) & m
		// NB: the entry at j stays when its home is cyclically in (i, j].
		if (uint64(i) < j && uint64(i) < home && home <= j) || (uint64(i) > j && (home > uint64(i) || home <= j)) {
			continue
		}
		t[i] = t[j]
		i = int(j)
	}
	t[i] = 0
}

// lookupLocked returns k's entry unless it has none or it is expired.
// REQUIRES: w.mu held.
func (w *dedupWindow) lookupLocked(k dedupKey, now int64) (*dedupEntry, bool) {
	t, i := w.find(k)
	if i < 0 {
		return nil, false
	}
	e := w.entry(w.seqOf(t[i]))
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
	seq := w.head + uint64(w.n)
	newChunk := seq-w.base == uint64(len(w.chunks))*dedupChunk
	if newChunk {
		c := w.spare
		if c == nil {
			c, w.readyChunk = w.readyChunk, nil
		}
		if c == nil {
			c = mapSlice[dedupEntry](dedupChunk)
		}
		w.chunks, w.spare = append(w.chunks, c), nil
	}
	*w.entry(seq) = e
	w.n++
	if t, i := w.find(e.key); i >= 0 {
		// NB: the key's expired entry: it dies, its slot is the new one's.
		old := t[i]
		w.entry(w.seqOf(old)).key = dedupKey{}
		t[i] = old&^0xFFFFFFFF | uint64(uint32(seq))
	} else {
		w.place(e.key, seq)
		w.live++
	}
	w.keys.Store(int64(w.live))
	if newChunk || w.live >= w.prepareAt {
		// NB: not on every insert: the checks cost a full window's
		// lookups 5% (BenchmarkDedupCheck).
		w.prepareLocked()
	}
	return seq
}

// setPrepareAt sets from how many live keys the preparer makes the next
// table: 3/8 of the current one (it grows at half), when the next is of
// prepareMin bytes or more and within the size max keys need.
// NB: asked for at a quarter, a table of 32 MiB sat ready from 512k keys to
// 1M: 1M async sends peaked at 157 MB resident against 116-121 MB before
// the preparer. The preparer is done long before half: 131k inserts after
// 3/8 of the next-to-last table.
// REQUIRES: w.mu held, or w not yet shared.
func (w *dedupWindow) setPrepareAt() {
	w.prepareAt = math.MaxInt
	if next := 2 * len(w.slots); next*8 >= w.prepareMin && next <= w.slotsFor(w.max) {
		w.prepareAt = 3 * len(w.slots) / 8
	}
}

// prepareLocked starts the preparer when the window, still growing, will
// soon need a chunk or a table it has not got ready: a chunk once the queue
// has a chunk and not yet one more than max entries need (a head partway
// into its chunk), and none spare; a table from prepareAt live keys on.
// REQUIRES: w.mu held.
func (w *dedupWindow) prepareLocked() {
	if w.preparing || w.closed {
		return
	}
	chunk := w.readyChunk == nil && w.spare == nil && len(w.chunks) > 0 && (len(w.chunks)-1)*dedupChunk < w.max
	table := 0
	if w.readyTable == nil && w.live >= w.prepareAt {
		table = 2 * len(w.slots)
	}
	if !chunk && table == 0 {
		return
	}
	w.preparing = true
	w.prepWG.Go(func() { w.prepare(chunk, table) })
}

// prepare maps what prepareLocked asked for, faulting its pages in, and
// hands it to the window; what the window no longer needs (it grew past
// that size meanwhile, or closed) is freed. It runs on its own goroutine.
func (w *dedupWindow) prepare(chunk bool, table int) {
	var c []dedupEntry
	var t []uint64
	if table > 0 { // NB: first: the table is the larger, and due at a set fill
		t = mapSliceReady[uint64](table)
	}
	if chunk {
		c = mapSliceReady[dedupEntry](dedupChunk)
	}
	w.mu.Lock()
	w.preparing = false
	if !w.closed {
		if c != nil && w.readyChunk == nil {
			w.readyChunk, c = c, nil
		}
		if t != nil && w.readyTable == nil && len(t) == 2*len(w.slots) {
			w.readyTable, t = t, nil
		}
		w.prepareLocked() // NB: what came due while this one ran
	}
	w.mu.Unlock()
	unmapSlice(c) // NB: not under the lock: a populated table of 32 MiB takes milliseconds
	unmapSlice(t)
}

// evictLocked drops the expired entries at the head.
// REQUIRES: w.mu held.
func (w *dedupWindow) evictLocked(now int64) {
	for w.n > 0 {
		e := w.entry(w.head)
		if e.pos == pendingPos || e.ts >= now-w.window {
			return
		}
		w.popLocked(false)
	}
}

// popLocked drops the head entry; cut says the bound forced it out.
// REQUIRES: w.mu held, w.n > 0.
func (w *dedupWindow) popLocked(cut bool) {
	e := w.entry(w.head)
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
	if w.head-w.base == dedupChunk {
		// NB: the head left its chunk (cleared entry by entry): the tail's next.
		unmapSlice(w.spare)
		w.spare = w.chunks[0]
		w.chunks = append(w.chunks[:0], w.chunks[1:]...)
		w.base += dedupChunk
	}
}

// removeLocked forgets the entry of sequence seq (a put that failed).
// REQUIRES: w.mu held.
func (w *dedupWindow) removeLocked(k dedupKey, seq uint64) {
	if seq < w.head || seq >= w.head+uint64(w.n) {
		return // NB: cut by the bound meanwhile
	}
	e := w.entry(seq)
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
	e := w.entry(seq)
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
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if _, ok := w.lookupLocked(e.key, now); !ok {
		w.insertLocked(e, now)
	}
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
	if !w.closed {
		w.evictLocked(w.nowMs())
	}
	for i := range w.n { // NB: none once closed
		if e := w.entry(w.head + uint64(i)); e.key != (dedupKey{}) && e.pos != pendingPos {
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
// rebuild, a slave's dispatcher). REQUIRES: the dispatching goroutine.
func (s *Store) feedDedup(di *message.DispatchInfo) {
	if !sentRecord(di) {
		return
	}
	s.dedup.add(dedupEntry{key: dedupKeyOfBytes(di.Topic, di.UniqKey), pos: di.PhysicalOffset,
		queueOffset: di.QueueOffset, ts: di.StoreTimestamp, size: di.Size, queueID: di.QueueID})
}

// sentRecord reports whether a record counts for the window: one a send
// stores, with a UNIQ_KEY, not transactional (half messages are plain
// records of the half topic; commits are not), not in a retry or
// dead-letter topic, and not a delayed message moved to its real topic
// (its topic is its REAL_TOPIC).
func sentRecord(di *message.DispatchInfo) bool {
	return len(di.UniqKey) > 0 && message.TxType(di.SysFlag) == message.TxNot &&
		!bytes.HasPrefix(di.Topic, retryTopicPrefixBytes) && !bytes.HasPrefix(di.Topic, dlqTopicPrefixBytes) &&
		!bytes.Equal(di.Topic, di.RealTopic)
}

// rebuildDedupLoop rebuilds the window beside the serving store: a
// restart waits for the log's recovery and the indexes' catch-up, not for
// a read of the window's last minutes of log (the whole of a busy store's:
// 3.3 s of a 7.0 s restart after kill -9 with 1.2 GB written in batches,
// scripts/recovery-bench.sh). Until it is done, a send whose key the
// window lacks is looked up in the key index (storedDup), which Open
// caught up with the log.
func (s *Store) rebuildDedupLoop() {
	defer s.wg.Done()
	defer s.dedupRebuilding.Store(false)
	if held := s.opts.Dedup.rebuildHeld; held != nil {
		select {
		case <-held:
		case <-s.quit:
			return
		}
	}
	if _, err := s.rebuildDedup(); err != nil && !errors.Is(err, errRebuildStopped) {
		// NB: the key index goes on answering for the window.
		s.logger.Error("store: duplicate window: rebuild failed; the key index answers for it", "err", err)
		s.dedupRebuilding.Store(true)
		<-s.quit
	}
}

var errRebuildStopped = errors.New("store: closed while the duplicate window was rebuilt")

// storedDup looks a key the window lacks up in the key index while the
// window is rebuilt: the newest record of the topic with that UNIQ_KEY
// stored within the window, as feedDedup would have added it.
// REQUIRES: w.mu held (lock order: putMu, dedupWindow.mu, keyindex).
func (s *Store) storedDup(d *dedupState, now int64) (dedupEntry, bool) {
	since := now - s.dedup.window
	positions, err := s.index.Query(keyindex.Key(d.topic, d.raw), since, math.MaxInt64, 16)
	if err != nil {
		return dedupEntry{}, false
	}
	for _, pos := range positions {
		if pos < int64(s.log.Min()) {
			continue
		}
		rec, err := s.ReadMessage(pos)
		if err != nil {
			continue // NB: a stale index entry
		}
		di, err := message.ReadDispatchInfo(rec)
		if err != nil || string(di.Topic) != d.topic || string(di.UniqKey) != d.raw || di.StoreTimestamp < since || !sentRecord(&di) {
			continue // NB: another key of the same hash, or a record the window does not count
		}
		return dedupEntry{key: d.key, pos: di.PhysicalOffset, queueOffset: di.QueueOffset, ts: di.StoreTimestamp,
			size: di.Size, queueID: di.QueueID}, true
	}
	return dedupEntry{}, false
}

// rebuildDedup fills the window from the log's last window of records.
// The scan starts at the first record of
// the window in any consume queue (every record a send stores has a
// consume queue entry). REQUIRES: Open, after the catch-up dispatch.
func (s *Store) rebuildDedup() (int64, error) {
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
	for n := 0; int64(sc.Pos()) < end; n++ {
		if n%4096 == 0 {
			select {
			case <-s.quit:
				return 0, errRebuildStopped
			default:
			}
		}
		if !sc.Scan() {
			var ce *commitlog.CorruptionError
			if errors.As(sc.Err(), &ce) {
				sc.SkipCorrupt() // NB: reported by dispatch
				continue
			}
			if sc.Err() != nil {
				return 0, fmt.Errorf("store: rebuild the duplicate window: %w", sc.Err())
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
	return end - from, nil
}
