package store

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/consumequeue/keyindex"
	"github.com/sluicemq/sluice/internal/message"
)

// Retry delays of the dispatcher after an error: doubling from
// dispatchRetryMin up to dispatchRetryMax.
const (
	dispatchRetryMin = 10 * time.Millisecond
	dispatchRetryMax = 5 * time.Second
)

// dispatchHealth is what the dispatcher knows of its own failures.
type dispatchHealth struct {
	indexDegraded atomic.Bool  // the key index failed and lags (read by checkpoints, metrics, status)
	retries       atomic.Int64 // dispatch attempts that failed and were retried (metrics)

	// Dispatcher-owned (Store.dispMu).
	indexStop    int64     // while degraded: every record below is in the key index
	indexFails   int       // consecutive key index failures
	indexRetryAt time.Time // next catch-up attempt while degraded
}

// retryDelay is the wait before attempt fails+1 of something that failed
// fails times in a row.
func retryDelay(fails int) time.Duration {
	return min(dispatchRetryMin<<min(fails-1, 20), dispatchRetryMax)
}

// dispatchLoop tails the commitlog and indexes each record. In sync flush
// mode it reads only the durable part of the log. A record that fails is
// retried, the same record, after a doubling delay; a key index that fails
// is left behind (degraded) and caught up later, so that the consume queues
// go on. Each pass holds dispMu, which a put may take meanwhile to dispatch
// its own records (dispatchInline).
func (s *Store) dispatchLoop() {
	defer s.wg.Done()
	syncMode := s.cfg.SyncFlush()
	s.dispMu.Lock()
	s.dispSc = s.log.NewScanner(commitlog.Offset(s.dispatched.Load()), syncMode).Validating(s.validateForDispatch)
	s.dispMu.Unlock()
	for {
		var durable <-chan struct{}
		if syncMode {
			durable = s.log.DurableChanged()
		}
		s.dispMu.Lock()
		kick := s.kick
		var retry <-chan time.Time
		if !s.dispatchPass() {
			// NB: only the delay wakes a retry, not every put.
			kick, durable = nil, nil
			retry = time.After(retryDelay(s.dispFails))
		}
		if s.health.indexDegraded.Load() {
			s.catchUpIndex()
			if retry == nil && s.health.indexDegraded.Load() {
				retry = time.After(time.Until(s.health.indexRetryAt))
			}
		}
		s.dispMu.Unlock()
		s.loopPasses.Add(1) // NB: once dispMu is free: a test that waits for a pass then finds the loop idle
		select {
		case <-s.quit:
			// Close synced the log first: drain to its end.
			s.dispMu.Lock()
			sc := s.dispSc
			s.dispSc = nil
			if err := s.dispatch(sc); err != nil {
				s.logger.Error("store: final dispatch", "pos", sc.Pos(), "err", err)
			}
			s.dispMu.Unlock()
			return
		case <-kick:
		case <-durable:
		case <-retry:
		}
	}
}

// dispatchPass runs dispatch on the loop's scanner and keeps the count of
// failed passes in a row, with a log line when they start and one when
// they end. It reports whether the pass succeeded. REQUIRES: dispMu held,
// dispSc set.
func (s *Store) dispatchPass() bool {
	err := s.dispatch(s.dispSc)
	switch {
	case err != nil:
		s.dispFails++
		s.health.retries.Add(1)
		if s.dispFails == 1 {
			s.logger.Error("store: dispatch failed; retrying the same record until it succeeds",
				"pos", s.dispSc.Pos(), "err", err)
		}
		return false
	case s.dispFails > 0:
		s.logger.Info("store: dispatch resumed", "pos", s.dispSc.Pos(), "failed_attempts", s.dispFails)
		s.dispFails = 0
	}
	return true
}

// inlineDispatchMax is the most a put leaves to dispatch (its own records
// and any earlier ones still waiting) and still dispatches itself
// (dispatchInline): a message or two. Bursts and batches leave theirs to
// the loop, which then works in parallel with the next burst's reading:
// dispatching every put inline cost the async and batch rows up to 17% of
// their throughput.
const inlineDispatchMax = 4 << 10

// dispatchInline is what a put does once its records are written (limit
// inlineDispatchMax), and a slave once it has reported what it applied
// (IndexReplica, limit replicaInlineMax): in async flush mode, if at most
// limit bytes wait for dispatch and no dispatch is running (the loop's or
// another caller's), it dispatches them itself; otherwise, or if that
// fails or leaves the key index behind, it wakes the loop, which owns the
// retries and the index's catch-up. At a low rate this spares every
// message a hand-over to the loop's goroutine, a wake-up of another thread
// on its way to its consumers. In sync flush mode the records are not
// durable yet: the loop dispatches them once they are.
func (s *Store) dispatchInline(limit int64) {
	if !s.cfg.SyncFlush() && s.DispatchLag() <= limit && s.dispMu.TryLock() {
		// NB: while the loop backs off a failing record, puts leave it be.
		ok := s.dispSc != nil && s.dispFails == 0 && !s.health.indexDegraded.Load() &&
			s.dispatchPass() && !s.health.indexDegraded.Load()
		s.dispMu.Unlock()
		if ok {
			s.inlineDispatches.Add(1)
			return
		}
	}
	s.kickDispatcher()
}

