package consumequeue

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// readChunk is how many entries one ReadAt fetches into a stack buffer.
const readChunk = 64

// Queue is the consume queue of one (topic, queueId): a dense array of
// entries indexed by queue offset, stored in files of EntriesPerFile
// entries. See the package documentation for the concurrency contract.
//
// Locks, in acquisition order: wmu → mu → bmu.
//   - wmu serializes every mutation: Put, flush, sync, truncate, delete,
//     close. The dispatcher's Put only contends with Store.Sync.
//   - mu guards the file list; readers hold it shared across their ReadAt
//     calls so a file cannot be removed or closed under them. Mutators take
//     it exclusively only to change the list (roll, truncate, delete, close).
//   - bmu guards the write buffer, so readers can copy entries that are not
//     in the file yet. The file write itself happens outside bmu.
type Queue struct {
	s     *Store
	topic string
	id    int32
	dir   string // <root>/<topic>/<queueId>

	// INVARIANT: entries [min, next) are readable; next only moves back in
	// TruncateAfterPos, under mu held exclusively.
	next    atomic.Int64
	min     atomic.Int64
	lastEnd atomic.Int64 // End() of entry next-1, 0 if the queue is empty

	wmu sync.Mutex
	// Guarded by wmu.
	werr      error  // sticky fsync error
	dirty     bool   // active file has unsynced writes
	idle      int    // consecutive Syncs with nothing to sync
	pending   []File // sealed files not yet fsynced; Sync fsyncs and closes them
	dirMade   bool   // the queue directory exists
	syncDir   bool   // a file was created or removed: fsync dir
	syncPaths bool   // dir was created: fsync topic dir and root too
	blankEnd  int64  // end of a RocketMQ blank prefix in the first file, 0 if none
	// verified holds entries read ahead by verify from vfrom on: the
	// dispatcher's catch-up after a crash puts again the entries past the
	// last checkpoint, one after another per queue. nil when none.
	verified []Entry
	vfrom    int64

	mu sync.RWMutex
	// Guarded by mu (shared: read; exclusive + wmu: write).
	segs []*segment // contiguous, ascending; the last one is active
	// first caches one entry read by Entry, the queue's first as a rule
	// (every pull asks for it); stored under mu shared, cleared under mu
	// exclusive where entries below next can change.
	first atomic.Pointer[indexedEntry]

	bmu sync.Mutex
	// Guarded by bmu (the writer, holding wmu, may read them without bmu).
	buf     []byte // encoded entries [flushed, next) not yet in the active file
	flushed int64
}

// segment is one file of a queue.
type segment struct {
	base int64 // queue offset of the file's first entry
	w    File  // writer's handle, active file only; nil if closed (wmu + mu)

	// r is a read-only handle cached by readers of a file without w. It is
	// installed under mu held shared (CAS) and closed under mu held
	// exclusively: by Sync when no reader used it since the previous Sync
	// (used), or when the file is removed or the store closed.
	r    atomic.Pointer[readFile]
	used atomic.Bool
}

// readFile boxes a cached read-only handle for atomic.Pointer.
type readFile struct{ File }

func newQueue(s *Store, topic string, id int32, dir string) *Queue {
	return &Queue{s: s, topic: topic, id: id, dir: dir}
}

// Topic returns the queue's topic.
func (q *Queue) Topic() string { return q.topic }

// QueueID returns the queue's id.
func (q *Queue) QueueID() int32 { return q.id }

// Next returns the max queue offset: the offset the next Put appends at.
func (q *Queue) Next() int64 { return q.next.Load() }

// Min returns the smallest readable queue offset. Min() == Next() means the
// queue holds no readable entry.
func (q *Queue) Min() int64 { return q.min.Load() }

// LastPos returns Pos+Size of the last entry, or 0 if the queue holds none.
// Retention does not lower it: entries below Min() still count until
// their file is deleted, and the last file never is.
func (q *Queue) LastPos() int64 { return q.lastEnd.Load() }

func (q *Queue) per() int64 { return int64(q.s.opts.EntriesPerFile) }

