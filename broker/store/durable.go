package store

import (
	"fmt"
	"time"

	"github.com/sluicemq/sluice/commitlog"
)

// durableWaiter is a put answered once its bytes are on disk.
type durableWaiter struct {
	end      commitlog.Offset
	deadline time.Time
	res      PutResult
	done     Answerer
}

// durableTick bounds how late a FLUSH_DISK_TIMEOUT answer can be.
const durableTick = 10 * time.Millisecond

// kickWaiters wakes the flusher and the notifier for the waiters answer
// added: each is answered once on disk (PutFlushDiskTimeout after the sync
// flush timeout; Close answers what its final sync covered), and no
// goroutine waits per put.
func (s *Store) kickWaiters() {
	s.log.Kick()
	select {
	case s.waitKick <- struct{}{}:
	default:
	}
}

// durableLoop answers the waiters of Submit as the log becomes durable.
func (s *Store) durableLoop() {
	defer s.wg.Done()
	timer := time.NewTimer(durableTick)
	defer timer.Stop()
	for {
		changed := s.log.DurableChanged()
		// NB: the timer (for FLUSH_DISK_TIMEOUT answers) runs only while
		// someone waits; an idle broker does not wake every tick.
		var tick <-chan time.Time
		if s.answerWaiters(false) > 0 {
			timer.Reset(durableTick)
			tick = timer.C
		}
		select {
		case <-changed:
		case <-s.waitKick:
		case <-tick:
		case <-s.quit:
			// Close synced the log before quit: answer what that achieved.
			s.answerWaiters(true)
			return
		}
	}
}

// answerWaiters calls done for every waiter that is durable, past its
// deadline, or (closing, or the log failed for good) never will be. It
// returns how many still wait.
func (s *Store) answerWaiters(closing bool) int {
	s.waitMu.Lock()
	if len(s.waiters) == 0 {
		s.waitMu.Unlock()
		return 0
	}
	durable, now := s.log.Durable(), time.Now()
	failed := s.log.Failed()
	var ready []durableWaiter
	keep := s.waiters[:0]
	for _, w := range s.waiters {
		switch {
		case w.end <= durable:
		case closing || failed != nil:
			w.res.Status, w.res.Remark = PutServiceNotAvailable, "store: not flushed to disk: "+errorString(failed, "store closing")
		case now.After(w.deadline):
			w.res.Status = PutFlushDiskTimeout
			w.res.Remark = fmt.Sprintf("store: stored, but not flushed to disk within %v", s.cfg.SyncFlushTimeout)
		default:
			keep = append(keep, w)
			continue
		}
		ready = append(ready, w)
	}
	clear(s.waiters[len(keep):])
	s.waiters = keep
	s.waitMu.Unlock()
	for _, w := range ready {
		s.hold(false, w.res, w.done)
	}
	return len(keep)
}

func errorString(err error, otherwise string) string {
	if err == nil {
		return otherwise
	}
	return err.Error()
}
