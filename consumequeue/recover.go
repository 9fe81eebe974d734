package consumequeue

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

const (
	// recoverChunk is how many entries recovery reads per ReadAt (80 KiB).
	recoverChunk = 4096
	// recoverFiles is how many trailing files recovery scans entry by entry
	// (RocketMQ starts at the third-last file); older files were fsynced
	// long before and are trusted.
	recoverFiles = 3
)

// recoverer holds scratch state shared by the queues of one OpenStore.
type recoverer struct {
	s   *Store
	buf []byte
}

type diskFile struct {
	base int64 // queue offset of the first entry
	size int64 // bytes
}

// recoverQueue loads one queue directory and repairs its tail:
//
//  1. files are ordered by name; a name that is not a multiple of
//     EntriesPerFile*20 away from the first, or a file longer than
//     EntriesPerFile*20 bytes, is ErrCorrupt (the geometry changed);
//  2. the queue's files end at the first missing file or the first short
//     file (a short non-last file is a torn roll);
//  3. the last recoverFiles files are scanned; the queue ends at the first
//     invalid entry (Pos < 0, Size <= 0, position going backwards, an
//     all-zero preallocated or torn entry) or at a partial trailing entry;
//  4. everything past that end is cut: the file holding it is truncated,
//     later files are removed (the first file is always kept, so a queue
//     that starts at a non-zero offset keeps its offsets).
//
// A leading run of RocketMQ blank entries in the first file is skipped and
// puts Min() past it.
func (r *recoverer) recoverQueue(q *Queue) error {
	q.dirMade = true
	dents, err := os.ReadDir(q.dir)
	if err != nil {
		return fmt.Errorf("consumequeue: %w", err)
	}
	per := q.per()
	var files []diskFile
	for _, d := range dents {
		off, ok := parseFileName(d.Name())
		if !ok || !d.Type().IsRegular() {
			continue
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("consumequeue: %w", err)
		}
		if off%EntrySize != 0 || info.Size() > per*EntrySize {
			return fmt.Errorf("%w: %s/%s: offset or size does not fit %d entries per file",
				ErrCorrupt, q.dir, d.Name(), per)
		}
		files = append(files, diskFile{base: off / EntrySize, size: info.Size()})
	}
	if len(files) == 0 {
		return nil
	}
	slices.SortFunc(files, func(a, b diskFile) int { return cmp.Compare(a.base, b.base) })
	for _, f := range files[1:] {
		if (f.base-files[0].base)%per != 0 {
			return fmt.Errorf("%w: %s: file %s not aligned to %d entries per file",
				ErrCorrupt, q.dir, fileName(f.base*EntrySize), per)
		}
	}
	last := len(files) - 1
	for k, f := range files {
		if k > 0 && f.base != files[k-1].base+per {
			last = k - 1
			break
		}
		if f.size < per*EntrySize {
			last = k
			break
		}
	}

	q.blankEnd, err = r.blankPrefix(q, files[0])
	if err != nil {
		return err
	}
	from := max(0, last-(recoverFiles-1))
	var prevEnd int64
	if from > 0 {
		e, err := r.readOne(q, files[from-1].base, per-1)
		if err != nil {
			return err
		}
		prevEnd = e.End()
	}
	end := files[last].base + files[last].size/EntrySize
	for _, f := range files[from : last+1] {
		stop, e, err := r.scan(q, f, prevEnd)
		if err != nil {
			return err
		}
		prevEnd = e
		if stop < f.base+f.size/EntrySize {
			end = stop
			break
		}
	}
	if err := r.cut(q, files, last, end); err != nil {
		return err
	}
	q.next.Store(end)
	q.min.Store(min(max(files[0].base, q.blankEnd), end))
	q.flushed = end
	if end > max(files[0].base, q.blankEnd) {
		q.lastEnd.Store(prevEnd)
	}
	return nil
}