func (q *Queue) segPath(base int64) string {
	return filepath.Join(q.dir, fileName(base*EntrySize))
}

// Put stores e at queue offset index. REQUIRES: a single caller at a time
// per queue (the dispatcher); concurrent readers are fine.
//
//   - index == Next(): append. Once Put returns, readers see the entry.
//   - index < Next(): re-dispatch. nil if the stored entry equals e (or was
//     already deleted by retention: index < Min()), ErrMismatch otherwise.
//   - index > Next(): ErrGap, except on a queue that has never held an
//     entry, which then starts at index (Min() == index): this is how a
//     queue is rebuilt from a commitlog whose head was deleted.
//
// Put does not fsync and may keep the entry in a small buffer until the
// buffer fills or Sync runs; see the package documentation. A Put that
// fails to write (ENOSPC, EIO) leaves the queue as it was: the caller
// retries the same entry.
func (q *Queue) Put(index int64, e Entry) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.s.closed.Load() {
		return ErrClosed
	}
	if q.werr != nil {
		return q.werr
	}
	next := q.next.Load()
	if index < next {
		return q.verify(index, e)
	}
	if !validEntry(e, q.lastEnd.Load()) {
		return fmt.Errorf("%w: %s/%d offset %d: %+v (previous end %d)",
			ErrInvalidEntry, q.topic, q.id, index, e, q.lastEnd.Load())
	}
	if index > next && (next != 0 || len(q.segs) != 0) {
		return fmt.Errorf("%w: %s/%d put %d, next %d", ErrGap, q.topic, q.id, index, next)
	}
	if err := q.prepareLocked(index); err != nil {
		return err
	}
	q.bmu.Lock()
	q.buf = appendEntry(q.buf, e)
	q.bmu.Unlock()
	q.dirty = true
	q.idle = 0
	active := q.segs[len(q.segs)-1].base
	if full := len(q.buf)+EntrySize > cap(q.buf); full || index+1 == active+q.per() {
		if err := q.flushLocked(); err != nil {
			// NB: not published yet (next), so no reader saw it.
			q.bmu.Lock()
			q.buf = q.buf[:len(q.buf)-EntrySize]
			q.bmu.Unlock()
			return err
		}
		if limit := q.s.opts.WriteBufferMax * EntrySize; full && cap(q.buf) < limit {
			q.bmu.Lock()
			q.buf = make([]byte, 0, min(2*cap(q.buf), limit)) // NB: a busy queue: fewer writes
			q.bmu.Unlock()
		}
	}
	q.lastEnd.Store(e.End())
	q.next.Store(index + 1)
	return nil
}

// verifyAhead is the entries verify reads at once (4.7 KiB).
// NB: read one by one, the catch-up after a kill -9 with 440 MB of 1 KiB
// messages past the consume queues' checkpoint spent 370 of its 730 ms of
// CPU in pread (page cache dropped).
const verifyAhead = 200

// verify compares e with the stored entry at index < Next().
// REQUIRES: wmu held.
func (q *Queue) verify(index int64, e Entry) error {
	if q.s.closed.Load() {
		return ErrClosed
	}
	if index < q.min.Load() {
		return nil // deleted by retention; nothing to compare with
	}
	next := q.next.Load()
	if index < q.vfrom || index >= q.vfrom+int64(len(q.verified)) {
		n := min(verifyAhead, next-index)
		if cap(q.verified) < int(n) {
			q.verified = make([]Entry, verifyAhead)
		}
		q.verified, q.vfrom = q.verified[:n], index
		if err := q.readLocked(index, q.verified); err != nil {
			q.verified = nil
			return err
		}
	}
	got := q.verified[index-q.vfrom]
	if index+1 >= next {
		q.verified = nil // NB: caught up: puts append from here
	}
	if got != e {
		return fmt.Errorf("%w: %s/%d offset %d: stored %+v, put %+v",
			ErrMismatch, q.topic, q.id, index, got, e)
	}
	return nil
}

