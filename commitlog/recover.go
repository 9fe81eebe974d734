package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// RecoveryInfo reports what Open found and did.
type RecoveryInfo struct {
	// Clean is true when the previous process closed the log (no abort file).
	Clean bool
	// FromCheckpoint is true when a verified checkpoint limited the scan.
	FromCheckpoint bool
	// CheckpointProblem says why an existing checkpoint was not used.
	CheckpointProblem string
	// ScanFrom is where the scan started; Scanned how many bytes it covered.
	ScanFrom Offset
	Scanned  int64
	// End is the recovered end of the log (Next()).
	End Offset
	// Truncated is set when the tail held a torn or invalid record: the log
	// was cut at End and TruncateReason says what was found there.
	Truncated      bool
	TruncateReason string
	// Corrupt lists records that failed validation in older segments; the
	// rest of each such segment is skipped by recovery.
	Corrupt []CorruptionError
	// RemovedSegments lists empty trailing segment files that were deleted.
	RemovedSegments []string
}

// recover opens the segment files and finds the end of the log. See the
// package documentation for the rules.
func (l *Log) recover() error {
	info := &l.recovery
	_, err := os.Stat(filepath.Join(l.dir, abortName))
	info.Clean = errors.Is(err, fs.ErrNotExist)

	cp, haveCP, cpErr := readCheckpoint(l.dir)
	if cpErr != nil {
		info.CheckpointProblem = cpErr.Error()
	}
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	for _, b := range bases {
		path := filepath.Join(l.dir, segmentName(b))
		f, err := l.opts.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("commitlog: open segment %s: %w", segmentName(b), err)
		}
		l.segs = append(l.segs, newSegmentOf(b, path, f))
	}
	if len(l.segs) == 0 {
		// A new log, or every segment is gone: never reuse offsets that
		// consume queues may still point at.
		var base Offset
		if haveCP {
			base = l.alignUp(cp.Next)
		}
		l.setEnd(base, -1)
		l.min.Store(int64(base))
		info.ScanFrom, info.End = base, base
		return nil
	}
	if err := l.dropEmptyTail(); err != nil {
		return err
	}
	first, last := l.segs[0], l.segs[len(l.segs)-1]
	l.min.Store(int64(first.base))
	lastEnd := last.base + Offset(l.opts.SegmentSize)

	start, tail := first.base, Offset(-1)
	if !haveCP && cpErr == nil {
		info.CheckpointProblem = "no checkpoint file"
	}
	if haveCP {
		if problem := l.verifyCheckpoint(cp, first.base, lastEnd); problem != "" {
			info.CheckpointProblem = problem
		} else {
			start, tail = cp.Next, cp.Tail
			info.FromCheckpoint = true
		}
	}
	info.ScanFrom = start

	s := &Scanner{l: l, pos: start, prevAt: -1, recover: true, buf: make([]byte, scanBufSize)}
	s.limit = func() Offset { return lastEnd }
	end := start
	for {
		ok := s.Scan()
		if s.prevAt >= start {
			tail = s.prevAt
		}
		if ok {
			end = s.Pos()
			continue
		}
		inLast := s.pos >= last.base
		if s.Err() == nil && !s.zero {
			// Ran to the end of the last segment: it ended with a blank.
			end = s.pos
			break
		}
		var ce *CorruptionError
		if err := s.Err(); err != nil && !errors.As(err, &ce) {
			return fmt.Errorf("commitlog: recover: %w", err)
		}
		if inLast {
			end = s.pos
			if ce != nil {
				info.Truncated, info.TruncateReason = true, ce.Reason
			}
			break
		}
		if ce == nil {
			ce = s.corrupt("zero-filled bytes before the end of an older segment")
		}
		torn, err := l.tornEnd(s.pos)
		if err != nil {
			return err
		}
		if !info.Clean && torn {
			// NB: a power loss keeps any subset of what was not fsynced,
			// so a newer segment's writes can survive the end of an
			// older one's: a bad record (or none) followed only by
			// zeros up to its segment's end is the torn end of the log,
			// not corruption (which has a record or the blank filler
			// after it), and what follows is no prefix of what was
			// written. The log ends here and the newer segments go.
			end = s.pos
			info.Truncated, info.TruncateReason = true, ce.Reason+" (the torn end of an older segment: the log ends there)"
			if last, err = l.dropSegmentsAfter(end); err != nil {
				return err
			}
			break
		}
		info.Corrupt = append(info.Corrupt, *ce)
		l.opts.Logger.Error("commitlog: corruption in an older segment; the rest of it is skipped",
			"segment", ce.Segment, "pos", ce.Pos, "reason", ce.Reason)
		s.SkipSegment()
		end = s.pos
	}
	info.Scanned = int64(end - start)
	info.End = end
	lastEnd = last.base + Offset(l.opts.SegmentSize) // NB: segments may have gone
	if err := l.truncateTail(last, end, !info.Clean || info.Truncated); err != nil {
		return err
	}
	// What the scan found is on disk now (data of a killed process may have
	// been only in the page cache).
	for _, seg := range l.segs {
		if seg.base+Offset(l.opts.SegmentSize) > start {
			if err := seg.f.Sync(); err != nil {
				return fmt.Errorf("commitlog: sync segment %s: %w", seg.name(), err)
			}
		}
	}
	l.setEnd(end, tail)
	if end < lastEnd {
		l.active, l.wpos = last, int64(end-last.base)
	}
	if !info.Clean || info.Truncated || len(info.Corrupt) > 0 || info.CheckpointProblem != "" {
		l.opts.Logger.Warn("commitlog: recovered", "clean", info.Clean, "from_checkpoint", info.FromCheckpoint,
			"checkpoint_problem", info.CheckpointProblem, "scan_from", info.ScanFrom, "scanned", info.Scanned,
			"end", info.End, "truncated", info.Truncated, "reason", info.TruncateReason, "corrupt", len(info.Corrupt))
	}
	return nil
}