// scan validates the whole entries of one file in order, and returns the
// index of the first invalid one (or the file's end) and the end of the
// last valid one.
func (r *recoverer) scan(q *Queue, df diskFile, prevEnd int64) (stop, lastEnd int64, err error) {
	f, err := r.s.opts.OpenFile(q.segPath(df.base), os.O_RDONLY, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("consumequeue: %w", err)
	}
	defer f.Close()
	n := df.size / EntrySize
	for i := int64(0); i < n; {
		c := min(n-i, recoverChunk)
		b := r.buf[:c*EntrySize]
		if _, err := f.ReadAt(b, i*EntrySize); err != nil {
			return 0, 0, fmt.Errorf("consumequeue: read %s: %w", f.Name(), err)
		}
		for j := int64(0); j < c; j++ {
			idx := df.base + i + j
			if idx < q.blankEnd {
				continue
			}
			e := getEntry(b[j*EntrySize:])
			if e == blankEntry || !validEntry(e, prevEnd) {
				return idx, prevEnd, nil
			}
			prevEnd = e.End()
		}
		i += c
	}
	return df.base + n, prevEnd, nil
}

// blankPrefix returns the index of the first entry of the first file that
// is not a RocketMQ blank entry. Only queues imported from RocketMQ have
// such a prefix, so the linear scan past the first entry is rare.
func (r *recoverer) blankPrefix(q *Queue, df diskFile) (int64, error) {
	n := df.size / EntrySize
	if n == 0 {
		return df.base, nil
	}
	if e, err := r.readOne(q, df.base, 0); err != nil || e != blankEntry {
		return df.base, err // the common case: no blank prefix
	}
	f, err := r.s.opts.OpenFile(q.segPath(df.base), os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("consumequeue: %w", err)
	}
	defer f.Close()
	for i := int64(0); i < n; {
		c := min(n-i, recoverChunk)
		b := r.buf[:c*EntrySize]
		if _, err := f.ReadAt(b, i*EntrySize); err != nil {
			return 0, fmt.Errorf("consumequeue: read %s: %w", f.Name(), err)
		}
		for j := int64(0); j < c; j++ {
			if getEntry(b[j*EntrySize:]) != blankEntry {
				return df.base + i + j, nil
			}
		}
		i += c
	}
	return df.base + n, nil
}

// readOne reads entry number i of the file starting at base.
func (r *recoverer) readOne(q *Queue, base, i int64) (Entry, error) {
	f, err := r.s.opts.OpenFile(q.segPath(base), os.O_RDONLY, 0)
	if err != nil {
		return Entry{}, fmt.Errorf("consumequeue: %w", err)
	}
	defer f.Close()
	var b [EntrySize]byte
	if _, err := f.ReadAt(b[:], i*EntrySize); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Entry{}, fmt.Errorf("consumequeue: read %s: %w", f.Name(), err)
	}
	return getEntry(b[:]), nil
}

// cut makes the files match a queue ending at end: files wholly past it
// (except the first) and files after last are removed, the file holding it
// is truncated. The remaining files become q.segs.
func (r *recoverer) cut(q *Queue, files []diskFile, last int, end int64) error {
	per, log := q.per(), r.s.opts.Logger
	removed := false
	for k, f := range files {
		path := q.segPath(f.base)
		if k > last || (k > 0 && f.base >= end) {
			log.Warn("consumequeue: removing file past the end of the queue",
				"topic", q.topic, "queue_id", q.id, "file", path, "next", end)
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("consumequeue: %w", err)
			}
			removed = true
			continue
		}
		q.segs = append(q.segs, &segment{base: f.base})
		want := (min(end, f.base+per) - f.base) * EntrySize
		if f.size == want {
			continue
		}
		log.Warn("consumequeue: truncating torn or invalid tail",
			"topic", q.topic, "queue_id", q.id, "file", path, "size", f.size, "new_size", want)
		if err := truncatePath(r.s.opts.OpenFile, path, want); err != nil {
			return err
		}
	}
	if removed {
		return syncDir(r.s.opts.OpenFile, q.dir)
	}
	return nil
}

func truncatePath(open OpenFileFunc, path string, size int64) error {
	f, err := open(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("consumequeue: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("consumequeue: truncate %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("consumequeue: fsync %s: %w", path, err)
	}
	return nil
}