// prepareLocked makes sure the active file can take the entry at index
// (== next, or the start of a new queue): creates the directory and the
// first file, rolls to a new file when the active one is full, or reopens
// an active file closed for idleness. REQUIRES: wmu held.
func (q *Queue) prepareLocked(index int64) error {
	if cap(q.buf) == 0 {
		q.buf = make([]byte, 0, q.s.opts.WriteBufferEntries*EntrySize)
	}
	n := len(q.segs)
	switch {
	case n == 0:
		if !q.dirMade {
			if err := os.MkdirAll(q.dir, 0o755); err != nil {
				return fmt.Errorf("consumequeue: create %s: %w", q.dir, err)
			}
			q.dirMade, q.syncPaths = true, true
		}
		f, err := q.createFile(index)
		if err != nil {
			return err
		}
		q.mu.Lock()
		q.segs = append(q.segs, &segment{base: index, w: f})
		q.first.Store(nil)
		q.min.Store(index)
		q.next.Store(index)
		q.mu.Unlock()
		q.bmu.Lock()
		q.flushed = index
		q.bmu.Unlock()
	case index == q.segs[n-1].base+q.per():
		// The active file is full; its buffer was flushed by the Put that
		// filled it. Hand the old handle to Sync, which fsyncs and closes it.
		f, err := q.createFile(index)
		if err != nil {
			return err
		}
		q.mu.Lock()
		if old := q.segs[n-1].w; old != nil {
			q.pending = append(q.pending, old)
			q.segs[n-1].w = nil
		}
		q.segs = append(q.segs, &segment{base: index, w: f})
		q.mu.Unlock()
	case q.segs[n-1].w == nil:
		path := q.segPath(q.segs[n-1].base)
		f, err := q.s.opts.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("consumequeue: open %s: %w", path, err)
		}
		q.mu.Lock()
		q.segs[n-1].w = f
		q.mu.Unlock()
	}
	return nil
}

// createFile creates the file whose first entry is base. REQUIRES: wmu held.
func (q *Queue) createFile(base int64) (File, error) {
	path := q.segPath(base)
	f, err := q.s.opts.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("consumequeue: create %s: %w", path, err)
	}
	q.syncDir = true
	return f, nil
}

// fail records err as the queue's sticky error and returns it: for fsync
// errors (the page cache can no longer be trusted) and failed repairs.
// REQUIRES: wmu held.
func (q *Queue) fail(err error) error {
	if q.werr == nil {
		q.werr = err
	}
	return q.werr
}

// flushLocked writes the buffered entries to the active file. A failed
// write changes nothing (the next flush writes the same bytes again).
// REQUIRES: wmu held.
func (q *Queue) flushLocked() error {
	if len(q.buf) == 0 {
		return nil
	}
	if q.werr != nil {
		return q.werr
	}
	seg := q.segs[len(q.segs)-1]
	if seg.w == nil {
		panic("consumequeue: INVARIANT violated: buffered entries without an open active file")
	}
	// NB: readers may copy from buf concurrently; both sides only read it.
	if _, err := seg.w.WriteAt(q.buf, (q.flushed-seg.base)*EntrySize); err != nil {
		return fmt.Errorf("consumequeue: write %s: %w", seg.w.Name(), err)
	}
	q.bmu.Lock()
	q.flushed += int64(len(q.buf) / EntrySize)
	q.buf = q.buf[:0]
	q.bmu.Unlock()
	return nil
}

// Read appends to dst[:0] up to cap(dst) entries starting at queue offset
// from, stopping at Next(), and returns the slice. It returns
// ErrOffsetBelowMin if from < Min() and an empty slice if from >= Next().
// Read is safe for concurrent use with Put and other readers.
func (q *Queue) Read(from int64, dst []Entry) ([]Entry, error) {
	dst = dst[:0]
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.s.closed.Load() {
		return dst, ErrClosed
	}
	if from < q.min.Load() {
		return dst, ErrOffsetBelowMin
	}
	n := min(int64(cap(dst)), q.next.Load()-from)
	if n <= 0 {
		return dst, nil
	}
	dst = dst[:n]
	if err := q.readLocked(from, dst); err != nil {
		return dst[:0], err
	}
	return dst, nil
}