// tornEnd reports whether the record at pos is the torn end of its
// segment: what its TOTALSIZE claims (or its first 4 bytes, when that is
// no record size) is followed only by zeros up to the segment's end.
func (l *Log) tornEnd(pos Offset) (bool, error) {
	seg := l.segmentAt(pos)
	if seg == nil {
		return false, nil
	}
	var hdr [4]byte
	if _, err := seg.f.ReadAt(hdr[:], int64(pos-seg.base)); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("commitlog: read segment %s at %d: %w", seg.name(), pos-seg.base, err)
	}
	size := Offset(int32(binary.BigEndian.Uint32(hdr[:])))
	switch {
	case size == 0:
	case size >= Offset(l.opts.MinRecord) && size <= Offset(l.opts.MaxRecord) && pos+size <= seg.base+Offset(l.opts.SegmentSize):
		pos += size
	default:
		pos += Offset(len(hdr))
	}
	return l.zeroToSegmentEnd(pos)
}

// zeroToSegmentEnd reports whether the bytes from pos to the end of its
// segment are all zero (or past the end of the file). pos at a segment's
// end counts as zero.
func (l *Log) zeroToSegmentEnd(pos Offset) (bool, error) {
	if pos%Offset(l.opts.SegmentSize) == 0 {
		return true, nil
	}
	seg := l.segmentAt(pos)
	if seg == nil {
		return false, nil
	}
	buf := make([]byte, 64<<10)
	for off := int64(pos - seg.base); off < l.opts.SegmentSize; {
		n, err := seg.f.ReadAt(buf[:min(int64(len(buf)), l.opts.SegmentSize-off)], off)
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("commitlog: read segment %s at %d: %w", seg.name(), off, err)
		}
		off += int64(n)
	}
	return true, nil
}

