package store

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/commitlog"
)

// durableWaiter is a put answered once its bytes are on disk.
type durableWaiter struct {
	end      commitlog.Offset
	deadline time.Time
	res      PutResult
	done     func(PutResult)
}

// durableTick bounds how late a FLUSH_DISK_TIMEOUT answer can be.
const durableTick = 10 * time.Millisecond

// PutBatchThen stores a batch and calls done (see ThenDurable). It waits
// for the put lock, as PutMany does, and never for the disk. done must not
// block.
func (s *Store) PutBatchThen(b *Batch, done func(PutResult)) {
	res, _ := s.putBatch(context.Background(), b, false, false)
	s.ThenDurable(res, done)
}

// ThenDurable calls done with res once the put it reports is on disk, from
// the store's notifier goroutine (PutFlushDiskTimeout after the sync flush
// timeout; Close answers what its final sync covered): no goroutine waits
// per put. In async mode, or when res is not PutOK, done runs at once.
// done must not block.
func (s *Store) ThenDurable(res PutResult, done func(PutResult)) {
	end := commitlog.Offset(res.Pos + int64(res.Size))
	if res.Status != PutOK || !s.cfg.SyncFlush() || s.log.Durable() >= end {
		done(res)
		return
	}
	s.waitMu.Lock()
	s.waiters = append(s.waiters, durableWaiter{end: end, deadline: time.Now().Add(s.cfg.SyncFlushTimeout), res: res, done: done})
	s.waitMu.Unlock()
	s.log.Kick()
	select {
	case s.waitKick <- struct{}{}:
	default:
	}
}

// durableLoop answers the waiters of ThenDurable as the log becomes durable.
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
		w.done(w.res)
	}
	return len(keep)
}

func errorString(err error, otherwise string) string {
	if err == nil {
		return otherwise
	}
	return err.Error()
}