// Entry returns the entry at queue offset index: ErrOffsetBelowMin below
// Min(), ErrOffsetOverflow at or beyond Next().
func (q *Queue) Entry(index int64) (Entry, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.s.closed.Load() {
		return Entry{}, ErrClosed
	}
	if index < q.min.Load() {
		return Entry{}, ErrOffsetBelowMin
	}
	if index >= q.next.Load() {
		return Entry{}, ErrOffsetOverflow
	}
	if f := q.first.Load(); f != nil && f.index == index {
		return f.e, nil
	}
	var one [1]Entry
	if err := q.readLocked(index, one[:]); err != nil {
		return Entry{}, err
	}
	if index == q.min.Load() {
		q.first.Store(&indexedEntry{index: index, e: one[0]})
	}
	return one[0], nil
}

// indexedEntry is an entry and its index.
type indexedEntry struct {
	index int64
	e     Entry
}

// readLocked fills dst with the entries [from, from+len(dst)), which must
// all be below next. REQUIRES: mu held (shared or exclusive) or wmu held.
func (q *Queue) readLocked(from int64, dst []Entry) error {
	end := from + int64(len(dst))
	// Entries still in the write buffer. Everything below flushed is in a
	// file, and file contents below flushed never change under mu/wmu.
	q.bmu.Lock()
	flushed := q.flushed
	for i := max(from, flushed); i < end; i++ {
		o := (i - flushed) * EntrySize
		dst[i-from] = getEntry(q.buf[o : o+EntrySize])
	}
	q.bmu.Unlock()

	for i := from; i < min(end, flushed); {
		k := (i - q.segs[0].base) / q.per()
		seg := q.segs[k]
		stop := min(end, flushed, seg.base+q.per())
		if err := q.readFile(seg, i, dst[i-from:stop-from]); err != nil {
			return err
		}
		i = stop
	}
	return nil
}

// readFile reads len(dst) entries at queue offset from out of one file,
// through the writer's handle or a cached read-only one.
// REQUIRES: mu held (shared or exclusive) or wmu held.
func (q *Queue) readFile(seg *segment, from int64, dst []Entry) error {
	f := seg.w
	if f == nil {
		var err error
		if f, err = q.readHandle(seg); err != nil {
			return err
		}
	}
	var chunk [readChunk * EntrySize]byte
	for len(dst) > 0 {
		n := min(len(dst), readChunk)
		b := chunk[:n*EntrySize]
		if _, err := f.ReadAt(b, (from-seg.base)*EntrySize); err != nil {
			return fmt.Errorf("consumequeue: read %s/%d offset %d: %w", q.topic, q.id, from, err)
		}
		for j := range n {
			dst[j] = getEntry(b[j*EntrySize:])
		}
		dst, from = dst[n:], from+int64(n)
	}
	return nil
}

// readHandle returns seg's cached read-only handle, opening it if needed.
// REQUIRES: mu held (shared or exclusive) or wmu held.
func (q *Queue) readHandle(seg *segment) (File, error) {
	if !seg.used.Load() {
		seg.used.Store(true)
	}
	if r := seg.r.Load(); r != nil {
		return r.File, nil
	}
	f, err := q.s.opts.OpenFile(q.segPath(seg.base), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("consumequeue: %w", err)
	}
	if !seg.r.CompareAndSwap(nil, &readFile{f}) {
		_ = f.Close() // another reader won; use its handle
		return seg.r.Load().File, nil
	}
	return f, nil
}

// SearchByTime returns the first queue offset in [Min(), Next()) whose
// record was stored at or after ts (ms), using storeTime to read a record's
// store timestamp from the commitlog: Next() if every record is older, Min()
// if none is. It assumes store times do not decrease along the queue (the
// commitlog assigns them in append order) and binary-searches.
func (q *Queue) SearchByTime(ts int64, storeTime func(Entry) (int64, error)) (int64, error) {
	lo, hi := q.Min(), q.Next()
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.Entry(mid)
		if err != nil {
			return 0, err
		}
		t, err := storeTime(e)
		if err != nil {
			return 0, fmt.Errorf("consumequeue: %s/%d store time at offset %d: %w", q.topic, q.id, mid, err)
		}
		if t >= ts {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
