package store

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/conf"
)

// Disk pressure. The disk loop measures the share of the store's disk in use
// every Options.DiskCheckInterval:
//
//   - above disk_high_watermark it logs one WARN line per crossing (and one
//     INFO line when use is back under);
//   - above disk_full_watermark it refuses puts (commitlog.RefuseAppends,
//     SERVICE_NOT_AVAILABLE with a remark saying why and what to do) and
//     deletes the reserve file, so that the consume queues, the key index,
//     the checkpoints and a restart find room even when the log filled the
//     disk;
//   - back under it, it re-creates the reserve, keeps it if use stays under
//     the full watermark, and only then accepts puts again: a reserve that
//     does not fit keeps them refused, or the log would take its room.
//
// A fast producer can reach ENOSPC between two measurements: the commitlog
// then refuses appends by itself (retrying after DiskFullRetry), and the
// next measurement, at 100%, takes over. Nothing here deletes messages:
// with on_disk_pressure "delete_oldest" retention does (retention.go), and
// reports what consumer groups had not consumed yet.

// reserveName is the reserve file in the store directory.
const reserveName = "disk.reserve"

// diskState is the disk loop's state and what it publishes.
type diskState struct {
	used      atomic.Uint64 // math.Float64bits of the last measured share; -1 before
	aboveHigh atomic.Bool
	reserved  atomic.Bool // the reserve file is in place
	// refusal is the error puts are refused with; nil while they are not.
	refusal atomic.Pointer[commitlog.DiskFullError]
	// countLoss is the broker's callback; see SetUnconsumedCounter.
	countLoss atomic.Pointer[func(lo, hi int64) []Loss]

	// Disk-loop owned.
	measureFailed bool
	reserveFailed bool

	lossMu sync.Mutex
	losses map[LossKey]int64 // guarded by lossMu
}

// DiskStatus is the store's view of its disk, for brokerStatus and metrics.
type DiskStatus struct {
	Used          float64 // share of the disk in use at the last check; -1 if unknown
	HighWatermark float64
	FullWatermark float64
	Policy        string // conf.DiskPressureRefuse or conf.DiskPressureDeleteOldest
	AboveHigh     bool   // Used > HighWatermark
	// Refusing is true while puts are refused for lack of space, Refusal
	// the remark they get.
	Refusing bool
	Refusal  string
	// ReserveSize is the configured reserve; ReserveHeld whether it is in
	// place (it is deleted while the disk is full).
	ReserveSize int64
	ReserveHeld bool
}

// LossKey names a consumer group and a topic.
type LossKey struct{ Group, Topic string }

// Loss counts the messages of a topic that retention deleted under disk
// pressure before a consumer group consumed them.
type Loss struct {
	LossKey
	Messages int64
}

// DiskStatus reports the disk state as of the last check.
func (s *Store) DiskStatus() DiskStatus {
	st := DiskStatus{Used: math.Float64frombits(s.disk.used.Load()), HighWatermark: s.cfg.DiskHighWatermark,
		FullWatermark: s.cfg.DiskFullWatermark, Policy: s.cfg.OnDiskPressure, AboveHigh: s.disk.aboveHigh.Load(),
		ReserveSize: s.cfg.DiskReserve, ReserveHeld: s.disk.reserved.Load()}
	if e := s.currentRefusal(); e != nil {
		st.Refusing, st.Refusal = true, e.Error()
	}
	return st
}

// currentRefusal returns why puts are refused for lack of space: the disk
// loop's refusal, or the commitlog's own after an ENOSPC; nil if they are
// not.
func (s *Store) currentRefusal() *commitlog.DiskFullError {
	if e := s.disk.refusal.Load(); e != nil {
		return e
	}
	var e *commitlog.DiskFullError
	if errors.As(s.log.AppendErr(), &e) {
		return e
	}
	return nil
}

// Losses returns, per group and topic, how many unconsumed messages
// retention has deleted under disk pressure since Open.
func (s *Store) Losses() map[LossKey]int64 {
	s.disk.lossMu.Lock()
	defer s.disk.lossMu.Unlock()
	out := make(map[LossKey]int64, len(s.disk.losses))
	for k, v := range s.disk.losses {
		out[k] = v
	}
	return out
}

// SetUnconsumedCounter gives the store fn, which returns, for the commitlog
// range [lo, hi) that retention just deleted under disk pressure, how many
// messages each consumer group had not consumed there (Unconsumed helps).
// The store does not know consumer offsets; the broker does. fn runs on the
// retention goroutine, before the consume queues are trimmed.
func (s *Store) SetUnconsumedCounter(fn func(lo, hi int64) []Loss) { s.disk.countLoss.Store(&fn) }

