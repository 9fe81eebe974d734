package commitlog

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by operations on a closed log.
	ErrClosed = errors.New("commitlog: closed")
	// ErrCorrupt marks every CorruptionError.
	ErrCorrupt = errors.New("commitlog: corrupt record")
	// ErrRecordTooLarge is returned by Append for a size the log cannot hold.
	ErrRecordTooLarge = errors.New("commitlog: record too large")
	// ErrOffsetOutOfRange is returned for reads at or past Next().
	ErrOffsetOutOfRange = errors.New("commitlog: offset out of range")
	// ErrOffsetRemoved is returned for reads below Min(): retention deleted
	// the segment.
	ErrOffsetRemoved = errors.New("commitlog: offset removed by retention")
	// ErrDiskFull marks appends refused for lack of disk space. Appends
	// resume by themselves once space returns.
	ErrDiskFull = errors.New("commitlog: disk full")
	// ErrWriteFailed marks appends refused after a write or fsync failure.
	ErrWriteFailed = errors.New("commitlog: write failed")
	// ErrBadFill is returned when an Append fill callback wrote a record whose
	// envelope does not match the size it asked for.
	ErrBadFill = errors.New("commitlog: fill wrote a bad envelope")
)

// CorruptionError says where a record failed validation. It matches ErrCorrupt
// with errors.Is.
type CorruptionError struct {
	Segment string // segment file name
	Pos     int64  // position of the record within the segment
	Offset  Offset // global offset of the record
	Reason  string
	// Size is the record's TOTALSIZE when its envelope was sound and only
	// Validate refused its content (0 otherwise): the next record starts
	// Size bytes on.
	Size int32
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("commitlog: corrupt record in segment %s at position %d (offset %d): %s",
		e.Segment, e.Pos, e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Unwrap() error { return ErrCorrupt }

// DiskFullError explains why appends are refused for lack of space.
type DiskFullError struct {
	// Watermark is the configured share of the disk above which appends are
	// refused, or 0 when the file system itself returned ENOSPC.
	Watermark float64
	// Used is the share of the disk in use when it was last measured; -1 if
	// it could not be.
	Used  float64
	Cause error // the ENOSPC error, if any
	// Hint says what the operator can do (Options.DiskFullHint).
	Hint string
}

func (e *DiskFullError) Error() string {
	var s string
	switch {
	case e.Watermark > 0:
		s = fmt.Sprintf("commitlog: disk full: %.1f%% used, above the %.1f%% full watermark; appends are refused until use is back under it",
			e.Used*100, e.Watermark*100)
	case e.Used >= 0:
		s = fmt.Sprintf("commitlog: disk full: %v (%.1f%% used); appends are refused and resume by themselves when space is available",
			e.Cause, e.Used*100)
	default:
		s = fmt.Sprintf("commitlog: disk full: %v; appends are refused and resume by themselves when space is available", e.Cause)
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Unwrap makes errors.Is(err, ErrDiskFull) true, and exposes the cause.
func (e *DiskFullError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrDiskFull, e.Cause}
	}
	return []error{ErrDiskFull}
}
