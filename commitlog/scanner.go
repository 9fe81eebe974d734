package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Scanner reads records in log order from a starting offset, skipping blank
// fillers, and validates each one (envelope, then Options.Validate, or the
// scanner's own check: Validating). It stops
// at the end of the log (Next(), or Durable() for a durable-only scanner) and
// can be called again later to continue as the log grows: a dispatcher tails
// the log this way. A record that fails validation stops the scanner with a
// *CorruptionError and is never returned; SkipSegment moves past it.
//
// A Scanner is used by one goroutine.
type Scanner struct {
	l        *Log
	limit    func() Offset
	recover  bool // recovery mode: zero TOTALSIZE is the end, reads ignore Next()
	thorough bool // Validate is asked for its full checks (see Thorough)
	// validate checks each record in place of Options.Validate (nil: it
	// does not; see Validating).
	validate func(rec []byte, at Offset, full bool) error

	pos   Offset // where the next Scan starts
	buf   []byte
	bufAt Offset // offset of buf[0]
	bufN  int    // valid bytes in buf

	recAt  Offset
	rec    []byte
	prevAt Offset // start of the last record or blank passed; -1 if none
	zero   bool   // recovery mode: stopped at a zero TOTALSIZE
	err    error
}

const scanBufSize = 1 << 20

// NewScanner returns a scanner starting at from, which must be a record
// boundary. With durableOnly it never reads past Durable(): in sync flush mode
// a dispatcher must not index what is not yet on disk.
func (l *Log) NewScanner(from Offset, durableOnly bool) *Scanner {
	s := &Scanner{l: l, pos: from, prevAt: -1, buf: make([]byte, scanBufSize)}
	if durableOnly {
		s.limit = l.Durable
	} else {
		s.limit = l.Next
	}
	return s
}

// Thorough makes s ask Validate for its full checks, as recovery does: for
// records another process wrote (a store catching up after it opened).
func (s *Scanner) Thorough() *Scanner {
	s.thorough = true
	return s
}

// Validating makes s check each record with v in place of
// Options.Validate, for a caller that reads every record anyway and can
// check it in the same pass (the store's dispatcher: one parse a record,
// not two).
func (s *Scanner) Validating(v func(rec []byte, at Offset, full bool) error) *Scanner {
	s.validate = v
	return s
}

// Scan advances to the next record. It returns false at the end of the log or
// on an error (see Err).
func (s *Scanner) Scan() bool {
	s.rec = nil
	if s.err != nil || s.zero {
		return false
	}
	l := s.l
	for {
		lim := s.limit()
		if s.pos >= lim {
			return false
		}
		segEnd := l.segmentEnd(s.pos)
		left := int64(segEnd - s.pos)
		hdr, err := s.read(s.pos, envelopeSize, segEnd)
		if err != nil {
			s.err = err
			return false
		}
		size := int32(binary.BigEndian.Uint32(hdr[0:4]))
		magic := int32(binary.BigEndian.Uint32(hdr[4:8]))
		switch {
		case size == 0 && s.recover:
			s.zero = true
			return false
		case size == 0:
			s.err = s.corrupt("zero TOTALSIZE below the end of the log")
			return false
		case magic == BlankMagic:
			if int64(size) != left {
				s.err = s.corrupt(fmt.Sprintf("blank TOTALSIZE %d, but %d bytes left in segment", size, left))
				return false
			}
			s.prevAt = s.pos
			s.pos = segEnd
			continue
		case magic != RecordMagic:
			s.err = s.corrupt(fmt.Sprintf("bad MAGICCODE %#08x", uint32(magic)))
			return false
		case size < l.opts.MinRecord || size > l.opts.MaxRecord:
			s.err = s.corrupt(fmt.Sprintf("TOTALSIZE %d outside [%d, %d]", size, l.opts.MinRecord, l.opts.MaxRecord))
			return false
		case int64(size)+envelopeSize > left:
			s.err = s.corrupt(fmt.Sprintf("TOTALSIZE %d does not leave room for a blank in the %d bytes left", size, left))
			return false
		case !s.recover && s.pos+Offset(size) > lim:
			s.err = s.corrupt(fmt.Sprintf("TOTALSIZE %d runs past the end of the log at %d", size, lim))
			return false
		}
		rec, err := s.read(s.pos, int(size), segEnd)
		if err != nil {
			s.err = err
			return false
		}
		v := s.validate
		if v == nil {
			v = l.opts.Validate
		}
		if v != nil {
			if err := v(rec, s.pos, s.recover || s.thorough); err != nil {
				ce := s.corrupt(err.Error())
				ce.Size = size
				s.err = ce
				return false
			}
		}
		s.rec, s.recAt, s.prevAt = rec, s.pos, s.pos
		s.pos += Offset(size)
		return true
	}
}

