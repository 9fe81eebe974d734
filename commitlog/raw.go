package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Replicas: a slave's log is a byte-for-byte copy of its master's, written
// with AppendRaw in the pieces the replication stream brings, which are not
// aligned to records. The pieces are written as they come (Written), but a
// record is published (Next, scanners, readers) only once its last byte is
// in: the dispatcher never sees half a record, and a crash leaves a torn
// tail that recovery cuts, as after any crash.

// ErrRawGap is returned by AppendRaw for bytes that do not start where the
// log's written bytes end.
var ErrRawGap = errors.New("commitlog: replicated bytes do not continue the log")

// rawParser follows record boundaries through raw appends.
// Appender-owned, like wpos.
type rawParser struct {
	hdr  [envelopeSize]byte
	hdrN int    // bytes of hdr filled: the envelope at the boundary
	end  Offset // end of the record whose envelope was read; 0 between records
	last Offset // start of the last complete record or blank
}

// Written returns the end of the bytes written: Next, plus, on a replica,
// the part of a record whose rest has not arrived yet. A replica reports
// it to its master as the offset to continue from.
func (l *Log) Written() Offset {
	return max(Offset(l.written.Load()), l.Next())
}

// AppendRaw writes bytes copied from another log at at, which must be
// Written() (or, for an empty log, the start of a segment: a replica that
// starts from what its master retains). The bytes must not cross a
// segment's end. Complete records are published as their last byte lands.
// A malformed envelope refuses the bytes from the record it starts, and
// leaves Written() at Next().
//
// REQUIRES: not called concurrently with itself or Append.
func (l *Log) AppendRaw(at Offset, data []byte) error {
	if err := l.writable(); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	ss := Offset(l.opts.SegmentSize)
	if w := l.Written(); at != w {
		if !l.emptyLog() || at%ss != 0 {
			return fmt.Errorf("%w: %d bytes at %d, log written to %d", ErrRawGap, len(data), at, w)
		}
		l.setEnd(at, -1)
		l.min.Store(int64(at))
		l.written.Store(int64(at))
	}
	if at/ss != (at+Offset(len(data))-1)/ss {
		return fmt.Errorf("%w: %d bytes at %d cross the end of a %d-byte segment", ErrRawGap, len(data), at, ss)
	}
	if l.active == nil || at == l.active.base+ss {
		seg, err := l.newSegment(at)
		if err != nil {
			l.failWrite(err, -1, 0)
			return l.stickyErr()
		}
		l.segMu.Lock()
		l.segs = append(l.segs, seg)
		l.segMu.Unlock()
		l.active, l.wpos = seg, 0
		l.precreate(at + ss)
	}
	if l.warm != nil {
		l.warm.claim(at + Offset(len(data)))
	}
	if _, err := l.active.f.WriteAt(data, l.wpos); err != nil {
		l.failWrite(fmt.Errorf("write segment %s at %d: %w", l.active.name(), l.wpos, err), l.wpos, len(data))
		return l.stickyErr()
	}
	l.wpos += int64(len(data))
	l.written.Store(int64(at) + int64(len(data)))
	start, end, err := l.raw.walk(l, at, data)
	if end > l.Next() {
		l.publish(start, end)
	}
	if err != nil {
		l.dropPartial()
		return err
	}
	return nil
}

// emptyLog reports whether the log holds no segment.
func (l *Log) emptyLog() bool {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return len(l.segs) == 0
}

