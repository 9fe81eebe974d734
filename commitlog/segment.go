package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// segmentName formats a segment's file name from its base offset.
func segmentName(base Offset) string { return fmt.Sprintf("%020d", int64(base)) }

// parseSegmentName returns the base offset a segment file name encodes, and
// false for any name that is not exactly twenty decimal digits.
func parseSegmentName(name string) (Offset, bool) {
	if len(name) != 20 {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return 0, false
	}
	return Offset(v), true
}

// segment is one file of the log. Its bytes [0, SegmentSize) hold the log's
// offsets [base, base+SegmentSize).
type segment struct {
	base Offset
	path string

	// mu guards f against being closed (by retention or Close) while a reader
	// uses it: readers hold it shared, closers exclusively.
	mu     sync.RWMutex
	f      File
	closed bool
	// fd is f's descriptor, for reads from the page cache only (readCached),
	// if hasFd; it is valid while f is open (readers hold mu shared).
	fd    uintptr
	hasFd bool
}

// newSegmentOf returns the segment of base held by f, opened on path.
func newSegmentOf(base Offset, path string, f File) *segment {
	s := &segment{base: base, path: path, f: f}
	// NB: the descriptor of an *os.File stays the same until it is closed.
	if sc, ok := f.(interface {
		SyscallConn() (syscall.RawConn, error)
	}); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { s.fd, s.hasFd = fd, true })
		}
	}
	return s
}

func (s *segment) name() string { return filepath.Base(s.path) }

// readAt reads from the segment at position pos.
func (s *segment) readAt(p []byte, pos int64) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrOffsetRemoved
	}
	return s.f.ReadAt(p, pos)
}

// readAtCached is readAt that also reports whether some of the bytes were
// not in the page cache (missed): it reads from the cache only first, then
// the rest from the file. A file without a descriptor never misses.
func (s *segment) readAtCached(p []byte, pos int64) (n int, missed bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, false, ErrOffsetRemoved
	}
	if s.hasFd {
		var ok bool
		if n, ok = readCached(s.fd, p, pos); !ok {
			n = 0
		} else if n == len(p) {
			return n, false, nil
		} else {
			missed = true
		}
	}
	m, err := s.f.ReadAt(p[n:], pos+int64(n))
	return n + m, missed, err
}

func (s *segment) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.f.Close()
}

// fileSize returns the segment file's current size on disk.
func (s *segment) fileSize() (int64, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