// dispatch indexes records from the scanner until it reaches the end of what
// it may read. A record that fails leaves the scanner on it, so the next call
// starts with it again. A corrupt record in an older segment is reported and
// the rest of that segment skipped (its messages are lost; the log says
// where).
// REQUIRES: called by one goroutine at a time (Open, then with dispMu
// held: dispatchLoop, dispatchInline).
func (s *Store) dispatch(sc *commitlog.Scanner) error {
	if lo := s.log.Min(); sc.Pos() < lo {
		// NB: an empty replica's log starts where its master's does.
		sc.Seek(lo)
		s.dispatched.Store(int64(lo))
	}
	for {
		for sc.Scan() {
			at, rec := sc.Record()
			if err := s.dispatchRecord(int64(at), rec); err != nil {
				sc.Seek(at)
				return err
			}
			s.dispatched.Store(int64(sc.Pos()))
		}
		err := sc.Err()
		if err == nil {
			// Blanks move the scanner without a record.
			s.dispatched.Store(int64(sc.Pos()))
			return nil
		}
		var ce *commitlog.CorruptionError
		if !errors.As(err, &ce) {
			return err
		}
		what := "the rest of its segment"
		if ce.Size > 0 {
			what = "that record"
		}
		s.logger.Error("store: corrupt record in the commitlog; skipping "+what,
			"segment", ce.Segment, "pos", ce.Pos, "size", ce.Size, "reason", ce.Reason)
		sc.SkipCorrupt()
	}
}

// dispatchRecord writes the consume queue entry and key index entries of one
// record (or of each record of a batch) and wakes the arrival listeners. A
// key index error does not fail it: the index is marked degraded and caught
// up later (catchUpIndex).
func (s *Store) dispatchRecord(at int64, rec []byte) error {
	di, err := s.scannedInfo(at, rec)
	if err != nil {
		return fmt.Errorf("store: dispatch record at %d: %w", at, err)
	}
	tx := message.TxType(di.SysFlag)
	if tx == message.TxNot || tx == message.TxCommit {
		if err := s.putEntry(&di); err != nil {
			return err
		}
	}
	if s.dedupFeed.Load() {
		s.feedDedup(&di)
	}
	if !s.health.indexDegraded.Load() {
		if err := s.indexRecord(at, &di); err != nil {
			s.health.indexStop, s.health.indexFails = at, 1
			s.health.indexRetryAt = time.Now().Add(retryDelay(1))
			s.health.indexDegraded.Store(true)
			s.logger.Error("store: key index degraded; consume queues go on, the index catches up once it can write",
				"pos", at, "err", err)
		}
	}
	return nil
}

// validateForDispatch is the loop's scanner's check of a record: the
// log's own (Options.Validate: the structure, and its offset) and the
// reading of its DispatchInfo in one pass, which dispatchRecord then
// takes (scannedInfo). Checked and then read apart, a record was parsed
// twice: 2.3% of the broker's CPU on async 128 B sends (a Go profile).
// REQUIRES: the dispatching goroutine.
func (s *Store) validateForDispatch(rec []byte, at commitlog.Offset, full bool) error {
	s.scanned = message.DispatchInfo{}
	if full {
		return s.validateRecord(rec, at, full)
	}
	di, err := message.ValidateDispatchInfo(rec, int64(at))
	if err == nil {
		s.scanned = di
	}
	return err
}

// validateRecord is the log's check of a record (Options.Validate).
func (s *Store) validateRecord(rec []byte, at commitlog.Offset, full bool) error {
	return message.Validate(rec, int64(at), s.cfg.CheckCRCOnRecover && full)
}

// scannedInfo returns the DispatchInfo of the record at at: the one the
// scanner read while checking it, or read now (a scanner without
// validateForDispatch: Open's).
// REQUIRES: the dispatching goroutine; rec is the scanner's current record.
func (s *Store) scannedInfo(at int64, rec []byte) (message.DispatchInfo, error) {
	if di := s.scanned; di.Size > 0 && di.PhysicalOffset == at { // NB: checked: PHYSICALOFFSET is at
		s.scanned = message.DispatchInfo{} // NB: keeps no view of the scanner's buffer
		return di, nil
	}
	s.reparsed++
	return message.ReadDispatchInfo(rec)
}

// indexRecord puts the keys of one record into the key index, unless the
// record is not indexed (prepared or rolled back) or already was.
func (s *Store) indexRecord(at int64, di *message.DispatchInfo) error {
	tx := message.TxType(di.SysFlag)
	if tx == message.TxPrepared || tx == message.TxRollback || at < s.indexFrom {
		return nil
	}
	return s.indexKeys(di)
}