// Unconsumed returns how many messages of a queue, at queue offsets at or
// above from, have their record in the commitlog range [lo, hi).
func (s *Store) Unconsumed(topic string, queueID int32, from, lo, hi int64) (int64, error) {
	q := s.cq.Lookup(topic, queueID)
	if q == nil {
		return 0, nil
	}
	// NB: positions grow with queue offsets: the range is [first at or
	// above lo, first at or above hi).
	firstAt := func(pos int64) (int64, error) {
		a, b := q.Min(), q.Next()
		for a < b {
			mid := a + (b-a)/2
			e, err := q.Entry(mid)
			if err != nil {
				return 0, fmt.Errorf("store: %s/%d entry %d: %w", topic, queueID, mid, err)
			}
			if e.Pos >= pos {
				b = mid
			} else {
				a = mid + 1
			}
		}
		return a, nil
	}
	a, err := firstAt(lo)
	if err != nil {
		return 0, err
	}
	b, err := firstAt(hi)
	if err != nil {
		return 0, err
	}
	return max(0, b-max(a, from)), nil
}

// reportPressureLoss logs, at ERROR, which groups had unconsumed messages in
// the commitlog range [lo, hi) that retention deleted under disk pressure,
// and counts them (Losses).
func (s *Store) reportPressureLoss(segments []string, lo, hi int64) {
	var losses []Loss
	if fn := s.disk.countLoss.Load(); fn != nil {
		losses = (*fn)(lo, hi)
	}
	if len(losses) == 0 {
		s.logger.Warn("store: deleted segments early under disk pressure (store.on_disk_pressure: delete_oldest); "+
			"no consumer group had unconsumed messages in them", "segments", segments, "from", lo, "to", hi)
		return
	}
	sort.Slice(losses, func(i, j int) bool {
		if losses[i].Group != losses[j].Group {
			return losses[i].Group < losses[j].Group
		}
		return losses[i].Topic < losses[j].Topic
	})
	var total int64
	var groups []string
	var parts []string
	s.disk.lossMu.Lock()
	if s.disk.losses == nil {
		s.disk.losses = map[LossKey]int64{}
	}
	for _, l := range losses {
		s.disk.losses[l.LossKey] += l.Messages
		total += l.Messages
		if len(groups) == 0 || groups[len(groups)-1] != l.Group {
			groups = append(groups, l.Group)
		}
		parts = append(parts, fmt.Sprintf("%s/%s=%d", l.Group, l.Topic, l.Messages))
	}
	s.disk.lossMu.Unlock()
	s.logger.Error("store: deleted messages consumer groups had not consumed, under disk pressure (store.on_disk_pressure: delete_oldest)",
		"messages", total, "groups", strings.Join(groups, ","), "lost", strings.Join(parts, " "),
		"segments", segments, "from", lo, "to", hi)
}

// diskHint says what an operator can do about a full disk (the end of the
// refusal remark).
func diskHint(c conf.Store) string {
	if c.OnDiskPressure == conf.DiskPressureDeleteOldest {
		return "free space on the broker's disk or raise store.disk_full_watermark (delete_oldest never deletes " +
			"the newest segment nor records not yet indexed); sends are accepted again by themselves once use is under it"
	}
	return "free space on the broker's disk, raise store.disk_full_watermark, or set store.on_disk_pressure: " +
		"delete_oldest to delete the oldest messages whether consumed or not; sends are accepted again by themselves once use is under it"
}

// diskLoop checks the disk every DiskCheckInterval until Close.
func (s *Store) diskLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.DiskCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			s.checkDisk()
		}
	}
}

// measureDisk returns the share of the disk in use and publishes it; ok is
// false (one log line per failing spell) when it cannot be measured.
// REQUIRES: called by Open or the disk loop.
func (s *Store) measureDisk() (float64, bool) {
	u, err := s.DiskUsage()
	if err != nil {
		if !s.disk.measureFailed {
			s.logger.Error("store: cannot measure disk use; disk watermarks are not enforced until it can", "dir", s.dir, "err", err)
			s.disk.measureFailed = true
		}
		return 0, false
	}
	if s.disk.measureFailed {
		s.logger.Info("store: disk use measured again", "used", u)
		s.disk.measureFailed = false
	}
	s.disk.used.Store(math.Float64bits(u))
	return u, true
}

// checkDisk runs one check: see the comment at the top of this file.
// REQUIRES: called by Open or the disk loop.
func (s *Store) checkDisk() {
	u, ok := s.measureDisk()
	if !ok {
		return
	}
	s.noteHigh(u)
	if u > s.cfg.DiskFullWatermark {
		s.refuseFull(u)
		s.releaseReserve()
		return
	}
	if !s.disk.reserved.Load() && s.cfg.DiskReserve > 0 {
		// NB: the disk has room only if the reserve fits under the full
		// watermark: otherwise the log would take the reserve's room.
		if err := s.makeReserve(); errors.Is(err, syscall.ENOSPC) {
			s.refuseFull(u)
			return
		}
		if s.disk.reserved.Load() {
			if u, ok = s.measureDisk(); ok && u > s.cfg.DiskFullWatermark {
				s.disk.reserved.Store(false)
				s.removeReserve() // NB: quietly: no room for it yet
				s.refuseFull(u)
				return
			}
		}
	}
	if s.disk.refusal.Swap(nil) != nil {
		s.log.RefuseAppends(nil)
		s.logger.Info("store: disk use back under the full watermark; sends are accepted again",
			"used", u, "full_watermark", s.cfg.DiskFullWatermark)
	}
}

