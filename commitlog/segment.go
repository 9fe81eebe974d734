package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
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
