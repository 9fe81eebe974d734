package commitlog

import (
	"context"
	"fmt"
	"time"
)

// flushLoop owns fsync. In async mode it fsyncs every FlushInterval; in sync
// mode it fsyncs whenever a WaitDurable caller kicks it (group commit: appends
// that arrive while an fsync runs share the next one) and on the interval as
// a safety net. It saves a checkpoint after an fsync at most every
// CheckpointInterval.
func (l *Log) flushLoop() {
	defer l.wg.Done()
	ticker := time.NewTicker(l.opts.FlushInterval)
	defer ticker.Stop()
	for {
		select {
		case <-l.quit:
			return // Close runs the final flush
		case <-l.kick:
			if w := l.opts.GroupCommitWindow; w > 0 {
				t := time.NewTimer(w)
				select {
				case <-t.C:
				case <-l.quit:
					t.Stop()
					return
				}
			}
		case <-ticker.C:
		}
		if err := l.flush(); err != nil {
			continue // sticky; waiters were woken and see it
		}
		if time.Since(l.lastCheckpoint) >= l.opts.CheckpointInterval {
			if err := l.saveCheckpoint(); err != nil {
				l.opts.Logger.Warn("commitlog: save checkpoint", "err", err)
			}
			l.lastCheckpoint = time.Now()
		}
	}
}

// flush fsyncs every segment holding bytes between Durable() and Next(), then
// advances Durable() and wakes waiters. A failed fsync is permanent: the log
// refuses appends until it is reopened.
// REQUIRES: called by the flusher goroutine, or by Close after it stopped.
func (l *Log) flush() error {
	if l.hasErr.Load() {
		// NB: never retry a failed fsync: the kernel may have dropped the
		// dirty pages, so a second fsync can succeed without the data.
		if err := l.permanentErr(); err != nil {
			return err
		}
	}
	l.tailMu.Lock()
	w, ts := l.Next(), l.tailStart
	l.tailMu.Unlock()
	d := l.Durable()
	if w <= d {
		return nil
	}
	l.segMu.RLock()
	var todo []*segment
	for _, s := range l.segs {
		if s.base+Offset(l.opts.SegmentSize) > d && s.base < w {
			todo = append(todo, s)
		}
	}
	l.segMu.RUnlock()
	started := time.Now()
	for _, s := range todo {
		s.mu.RLock()
		err := s.f.Sync()
		s.mu.RUnlock()
		if err != nil {
			l.failSync(fmt.Errorf("fsync segment %s: %w", s.name(), err))
			l.wakeWaiters()
			return err
		}
	}
	l.tailMu.Lock()
	l.cpNext, l.cpTail = w, ts
	l.tailMu.Unlock()
	l.durable.Store(int64(w))
	l.wakeWaiters()
	if l.opts.OnSync != nil {
		l.opts.OnSync(time.Since(started), int64(w-d))
	}
	return nil
}

// failSync makes an fsync failure sticky and permanent.
func (l *Log) failSync(err error) {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	l.werr = fmt.Errorf("%w: fsync failed, appends refused until the log is reopened and recovered: %w", ErrWriteFailed, err)
	l.werrRetry = false
	l.werrAt = time.Now()
	l.hasErr.Store(true)
	l.opts.Logger.Error("commitlog: fsync failed", "err", err)
}

func (l *Log) wakeWaiters() {
	l.durMu.Lock()
	close(l.durCh)
	l.durCh = make(chan struct{})
	l.durMu.Unlock()
}

// WaitDurable blocks until every byte below end is fsynced, the context ends,
// the log closes, or an fsync fails. In sync mode it wakes the flusher, so
// concurrent waiters share one fsync.
func (l *Log) WaitDurable(ctx context.Context, end Offset) error {
	for {
		if l.Durable() >= end {
			return nil
		}
		l.durMu.Lock()
		ch := l.durCh
		l.durMu.Unlock()
		// NB: recheck after taking the channel: the flusher may have
		// advanced Durable() and replaced durCh in between.
		if l.Durable() >= end {
			return nil
		}
		if l.hasErr.Load() {
			if err := l.permanentErr(); err != nil {
				return err
			}
		}
		if l.opts.SyncFlush {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.quit:
			// Close flushes once more; report what that achieved.
			<-l.closed
			if l.Durable() >= end {
				return nil
			}
			return ErrClosed
		}
	}
}

// permanentErr returns the sticky error when it is not a retryable disk-full
// error (an fsync failure means waiters will never be satisfied).
func (l *Log) permanentErr() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.werr != nil && !l.werrRetry {
		return l.werr
	}
	return nil
}

// Failed returns the error that stops the log from ever becoming durable
// again (a failed fsync or write), or nil. Disk full is not such an error.
func (l *Log) Failed() error {
	if !l.hasErr.Load() {
		return nil
	}
	return l.permanentErr()
}

// Kick wakes the flusher: what is appended gets fsynced now rather than at
// the next interval. Waiters learn of it through DurableChanged.
func (l *Log) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Sync fsyncs everything appended so far, from any goroutine.
func (l *Log) Sync(ctx context.Context) error {
	return l.WaitDurableNow(ctx, l.Next())
}

// WaitDurableNow is WaitDurable that also wakes the flusher in async mode.
func (l *Log) WaitDurableNow(ctx context.Context, end Offset) error {
	if l.Durable() < end {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return l.WaitDurable(ctx, end)
}

// DurableChanged returns a channel that is closed the next time Durable()
// advances or the flusher fails. A durable-only reader waits on it.
func (l *Log) DurableChanged() <-chan struct{} {
	l.durMu.Lock()
	defer l.durMu.Unlock()
	return l.durCh
}