// noteHigh logs each crossing of the high watermark, once.
func (s *Store) noteHigh(u float64) {
	above := u > s.cfg.DiskHighWatermark
	if s.disk.aboveHigh.Swap(above) == above {
		return
	}
	if !above {
		s.logger.Info("store: disk use back under the high watermark", "used", u, "high_watermark", s.cfg.DiskHighWatermark)
		return
	}
	what := "sends will be refused above the full watermark; free space or set store.on_disk_pressure: delete_oldest"
	if s.cfg.OnDiskPressure == conf.DiskPressureDeleteOldest {
		what = "the oldest segments are deleted, consumed or not (store.on_disk_pressure: delete_oldest)"
	}
	s.logger.Warn("store: disk use above the high watermark; "+what, "used", u,
		"high_watermark", s.cfg.DiskHighWatermark, "full_watermark", s.cfg.DiskFullWatermark)
}

// refuseFull refuses puts with a remark giving the measured use u.
func (s *Store) refuseFull(u float64) {
	e := &commitlog.DiskFullError{Watermark: s.cfg.DiskFullWatermark, Used: u, Hint: diskHint(s.cfg)}
	s.log.RefuseAppends(e)
	if s.disk.refusal.Swap(e) == nil {
		s.logger.Error("store: disk full; refusing sends", "used", u, "full_watermark", s.cfg.DiskFullWatermark)
	}
}

// reservePath is the reserve file's path.
func (s *Store) reservePath() string { return filepath.Join(s.dir, reserveName) }

// initReserve notes whether a reserve of the configured size is in place
// (one of another size is removed and made again later) and, when the disk
// is already above the full watermark, deletes it before recovery writes
// anything. REQUIRES: called by Open, before the indexes are opened.
func (s *Store) initReserve() {
	fi, err := os.Stat(s.reservePath())
	s.disk.reserved.Store(err == nil && fi.Size() == s.cfg.DiskReserve && s.cfg.DiskReserve > 0)
	if err == nil && !s.disk.reserved.Load() {
		s.removeReserve()
	}
	if u, ok := s.measureDisk(); ok && u > s.cfg.DiskFullWatermark {
		s.releaseReserve()
	}
}

// makeReserve creates the reserve file; on error it leaves none. It logs
// an error other than ENOSPC once per failing spell: the store then runs
// without a reserve.
func (s *Store) makeReserve() error {
	open := s.opts.OpenFile
	if open == nil {
		open = commitlog.OSOpenFile
	}
	path := s.reservePath()
	f, err := open(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		err = f.Preallocate(s.cfg.DiskReserve)
		if errors.Is(err, errors.ErrUnsupported) {
			err = writeZeros(f, s.cfg.DiskReserve)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		s.removeReserve()
		if !errors.Is(err, syscall.ENOSPC) && !s.disk.reserveFailed {
			s.logger.Error("store: cannot create the disk reserve; running without it", "path", path, "err", err)
			s.disk.reserveFailed = true
		}
		return err
	}
	s.disk.reserveFailed = false
	s.disk.reserved.Store(true)
	s.logger.Info("store: disk reserve in place", "path", path, "bytes", s.cfg.DiskReserve)
	return nil
}

// writeZeros writes n zero bytes at the start of f.
func writeZeros(f commitlog.File, n int64) error {
	buf := make([]byte, min(n, 1<<20))
	for off := int64(0); off < n; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf[:min(int64(len(buf)), n-off)], off); err != nil {
			return err
		}
	}
	return nil
}

// releaseReserve deletes the reserve file, if it is in place, so that the
// indexes and state files can use its room.
func (s *Store) releaseReserve() {
	if !s.disk.reserved.Swap(false) {
		return
	}
	if s.removeReserve() {
		s.logger.Warn("store: disk full; deleted the disk reserve so that indexes and checkpoints can still be written",
			"bytes", s.cfg.DiskReserve)
	}
}

// removeReserve removes the reserve file; false if it could not.
func (s *Store) removeReserve() bool {
	if err := os.Remove(s.reservePath()); err != nil && !isNotExist(err) {
		s.logger.Error("store: delete the disk reserve", "path", s.reservePath(), "err", err)
		return false
	}
	return true
}