// read returns n bytes at off from the buffer, refilling it with one large
// read when needed. In recovery mode bytes past the end of a file read as zeros.
func (s *Scanner) read(off Offset, n int, segEnd Offset) ([]byte, error) {
	if off >= s.bufAt && off+Offset(n) <= s.bufAt+Offset(s.bufN) {
		i := int(off - s.bufAt)
		return s.buf[i : i+n], nil
	}
	if n > len(s.buf) {
		s.buf = make([]byte, n)
	}
	want := len(s.buf)
	if lim := int(segEnd - off); want > lim {
		want = lim
	}
	if !s.recover {
		// NB: never buffer past the limit: those bytes may still be being
		// written, and a later Scan would trust them.
		if lim := int(s.limit() - off); want > lim {
			want = lim
		}
		if want < n {
			return nil, s.corrupt(fmt.Sprintf("a %d-byte read runs past the end of the log", n))
		}
	}
	seg := s.l.segmentFor(off)
	if seg == nil {
		return nil, fmt.Errorf("%w: %d", ErrOffsetRemoved, off)
	}
	got, err := seg.readAt(s.buf[:want], int64(off-seg.base))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("commitlog: read segment %s: %w", seg.name(), err)
	}
	if got < n {
		if !s.recover {
			return nil, s.corrupt(fmt.Sprintf("segment file ends %d bytes into a %d-byte read", got, n))
		}
		clear(s.buf[got:want])
		got = want
	}
	s.bufAt, s.bufN = off, got
	return s.buf[:n], nil
}

func (s *Scanner) corrupt(reason string) *CorruptionError {
	segEnd := s.l.segmentEnd(s.pos)
	base := segEnd - Offset(s.l.opts.SegmentSize)
	return &CorruptionError{Segment: segmentName(base), Pos: int64(s.pos - base), Offset: s.pos, Reason: reason}
}

// Record returns the current record and its offset. The slice is valid until
// the next call to Scan.
func (s *Scanner) Record() (Offset, []byte) { return s.recAt, s.rec }

// Pos returns the offset where the next Scan starts.
func (s *Scanner) Pos() Offset { return s.pos }

// Err returns the error that stopped the scanner, if any. A *CorruptionError
// says where the bad record is.
func (s *Scanner) Err() error { return s.err }

// SkipSegment clears the error and moves the scanner to the start of the next
// segment: the rest of the current one is lost. Dispatchers use it after
// reporting a corruption in an older segment.
func (s *Scanner) SkipSegment() {
	s.err, s.zero = nil, false
	s.pos = s.l.segmentEnd(s.pos)
	s.bufN = 0
}

// SkipCorrupt moves the scanner past the corrupt record its last Scan
// stopped at: past that record alone when only its content was refused
// (its envelope says where the next one starts), otherwise to the end of
// its segment (see SkipSegment).
func (s *Scanner) SkipCorrupt() {
	var ce *CorruptionError
	if errors.As(s.err, &ce) && ce.Size > 0 && ce.Offset == s.pos {
		s.err, s.zero = nil, false
		s.prevAt = s.pos
		s.pos += Offset(ce.Size)
		s.bufN = 0
		return
	}
	s.SkipSegment()
}

// Seek moves the scanner to off, which must be a record boundary.
func (s *Scanner) Seek(off Offset) {
	s.err, s.zero = nil, false
	s.pos = off
	s.bufN = 0
}
