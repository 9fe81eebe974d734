package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/message"
)

// PutResult reports a put.
type PutResult struct {
	Status PutStatus
	// Remark explains a status other than PutOK, for the response remark.
	Remark string
	// Pos is the commitlog offset of the (first) record, Size the bytes
	// appended, QueueOffset the (first) queue offset.
	Pos         int64
	Size        int32
	QueueOffset int64
	// StoreTimestamp is the time written into the record(s).
	StoreTimestamp int64
	// Positions holds each record's commitlog offset, for batches.
	Positions []int64
}

// Put stores one message and, in sync flush mode, waits until it is on disk
// (PutFlushDiskTimeout after the sync flush timeout: stored all the same).
// The store sets StoreTimestamp, and StoreHost when m has none.
func (s *Store) Put(ctx context.Context, m *message.Message) PutResult {
	return s.put(ctx, m, true)
}

// PutNoWait stores one message without waiting for fsync in sync flush mode
// (RocketMQ's WAIT=false).
func (s *Store) PutNoWait(m *message.Message) PutResult {
	return s.put(context.Background(), m, false)
}

func (s *Store) put(ctx context.Context, m *message.Message, wait bool) PutResult {
	if !m.StoreHost.IsValid() {
		m.StoreHost = s.opts.StoreHost
	}
	if err := m.CheckLimits(int(s.cfg.MaxMessageSize)); err != nil {
		return PutResult{Status: PutMessageIllegal, Remark: err.Error()}
	}
	size := m.EncodedSize()
	advance := advancesQueue(m.SysFlag)

	s.putMu.Lock()
	if s.putClosed {
		s.putMu.Unlock()
		return PutResult{Status: PutServiceNotAvailable, Remark: "store: closing, retry on another broker"}
	}
	var qo int64
	if advance {
		qo = s.queueNext[m.Topic][m.QueueID]
	}
	m.StoreTimestamp = time.Now().UnixMilli()
	at, err := s.log.Append(size, func(at commitlog.Offset, dst []byte) error {
		return m.Encode(dst, qo, int64(at))
	})
	if err == nil && advance {
		s.setNextLocked(m.Topic, m.QueueID, qo+1)
	}
	s.putMu.Unlock()
	if err != nil {
		return s.appendFailed(err)
	}
	s.kickDispatcher()
	res := PutResult{Status: PutOK, Pos: int64(at), Size: int32(size), QueueOffset: qo, StoreTimestamp: m.StoreTimestamp}
	if wait {
		s.waitDurable(ctx, at+commitlog.Offset(size), &res)
	}
	return res
}

// lockPut takes putMu; with try, only if it is free at once.
func (s *Store) lockPut(try bool) bool {
	if try {
		return s.putMu.TryLock()
	}
	s.putMu.Lock()
	return true
}

// advancesQueue reports whether a message takes a queue offset: PREPARED
// and ROLLBACK transactional messages get 0 and do not advance the queue.
func advancesQueue(sysFlag int32) bool {
	tx := message.TxType(sysFlag)
	return tx == message.TxNot || tx == message.TxCommit
}

// Batch is a SEND_BATCH_MESSAGE: items sharing topic, queue, sysFlag, born
// and reconsume fields taken from Template.
type Batch struct {
	Template message.Message
	Items    []message.BatchItem
}

// PutBatch stores a batch as one append (it never straddles two segments)
// with consecutive queue offsets.
func (s *Store) PutBatch(ctx context.Context, b *Batch) PutResult {
	res, _ := s.putBatch(ctx, b, true, false)
	return res
}

func (s *Store) putBatch(ctx context.Context, b *Batch, wait, try bool) (PutResult, bool) {
	if len(b.Items) == 0 {
		return PutResult{Status: PutMessageIllegal, Remark: "store: empty batch"}, true
	}
	m := b.Template
	if !m.StoreHost.IsValid() {
		m.StoreHost = s.opts.StoreHost
	}
	if !advancesQueue(m.SysFlag) {
		return PutResult{Status: PutMessageIllegal, Remark: "store: transactional messages cannot be sent in a batch"}, true
	}
	total := 0
	sizes := make([]int, len(b.Items))
	for i, it := range b.Items {
		m.Flag, m.Body, m.Properties = it.Flag, it.Body, it.Properties
		if err := m.CheckLimits(int(s.cfg.MaxMessageSize)); err != nil {
			return PutResult{Status: PutMessageIllegal, Remark: err.Error()}, true
		}
		sizes[i] = m.EncodedSize()
		total += sizes[i]
	}
	positions := make([]int64, len(b.Items))

	if !s.lockPut(try) {
		return PutResult{}, false
	}
	if s.putClosed {
		s.putMu.Unlock()
		return PutResult{Status: PutServiceNotAvailable, Remark: "store: closing, retry on another broker"}, true
	}
	qo := s.queueNext[m.Topic][m.QueueID]
	m.StoreTimestamp = time.Now().UnixMilli()
	at, err := s.log.Append(total, func(at commitlog.Offset, dst []byte) error {
		p := 0
		for i, it := range b.Items {
			m.Flag, m.Body, m.Properties = it.Flag, it.Body, it.Properties
			n := sizes[i]
			positions[i] = int64(at) + int64(p)
			if err := m.Encode(dst[p:p+n], qo+int64(i), positions[i]); err != nil {
				return err
			}
			p += n
		}
		return nil
	})
	if err == nil {
		s.setNextLocked(m.Topic, m.QueueID, qo+int64(len(b.Items)))
	}
	s.putMu.Unlock()
	if err != nil {
		return s.appendFailed(err), true
	}
	s.kickDispatcher()
	res := PutResult{Status: PutOK, Pos: int64(at), Size: int32(total), QueueOffset: qo,
		StoreTimestamp: m.StoreTimestamp, Positions: positions}
	if wait {
		s.waitDurable(ctx, at+commitlog.Offset(total), &res)
	}
	return res, true
}