// walk follows the envelopes in data (at its offset at) and returns the
// start and end of the last record completed by it (end 0 if none).
func (p *rawParser) walk(l *Log, at Offset, data []byte) (last, end Offset, err error) {
	ss := Offset(l.opts.SegmentSize)
	off, i := at, 0
	for i < len(data) {
		if p.end > 0 { // inside a record: skip to its end
			n := int(min(p.end-off, Offset(len(data)-i)))
			i += n
			off += Offset(n)
			if off == p.end {
				end, last = p.end, p.last
				p.end = 0
			}
			continue
		}
		n := copy(p.hdr[p.hdrN:], data[i:])
		p.hdrN += n
		i += n
		off += Offset(n)
		if p.hdrN < envelopeSize {
			break
		}
		p.hdrN = 0
		start := off - envelopeSize
		size := int32(binary.BigEndian.Uint32(p.hdr[0:4]))
		magic := int32(binary.BigEndian.Uint32(p.hdr[4:8]))
		left := int64(start - start%ss + ss - start)
		switch {
		case magic == BlankMagic && int64(size) == left:
		case magic != RecordMagic:
			return last, end, l.rawCorrupt(start, fmt.Sprintf("bad MAGICCODE %#08x", uint32(magic)))
		case size < l.opts.MinRecord || size > l.opts.MaxRecord || int64(size)+envelopeSize > left:
			return last, end, l.rawCorrupt(start, fmt.Sprintf("TOTALSIZE %d outside [%d, %d] or past the segment", size, l.opts.MinRecord, l.opts.MaxRecord))
		}
		p.last, p.end = start, start+Offset(size)
		if off == p.end { // NB: a record of envelope size only
			end, last = p.end, p.last
			p.end = 0
		}
	}
	return last, end, nil
}

func (l *Log) rawCorrupt(at Offset, reason string) error {
	return &CorruptionError{Segment: segmentName(at - at%Offset(l.opts.SegmentSize)),
		Pos: int64(at % Offset(l.opts.SegmentSize)), Offset: at, Reason: "replicated bytes: " + reason}
}

// dropPartial forgets the written bytes past Next (a record whose rest
// will not come, or was refused): the next raw or normal append starts at
// Next. The bytes are zeroed so that recovery cannot take them for data.
// REQUIRES: appender.
func (l *Log) dropPartial() {
	next := l.Next()
	l.raw = rawParser{}
	if w := Offset(l.written.Load()); w > next && l.active != nil && next >= l.active.base {
		pos := int64(next - l.active.base)
		if _, err := l.active.f.WriteAt(make([]byte, w-next), pos); err != nil {
			l.opts.Logger.Warn("commitlog: zero a dropped partial record", "at", next, "err", err)
		}
		l.wpos = pos
	}
	l.written.Store(int64(next))
}

// ErrNotBoundary is returned by Open when Options.Cut names an offset
// inside a record.
var ErrNotBoundary = errors.New("commitlog: cut offset is not a record boundary")

// cutTail cuts the recovered log at at (Options.Cut): a replica drops the
// tail its new master does not have. at must be a record boundary (or the
// log's end or past it: nothing to cut); below Min the whole log goes.
// Called by Open, before anything reads or appends.
func (l *Log) cutTail(at Offset) error {
	if at >= l.Next() || len(l.segs) == 0 {
		return nil
	}
	at = max(at, l.Min())
	ss := Offset(l.opts.SegmentSize)
	base := at - at%ss
	s := &Scanner{l: l, pos: base, prevAt: -1, buf: make([]byte, scanBufSize)}
	s.limit = l.Next
	pos, tail := base, Offset(-1)
	for pos < at && s.Scan() {
		tail, pos = s.recAt, s.Pos()
	}
	if pos != at {
		return fmt.Errorf("%w: %d (records of its segment end at %d)", ErrNotBoundary, at, pos)
	}
	last, err := l.dropSegmentsAfter(at)
	if err != nil {
		return err
	}
	if err := l.truncateTail(last, at, true); err != nil {
		return err
	}
	if err := last.f.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync segment %s: %w", last.name(), err)
	}
	l.opts.Logger.Warn("commitlog: cut the log's tail", "from", l.Next(), "to", at)
	l.recovery.Truncated, l.recovery.TruncateReason = true, fmt.Sprintf("cut at %d (Options.Cut)", at)
	l.recovery.End = at
	l.setEnd(at, tail)
	l.active, l.wpos = nil, 0
	if at < last.base+ss {
		l.active, l.wpos = last, int64(at-last.base)
	}
	return nil
}
