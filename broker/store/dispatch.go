package store

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/consumequeue/keyindex"
	"github.com/sluicemq/sluice/internal/message"
)

// dispatchLoop tails the commitlog and indexes each record. In sync flush
// mode it reads only the durable part of the log.
func (s *Store) dispatchLoop() {
	defer s.wg.Done()
	syncMode := s.cfg.SyncFlush()
	sc := s.log.NewScanner(commitlog.Offset(s.dispatched.Load()), syncMode)
	for {
		var durable <-chan struct{}
		if syncMode {
			durable = s.log.DurableChanged()
		}
		if err := s.dispatch(sc); err != nil {
			s.logger.Error("store: dispatch stopped", "pos", sc.Pos(), "err", err)
		}
		select {
		case <-s.quit:
			// Close synced the log first: drain to its end.
			if err := s.dispatch(sc); err != nil {
				s.logger.Error("store: final dispatch", "pos", sc.Pos(), "err", err)
			}
			return
		case <-s.kick:
		case <-durable:
		}
	}
}

// dispatch indexes records from the scanner until it reaches the end of what
// it may read. A corrupt record in an older segment is reported and the rest
// of that segment skipped (its messages are lost; the log says where).
// REQUIRES: called by one goroutine at a time (Open, then dispatchLoop).
func (s *Store) dispatch(sc *commitlog.Scanner) error {
	for {
		for sc.Scan() {
			at, rec := sc.Record()
			if err := s.dispatchRecord(int64(at), rec); err != nil {
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
// record (or of each record of a batch) and wakes the arrival listeners.
func (s *Store) dispatchRecord(at int64, rec []byte) error {
	di, err := message.ReadDispatchInfo(rec)
	if err != nil {
		return fmt.Errorf("store: dispatch record at %d: %w", at, err)
	}
	tx := message.TxType(di.SysFlag)
	if tx == message.TxNot || tx == message.TxCommit {
		if err := s.putEntry(&di); err != nil {
			return err
		}
	}
	if tx != message.TxPrepared && tx != message.TxRollback && at >= s.indexFrom {
		if err := s.indexKeys(&di); err != nil {
			return err
		}
	}
	return nil
}

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
		fn(q.Topic(), di.QueueID, q.Next())
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