func (s *Store) waitDurable(ctx context.Context, end commitlog.Offset, res *PutResult) {
	if !s.cfg.SyncFlush() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SyncFlushTimeout)
	defer cancel()
	if err := s.log.WaitDurable(ctx, end); err != nil {
		res.Status = PutFlushDiskTimeout
		res.Remark = fmt.Sprintf("store: stored, but not flushed to disk within %v: %v", s.cfg.SyncFlushTimeout, err)
		if errors.Is(err, commitlog.ErrWriteFailed) {
			res.Status = PutServiceNotAvailable
			res.Remark = err.Error()
		}
	}
}

// appendFailed maps a commitlog append error to a put status.
func (s *Store) appendFailed(err error) PutResult {
	switch {
	case errors.Is(err, commitlog.ErrRecordTooLarge):
		return PutResult{Status: PutMessageIllegal, Remark: err.Error()}
	case errors.Is(err, commitlog.ErrDiskFull), errors.Is(err, commitlog.ErrWriteFailed), errors.Is(err, commitlog.ErrClosed):
		return PutResult{Status: PutServiceNotAvailable, Remark: err.Error()}
	}
	s.logger.Error("store: append", "err", err)
	return PutResult{Status: PutServiceNotAvailable, Remark: "store: " + err.Error()}
}

func (s *Store) kickDispatcher() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// QueueNext returns the next queue offset the put path will assign.
func (s *Store) QueueNext(topic string, queueID int32) int64 {
	s.putMu.Lock()
	defer s.putMu.Unlock()
	return s.queueNext[topic][queueID]
}

// manyChunk bounds the bytes of one append of PutMany (a message larger
// than that is appended alone).
func (s *Store) manyChunk() int {
	return int(min(256<<10, s.cfg.SegmentSize/4))
}

// PutMany stores msgs, in order, with as few appends as their sizes allow
// (one write for a burst of small messages), and returns a result for
// each. It never waits for fsync (callers use it in async flush mode, or
// wait themselves). A message that breaks a limit gets PutMessageIllegal
// and the others are stored. REQUIRES: no transactional prepare or
// rollback messages (they take no queue offset).
func (s *Store) PutMany(msgs []*message.Message) []PutResult {
	res := make([]PutResult, len(msgs))
	sizes := make([]int, len(msgs))
	for i, m := range msgs {
		if !m.StoreHost.IsValid() {
			m.StoreHost = s.opts.StoreHost
		}
		if err := m.CheckLimits(int(s.cfg.MaxMessageSize)); err != nil {
			res[i] = PutResult{Status: PutMessageIllegal, Remark: err.Error()}
			continue
		}
		sizes[i] = m.EncodedSize()
	}
	limit := s.manyChunk()
	s.putMu.Lock()
	defer s.putMu.Unlock()
	for i := 0; i < len(msgs); {
		if sizes[i] == 0 { // illegal, answered above
			i++
			continue
		}
		// The chunk is msgs[i:j], legal ones only, within limit.
		j, total := i, 0
		for j < len(msgs) && (sizes[j] == 0 || j == i || total+sizes[j] <= limit) {
			total += sizes[j]
			j++
		}
		if s.putClosed {
			for k := i; k < j; k++ {
				if sizes[k] > 0 {
					res[k] = PutResult{Status: PutServiceNotAvailable, Remark: "store: closing, retry on another broker"}
				}
			}
			i = j
			continue
		}
		now := time.Now().UnixMilli()
		_, err := s.log.Append(total, func(at commitlog.Offset, dst []byte) error {
			p, next := 0, map[queueKey]int64{}
			for k := i; k < j; k++ {
				if sizes[k] == 0 {
					continue
				}
				m := msgs[k]
				key := queueKey{m.Topic, m.QueueID}
				qo, ok := next[key]
				if !ok {
					qo = s.queueNext[m.Topic][m.QueueID]
				}
				m.StoreTimestamp = now
				if err := m.Encode(dst[p:p+sizes[k]], qo, int64(at)+int64(p)); err != nil {
					return err
				}
				next[key] = qo + 1
				res[k] = PutResult{Status: PutOK, Pos: int64(at) + int64(p), Size: int32(sizes[k]), QueueOffset: qo, StoreTimestamp: now}
				p += sizes[k]
			}
			return nil
		})
		if err != nil {
			failed := s.appendFailed(err)
			for k := i; k < j; k++ {
				if sizes[k] > 0 {
					res[k] = failed
				}
			}
			i = j
			continue
		}
		for k := i; k < j; k++ {
			if sizes[k] > 0 {
				s.setNextLocked(msgs[k].Topic, msgs[k].QueueID, res[k].QueueOffset+1)
			}
		}
		i = j
	}
	s.kickDispatcher()
	return res
}

type queueKey struct {
	topic string
	id    int32
}
