package commitlog

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// RetentionOptions decide which whole segments Retain deletes, oldest
// first. The commitlog runs no retention of its own: its owner (the broker's
// store) calls Retain on its schedule and follows the new Min() itself. Nor
// does it watch the disk: its owner refuses appends for lack of space with
// RefuseAppends; the log refuses them by itself only after an ENOSPC.
type RetentionOptions struct {
	// MaxAge deletes segments last written longer ago than this; 0 keeps
	// them forever.
	MaxAge time.Duration
	// HighWatermark deletes the oldest segments early, whatever their age
	// and whoever has read them, while the share of the disk in use is
	// above it; 0 turns it off (nothing is deleted before MaxAge).
	HighWatermark float64
	// DiskUsage returns the share of the disk holding dir that is in use;
	// Retain measures with it, and an ENOSPC refusal reports it. Default:
	// statfs.
	DiskUsage func(dir string) (float64, error)
}

func (r RetentionOptions) withDefaults() RetentionOptions {
	if r.DiskUsage == nil {
		r.DiskUsage = StatfsUsage
	}
	return r
}

// StatfsUsage returns the share of the file system holding dir that is in
// use, as df computes it (blocks reserved for root count as unavailable).
func StatfsUsage(dir string) (float64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	used := float64(st.Blocks - st.Bfree)
	avail := float64(st.Bavail)
	if used+avail == 0 {
		return 0, nil
	}
	return used / (used + avail), nil
}

// RetentionResult reports one Retain pass.
type RetentionResult struct {
	Deleted   []string // segment names, oldest first
	DiskUsage float64  // share of the disk in use after the pass; -1 if not measured
	// PressureFrom is the base of the first segment deleted because disk use
	// was above HighWatermark rather than for its age, or -1: the records in
	// [PressureFrom, Min()) went early.
	PressureFrom Offset
}

// Retain runs one retention pass at time now: it deletes the oldest
// segments that are older than MaxAge or, while disk use is above
// HighWatermark, regardless of age. It never deletes the last segment, nor
// one holding bytes at or above keep (say, what the caller has not indexed
// yet) or Durable(). The caller learns the new Min() from Min(); the result
// lists the segments deleted, also when it returns an error after some.
func (l *Log) Retain(now time.Time, keep Offset) (RetentionResult, error) {
	r := l.opts.Retention
	res := RetentionResult{DiskUsage: -1, PressureFrom: -1}
	if r.HighWatermark > 0 {
		u, err := r.DiskUsage(l.dir)
		if err != nil {
			return res, fmt.Errorf("commitlog: measure disk usage: %w", err)
		}
		res.DiskUsage = u
	}
	protect := min(keep, l.Durable())
	for {
		l.segMu.RLock()
		var oldest *segment
		if len(l.segs) > 1 {
			oldest = l.segs[0]
		}
		l.segMu.RUnlock()
		if oldest == nil || oldest.base+Offset(l.opts.SegmentSize) > protect {
			break
		}
		expired := false
		if r.MaxAge > 0 {
			if fi, err := os.Stat(oldest.path); err == nil && now.Sub(fi.ModTime()) > r.MaxAge {
				expired = true
			}
		}
		pressure := r.HighWatermark > 0 && res.DiskUsage > r.HighWatermark
		if !expired && !pressure {
			break
		}
		if err := l.deleteOldest(oldest); err != nil {
			return res, err
		}
		res.Deleted = append(res.Deleted, oldest.name())
		if !expired && res.PressureFrom < 0 {
			res.PressureFrom = oldest.base
		}
		l.opts.Logger.Info("commitlog: deleted segment", "segment", oldest.name(), "expired", expired,
			"disk_usage", res.DiskUsage, "min", l.Min())
		if pressure {
			if u, err := r.DiskUsage(l.dir); err == nil {
				res.DiskUsage = u
			}
		}
	}
	return res, nil
}

// RefuseAppends makes every append fail with e (which should say why and
// what to do) until RefuseAppends(nil). The log's owner calls it when it
// judges the disk full, say above a watermark.
func (l *Log) RefuseAppends(e *DiskFullError) { l.refuseFull.Store(e) }

// deleteOldest removes seg, which must be the first segment, from the log.
func (l *Log) deleteOldest(seg *segment) error {
	l.segMu.Lock()
	if len(l.segs) < 2 || l.segs[0] != seg {
		l.segMu.Unlock()
		return nil
	}
	l.segs = l.segs[1:]
	l.min.Store(int64(l.segs[0].base))
	l.segMu.Unlock()
	if err := seg.close(); err != nil {
		l.opts.Logger.Warn("commitlog: close deleted segment", "segment", seg.name(), "err", err)
	}
	if err := os.Remove(seg.path); err != nil {
		return fmt.Errorf("commitlog: delete segment %s: %w", seg.name(), err)
	}
	return l.syncDir()
}
