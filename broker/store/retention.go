package store

import (
	"time"

	"github.com/sluicemq/sluice/commitlog"
)

// retentionLoop runs a retention pass every RetentionInterval until Close.
func (s *Store) retentionLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case now := <-t.C:
			if _, err := s.retain(now); err != nil {
				s.logger.Error("store: retention", "err", err)
			}
		}
	}
}

// retain runs one retention pass at now: the commitlog deletes its oldest
// segments that retention allows (never one holding records not yet
// dispatched; early, under disk pressure, only with delete_oldest), what
// consumer groups had not consumed in those deleted early is reported, then
// the index files that only point below the new minimum go too.
func (s *Store) retain(now time.Time) (commitlog.RetentionResult, error) {
	res, err := s.log.Retain(now, commitlog.Offset(s.dispatched.Load()))
	if res.PressureFrom >= 0 { // NB: before the trim: the entries still map the range
		s.reportPressureLoss(res.Deleted, int64(res.PressureFrom), int64(s.log.Min()))
	}
	if len(res.Deleted) > 0 { // NB: also after an error: some segments went
		s.trimIndexes(s.log.Min())
	}
	return res, err
}

// trimIndexes deletes the consume queue and key index files that only
// point below min, the commitlog's first offset, and raises the consume
// queues' minimums to it.
func (s *Store) trimIndexes(min commitlog.Offset) {
	if n, err := s.cq.DeleteBelowPos(int64(min)); err != nil {
		s.logger.Error("store: delete consume queue files", "min", min, "err", err)
	} else if n > 0 {
		s.logger.Info("store: deleted consume queue files", "count", n, "min", min)
	}
	if err := s.index.DeleteBelowPos(int64(min)); err != nil {
		s.logger.Error("store: delete key index files", "min", min, "err", err)
	}
}
