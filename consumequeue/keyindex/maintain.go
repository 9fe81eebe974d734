package keyindex

import (
	"errors"
	"fmt"
	"os"
)

// sealIfDone seals an active file that is full or has another geometry than
// the options ask for new files. REQUIRES: mu held.
func (x *Index) sealIfDone(a *indexFile) error {
	if a.count >= x.opts.EntriesPerFile || a.slots != x.opts.SlotsPerFile {
		return x.seal(a)
	}
	return nil
}

// TruncateAfterPos forgets every entry whose position is at or beyond pos
// (the commitlog end after recovery: no record starts there or later), so
// that re-dispatched records are indexed again and Query never returns
// positions past the log. Whole files are removed; the newest file that
// keeps entries becomes the active one again, its slot table restored by
// undoing the removed entries (each one's prevIndex was its slot's head).
// Meant for recovery, before Put and Query run.
func (x *Index) TruncateAfterPos(pos int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if x.werr != nil {
		return x.werr
	}
	removed := false
	defer func() {
		x.maxPos.Store(-1)
		if n := len(x.files); n > 0 {
			x.maxPos.Store(x.files[n-1].endPos)
		}
	}()
	for len(x.files) > 0 {
		n := len(x.files)
		a := x.files[n-1]
		if a.endPos < pos {
			break
		}
		if a.beginPos < pos {
			kept, err := x.truncateFile(a, pos)
			if err != nil || kept {
				if removed && err == nil {
					err = x.fail0(syncDir(x.opts.OpenFile, x.dir))
				}
				return err
			}
			a = x.files[n-1] // reactivated copy, now empty
		}
		if a.f != nil {
			_ = a.f.Close() // being removed
			a.f = nil
		}
		if err := os.Remove(a.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return x.fail(fmt.Errorf("keyindex: %w", err))
		}
		if a == x.active {
			x.active = nil
		}
		x.files = x.files[:n-1]
		removed = true
	}
	if removed {
		return x.fail0(syncDir(x.opts.OpenFile, x.dir))
	}
	return nil
}

// truncateFile removes a's entries at or beyond pos; kept reports whether
// any entry is left. A sealed file is reopened as the active one (rebuilt
// from its entries into a new struct, since queries may hold the old one).
// REQUIRES: mu held; a is the newest file.
func (x *Index) truncateFile(a *indexFile, pos int64) (kept bool, err error) {
	if a != x.active {
		na, _, err := x.loadActive(a.path, a.seq)
		if err != nil {
			return false, x.fail(err)
		}
		if na == nil {
			return false, nil
		}
		x.files[len(x.files)-1], x.active, a = na, na, na
	} else if err := x.flush(a); err != nil {
		return false, err
	}
	for a.count > 1 {
		e, err := a.readEntry(a.f, a.count-1)
		if err != nil {
			return false, x.fail(err)
		}
		if e.pos < pos {
			a.endPos = e.pos
			break
		}
		a.slotTab[e.hash%a.slots] = e.prev
		a.count--
	}
	if a.count == 1 {
		return false, nil
	}
	a.flushed = a.count
	if err := a.f.Truncate(a.entryOff(a.count)); err != nil {
		return false, x.fail(fmt.Errorf("keyindex: truncate %s: %w", a.path, err))
	}
	if err := x.writeHeader(a); err != nil {
		return false, err
	}
	if err := x.fsyncLocked(a); err != nil {
		return false, err
	}
	return true, x.sealIfDone(a)
}

// DeleteBelowPos is retention: it deletes the files, oldest first and never
// the newest, whose entries all point below minPos (the commitlog's new min
// offset).
func (x *Index) DeleteBelowPos(minPos int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	removed := false
	for len(x.files) > 1 && x.files[0].endPos < minPos {
		if err := os.Remove(x.files[0].path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("keyindex: %w", err)
		}
		x.files = x.files[1:]
		removed = true
	}
	if removed {
		return syncDir(x.opts.OpenFile, x.dir)
	}
	return nil
}

// fail0 is fail for a possibly nil error. REQUIRES: mu held.
func (x *Index) fail0(err error) error {
	if err == nil {
		return nil
	}
	return x.fail(err)
}