// segmentAt returns the open segment holding pos, nil if none.
// REQUIRES: recovery (no concurrent change to segs).
func (l *Log) segmentAt(pos Offset) *segment {
	for _, seg := range l.segs {
		if pos >= seg.base && pos < seg.base+Offset(l.opts.SegmentSize) {
			return seg
		}
	}
	return nil
}

// dropSegmentsAfter deletes the segments after the one holding end (a log
// that ends early in an older segment) and returns the new last segment.
func (l *Log) dropSegmentsAfter(end Offset) (*segment, error) {
	keep := len(l.segs)
	for keep > 1 && l.segs[keep-1].base > end {
		keep--
	}
	// NB: end at a segment's very start belongs to the segment before.
	if keep > 1 && l.segs[keep-1].base == end {
		keep--
	}
	for _, seg := range l.segs[keep:] {
		l.opts.Logger.Warn("commitlog: deleting a segment written past the torn end of the log", "segment", seg.name(), "end", end)
		if err := seg.close(); err != nil {
			return nil, fmt.Errorf("commitlog: close segment %s: %w", seg.name(), err)
		}
		if err := os.Remove(seg.path); err != nil {
			return nil, fmt.Errorf("commitlog: delete segment %s: %w", seg.name(), err)
		}
		l.recovery.RemovedSegments = append(l.recovery.RemovedSegments, seg.name())
	}
	l.segs = l.segs[:keep]
	if err := l.syncDir(); err != nil {
		return nil, fmt.Errorf("commitlog: sync %s: %w", l.dir, err)
	}
	return l.segs[keep-1], nil
}

// setEnd sets the recovered end of the log; durable since recovery synced
// it. NB: under tailMu: an empty replica's first AppendRaw moves its end
// while the flusher runs.
func (l *Log) setEnd(end, tail Offset) {
	l.tailMu.Lock()
	l.next.Store(int64(end))
	l.durable.Store(int64(end))
	l.tailStart = tail
	l.cpNext, l.cpTail = end, tail
	l.tailMu.Unlock()
}

func (l *Log) alignUp(off Offset) Offset {
	ss := Offset(l.opts.SegmentSize)
	return (off + ss - 1) / ss * ss
}

// listSegments returns the base offsets of the segment files, sorted, after
// checking that they are aligned and contiguous.
func (l *Log) listSegments() ([]Offset, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("commitlog: read dir: %w", err)
	}
	var bases []Offset
	for _, e := range entries {
		if b, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	ss := Offset(l.opts.SegmentSize)
	for i, b := range bases {
		if b%ss != 0 {
			return nil, fmt.Errorf("commitlog: segment %s is not aligned to the segment size %d: was the log written with another segment_size?",
				segmentName(b), ss)
		}
		if i > 0 && b != bases[i-1]+ss {
			return nil, fmt.Errorf("commitlog: segments missing between %s and %s", segmentName(bases[i-1]), segmentName(b))
		}
	}
	return bases, nil
}

// dropEmptyTail deletes trailing segments whose first record slot is zero: a
// segment created just before a crash. The one before then becomes the tail.
func (l *Log) dropEmptyTail() error {
	for len(l.segs) > 1 {
		last := l.segs[len(l.segs)-1]
		var hdr [4]byte
		n, err := last.f.ReadAt(hdr[:], 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("commitlog: read segment %s: %w", last.name(), err)
		}
		if n == 4 && binary.BigEndian.Uint32(hdr[:]) != 0 {
			return nil
		}
		last.close()
		if err := os.Remove(last.path); err != nil {
			return fmt.Errorf("commitlog: remove empty segment %s: %w", last.name(), err)
		}
		l.recovery.RemovedSegments = append(l.recovery.RemovedSegments, last.name())
		l.segs = l.segs[:len(l.segs)-1]
	}
	return l.syncDir()
}