// catchUpIndex indexes the records from where the degraded key index stopped
// to the dispatch position, once its retry delay is over; reaching it makes
// the index healthy again. REQUIRES: the dispatching goroutine.
func (s *Store) catchUpIndex() {
	h := &s.health
	if time.Now().Before(h.indexRetryAt) {
		return
	}
	sc := s.log.NewScanner(commitlog.Offset(h.indexStop), false)
	err := func() error {
		for int64(sc.Pos()) < s.dispatched.Load() {
			if !sc.Scan() {
				var ce *commitlog.CorruptionError
				if errors.As(sc.Err(), &ce) {
					sc.SkipCorrupt() // reported by dispatch
					continue
				}
				return sc.Err()
			}
			at, rec := sc.Record()
			if int64(at) >= s.dispatched.Load() {
				break
			}
			di, err := message.ReadDispatchInfo(rec)
			if err == nil {
				err = s.indexRecord(int64(at), &di)
			}
			if err != nil {
				h.indexStop = int64(at)
				return err
			}
		}
		return nil
	}()
	if err != nil {
		h.indexFails++
		h.indexRetryAt = time.Now().Add(retryDelay(h.indexFails))
		return
	}
	s.logger.Info("store: key index healthy again", "caught_up_to", s.dispatched.Load(), "failed_attempts", h.indexFails)
	h.indexFails = 0
	h.indexDegraded.Store(false)
}

// KeyIndexDegraded reports whether the key index failed and lags behind the
// consume queues (it catches up by itself once it can write again).
func (s *Store) KeyIndexDegraded() bool { return s.health.indexDegraded.Load() }

// DispatchRetries returns how many dispatch attempts failed and were retried.
func (s *Store) DispatchRetries() int64 { return s.health.retries.Load() }

// queue returns the consume queue of a record, from the dispatcher's cache.
// REQUIRES: called by the dispatching goroutine.
func (s *Store) queue(topic []byte, id int32) (*consumequeue.Queue, error) {
	if q := s.queues[string(topic)][id]; q != nil { // NB: no allocation for the lookup
		return q, nil
	}
	q, err := s.cq.Queue(string(topic), id)
	if err != nil {
		return nil, fmt.Errorf("store: consume queue %s/%d: %w", topic, id, err)
	}
	m := s.queues[q.Topic()]
	if m == nil {
		m = map[int32]*consumequeue.Queue{}
		s.queues[q.Topic()] = m
	}
	m[id] = q
	return q, nil
}

func (s *Store) putEntry(di *message.DispatchInfo) error {
	q, err := s.queue(di.Topic, di.QueueID)
	if errors.Is(err, consumequeue.ErrInvalidName) {
		// NB: no consume queue can hold it (puts refuse such records now;
		// an older broker stored some): retrying would stall every queue
		// behind it for good. Log its location and go on, as above.
		s.logger.Error("store: record has no possible consume queue; not indexed", "topic", string(di.Topic),
			"queue_id", di.QueueID, "pos", di.PhysicalOffset, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	tags := di.TagsCode
	if q.Topic() == ScheduleTopic {
		tags = s.deliverTime(di.StoreTimestamp, di.DelayLevel)
	}
	e := consumequeue.Entry{Pos: di.PhysicalOffset, Size: di.Size, TagsCode: tags}
	if err := q.Put(di.QueueOffset, e); err != nil {
		if errors.Is(err, consumequeue.ErrGap) || errors.Is(err, consumequeue.ErrMismatch) || errors.Is(err, consumequeue.ErrInvalidEntry) {
			// NB: the consume queue disagrees with the log (a bug or a
			// hand-edited store). Stopping would stall every queue; log the
			// record's location and go on, as RocketMQ does.
			s.logger.Error("store: consume queue entry rejected", "topic", q.Topic(), "queue_id", di.QueueID,
				"queue_offset", di.QueueOffset, "pos", di.PhysicalOffset, "err", err)
			return nil
		}
		return fmt.Errorf("store: index %s/%d offset %d: %w", di.Topic, di.QueueID, di.QueueOffset, err)
	}
	s.listenMu.RLock()
	for _, fn := range s.listeners {
		fn(q.Topic(), di.QueueID, q.Next(), tags, di.Properties)
	}
	s.listenMu.RUnlock()
	return nil
}

// deliverTime is the tags code of a delayed message: its store time plus its
// level's delay, the level clamped to the table.
func (s *Store) deliverTime(storeTS int64, level int32) int64 {
	n := int32(len(s.opts.DelayLevels))
	level = max(1, min(level, n))
	return storeTS + s.opts.DelayLevels[level-1].Milliseconds()
}

func (s *Store) indexKeys(di *message.DispatchInfo) error {
	// NB: hashed from the record's bytes: no key string per message.
	if len(di.UniqKey) > 0 {
		if err := s.index.PutHash(keyindex.KeyHash(di.Topic, di.UniqKey), di.PhysicalOffset, di.StoreTimestamp); err != nil {
			return fmt.Errorf("store: key index: %w", err)
		}
	}
	for k := range message.KeysSeq(di.Keys) {
		if err := s.index.PutHash(keyindex.KeyHash(di.Topic, k), di.PhysicalOffset, di.StoreTimestamp); err != nil {
			return fmt.Errorf("store: key index: %w", err)
		}
	}
	return nil
}
