package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// physStart is the first physically stored entry: the first file's base,
// or past a RocketMQ blank prefix. REQUIRES: wmu held, len(segs) > 0.
func (q *Queue) physStart() int64 { return max(q.segs[0].base, q.blankEnd) }

// search returns the first index in [lo, hi) whose entry satisfies pred, or
// hi; pred must be false then true along the queue (entries are ordered by
// position). REQUIRES: wmu held.
func (q *Queue) search(lo, hi int64, pred func(Entry) bool) (int64, error) {
	var one [1]Entry
	for lo < hi {
		mid := lo + (hi-lo)/2
		if err := q.readLocked(mid, one[:]); err != nil {
			return 0, err
		}
		if pred(one[0]) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// truncateAfterPos drops the entries ending beyond pos. REQUIRES: syncMu.
func (q *Queue) truncateAfterPos(pos int64) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	q.verified = nil
	if q.werr != nil {
		return q.werr
	}
	if len(q.segs) == 0 || q.lastEnd.Load() <= pos {
		return nil
	}
	if err := q.flushLocked(); err != nil {
		return err
	}
	lo, next := q.physStart(), q.next.Load()
	j, err := q.search(lo, next, func(e Entry) bool { return e.End() > pos })
	if err != nil {
		return err
	}
	var lastEnd int64
	if j > lo {
		var one [1]Entry
		if err := q.readLocked(j-1, one[:]); err != nil {
			return err
		}
		lastEnd = one[0].End()
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	k := int((j - q.segs[0].base) / q.per())
	keep := j - q.segs[k].base
	cut := k + 1
	if keep == 0 && k > 0 {
		cut = k // an empty file other than the first goes too
	} else if err := q.truncateFile(q.segs[k], keep); err != nil {
		return err
	}
	for i := cut; i < len(q.segs); i++ {
		if err := q.removeFile(q.segs[i]); err != nil {
			return err
		}
	}
	q.segs = q.segs[:cut]
	q.first.Store(nil)
	q.next.Store(j)
	q.min.Store(min(q.min.Load(), j))
	q.lastEnd.Store(lastEnd)
	// The kept last file was fsynced by truncateFile, or is a sealed file
	// whose handle is pending for the next Sync.
	q.dirty = false
	q.bmu.Lock()
	q.flushed = j
	q.bmu.Unlock()
	q.s.opts.Logger.Warn("consumequeue: truncated entries past the commitlog end",
		"topic", q.topic, "queue_id", q.id, "pos", pos, "next", next, "new_next", j)
	return q.fail0(syncDir(q.s.opts.OpenFile, q.dir))
}

// truncateFile cuts a file to keep entries and fsyncs it.
// REQUIRES: wmu and mu held.
func (q *Queue) truncateFile(seg *segment, keep int64) error {
	f := seg.w
	if f == nil {
		var err error
		if f, err = q.s.opts.OpenFile(q.segPath(seg.base), os.O_RDWR, 0); err != nil {
			return q.fail(fmt.Errorf("consumequeue: %w", err))
		}
		defer f.Close()
	}
	if err := f.Truncate(keep * EntrySize); err != nil {
		return q.fail(fmt.Errorf("consumequeue: truncate: %w", err))
	}
	if err := f.Sync(); err != nil {
		return q.fail(fmt.Errorf("consumequeue: fsync %s: %w", f.Name(), err))
	}
	return nil
}

// removeFile closes and deletes one file. REQUIRES: wmu and mu held.
func (q *Queue) removeFile(seg *segment) error {
	seg.closeHandles() // being deleted; nothing to lose
	if err := os.Remove(q.segPath(seg.base)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return q.fail(fmt.Errorf("consumequeue: %w", err))
	}
	return nil
}

// fail0 is fail for a possibly nil error. REQUIRES: wmu held.
func (q *Queue) fail0(err error) error {
	if err == nil {
		return nil
	}
	return q.fail(err)
}

// deleteBelowPos is retention for one queue. REQUIRES: syncMu.
func (q *Queue) deleteBelowPos(minPos int64) (int, error) {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.werr != nil {
		return 0, q.werr
	}
	if len(q.segs) == 0 {
		return 0, nil
	}
	if err := q.flushLocked(); err != nil {
		return 0, err
	}
	removed := 0
	var one [1]Entry
	for len(q.segs) > 1 {
		first := q.segs[0]
		if err := q.readLocked(first.base+q.per()-1, one[:]); err != nil {
			return removed, err
		}
		if one[0].End() > minPos {
			break
		}
		q.mu.Lock()
		q.segs = slices.Delete(q.segs, 0, 1)
		q.min.Store(max(q.min.Load(), q.segs[0].base))
		err := q.removeFile(first)
		q.mu.Unlock()
		if err != nil {
			return removed, err
		}
		removed++
	}
	lo := max(q.min.Load(), q.physStart())
	i, err := q.search(lo, q.next.Load(), func(e Entry) bool { return e.End() > minPos })
	if err != nil {
		return removed, err
	}
	if i > q.min.Load() {
		q.mu.Lock()
		q.min.Store(i)
		q.mu.Unlock()
	}
	if removed > 0 {
		return removed, q.fail0(syncDir(q.s.opts.OpenFile, q.dir))
	}
	return 0, nil
}

// sync flushes the buffer and fsyncs what changed since the last call; see
// Store.Sync. Parent directories that need an fsync are added to parents,
// for the Store to fsync once. REQUIRES: syncMu (nothing else closes files
// meanwhile).
// With fsync false the buffers are written and sealed files closed, but
// nothing is fsynced: the caller makes the whole file system durable at once
// (syncfs).
func (q *Queue) sync(closeIdle, fsync bool, parents map[string]bool) error {
	q.wmu.Lock()
	if q.werr != nil {
		q.wmu.Unlock()
		return q.werr
	}
	if err := q.flushLocked(); err != nil {
		q.wmu.Unlock()
		return err
	}
	files := q.pending // sealed files: fsync, then close
	sealed := len(files)
	q.pending = nil
	switch {
	case q.dirty:
		if f := q.segs[len(q.segs)-1].w; f != nil {
			files = append(files, f)
		}
		q.dirty, q.idle = false, 0
	case closeIdle && len(q.segs) > 0:
		if q.idle++; q.idle >= 2 && q.segs[len(q.segs)-1].w != nil {
			q.mu.Lock()
			_ = q.segs[len(q.segs)-1].w.Close() // fsynced by an earlier Sync
			q.segs[len(q.segs)-1].w = nil
			q.mu.Unlock()
			q.bmu.Lock()
			q.buf = nil // NB: flushed above; the next Put starts small again
			q.bmu.Unlock()
		}
	}
	if closeIdle {
		q.closeIdleReaders()
	}
	syncOwn := q.syncDir
	if q.syncPaths {
		topicDir := filepath.Dir(q.dir)
		parents[topicDir] = true
		parents[filepath.Dir(topicDir)] = true
	}
	q.syncDir, q.syncPaths = false, false
	q.wmu.Unlock()

	// NB: fsync runs without wmu so Put is not stalled by the disk.
	var err error
	for i, f := range files {
		if !fsync {
			if i < sealed {
				_ = f.Close()
			}
			continue
		}
		if e := f.Sync(); e != nil && err == nil {
			err = fmt.Errorf("consumequeue: fsync %s: %w", f.Name(), e)
		}
		if i < sealed {
			_ = f.Close() // fsync already reported any write error
		}
	}
	if syncOwn && fsync {
		if e := syncDir(q.s.opts.OpenFile, q.dir); e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		q.wmu.Lock()
		err = q.fail(err)
		q.wmu.Unlock()
	}
	return err
}

// close releases the queue's file handles. REQUIRES: syncMu, after sync.
func (q *Queue) close() {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, seg := range q.segs {
		seg.closeHandles()
	}
	for _, f := range q.pending {
		_ = f.Close()
	}
	q.pending = nil
}

// closeIdleReaders closes the cached read handles that no reader used since
// the previous call. REQUIRES: wmu held.
func (q *Queue) closeIdleReaders() {
	var idle []*segment
	for _, seg := range q.segs {
		if seg.r.Load() != nil && !seg.used.Swap(false) {
			idle = append(idle, seg)
		}
	}
	if len(idle) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, seg := range idle {
		if !seg.used.Load() { // not picked up again meanwhile
			if r := seg.r.Swap(nil); r != nil {
				_ = r.Close()
			}
		}
	}
}

// closeHandles closes both handles of a segment. REQUIRES: wmu and mu held.
func (seg *segment) closeHandles() {
	if seg.w != nil {
		_ = seg.w.Close()
		seg.w = nil
	}
	if r := seg.r.Swap(nil); r != nil {
		_ = r.Close()
	}
}