// verifyCheckpoint returns "" when the records the checkpoint says end at
// cp.Next are intact, or why the checkpoint cannot be trusted. cp.Tail is
// the last record (or blank) before cp.Next; a checkpoint saved by an
// earlier version after a batch append names the batch's first record
// instead, so a run of whole records from cp.Tail to cp.Next is checked
// record by record and accepted too.
func (l *Log) verifyCheckpoint(cp checkpoint, first, lastEnd Offset) string {
	if cp.Next < first || cp.Next > lastEnd {
		return fmt.Sprintf("checkpoint offset %d outside the segments [%d, %d]", cp.Next, first, lastEnd)
	}
	if cp.Tail < first {
		if cp.Next == first {
			return ""
		}
		return fmt.Sprintf("checkpoint record %d is below the first segment %d", cp.Tail, first)
	}
	seg := l.segmentFor(cp.Tail)
	if seg == nil || cp.Next-cp.Tail < envelopeSize || cp.Next > l.segmentEnd(cp.Tail) {
		return fmt.Sprintf("checkpoint record %d..%d not in a segment", cp.Tail, cp.Next)
	}
	for at := cp.Tail; at < cp.Next; {
		size, problem := l.verifyCheckpointRecord(seg, at, cp.Next)
		if problem != "" {
			return problem
		}
		at += size
	}
	return ""
}

// verifyCheckpointRecord checks the record or blank at at, which must end
// at or before next, and returns its size.
func (l *Log) verifyCheckpointRecord(seg *segment, at, next Offset) (Offset, string) {
	var hdr [envelopeSize]byte
	if n, err := seg.readAt(hdr[:], int64(at-seg.base)); n < envelopeSize {
		return 0, fmt.Sprintf("checkpoint record at %d unreadable: %v", at, err)
	}
	size := Offset(int32(binary.BigEndian.Uint32(hdr[0:4])))
	magic := int32(binary.BigEndian.Uint32(hdr[4:8]))
	if size < envelopeSize || at+size > next {
		return 0, fmt.Sprintf("checkpoint record at %d has TOTALSIZE %d, want at most %d", at, size, next-at)
	}
	switch {
	case magic == BlankMagic:
		if at+size != l.segmentEnd(at) || at+size != next {
			return 0, fmt.Sprintf("checkpoint blank at %d does not end its segment", at)
		}
	case magic == RecordMagic && size <= Offset(l.opts.MaxRecord):
		rec := make([]byte, size)
		if n, err := seg.readAt(rec, int64(at-seg.base)); n < len(rec) {
			return 0, fmt.Sprintf("checkpoint record at %d unreadable: %v", at, err)
		}
		if v := l.opts.Validate; v != nil {
			if err := v(rec, at, true); err != nil {
				return 0, fmt.Sprintf("checkpoint record at %d invalid: %v", at, err)
			}
		}
	default:
		return 0, fmt.Sprintf("checkpoint record at %d has bad magic %#08x or size %d", at, uint32(magic), size)
	}
	return size, ""
}

// truncateTail cuts the last segment at end and zero-fills the rest, so that
// stale bytes past the end of the log can never be read as records. zero
// selects the cut even when the scan ended at zeros (after a crash a torn
// write may have left bytes past the first zero).
func (l *Log) truncateTail(last *segment, end Offset, zero bool) error {
	lastEnd := last.base + Offset(l.opts.SegmentSize)
	if end >= lastEnd || !zero {
		return nil
	}
	pos := int64(end - last.base)
	if err := last.f.Truncate(pos); err != nil {
		return fmt.Errorf("commitlog: truncate segment %s at %d: %w", last.name(), pos, err)
	}
	if !l.opts.NoPreallocate {
		if err := last.f.Preallocate(l.opts.SegmentSize); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			l.opts.Logger.Warn("commitlog: re-preallocate truncated segment", "segment", last.name(), "err", err)
		}
	}
	return nil
}
