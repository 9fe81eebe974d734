package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/consumequeue"
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
	// QueueID is the queue of the (first) record.
	QueueID int32
	// Duplicates counts the messages (batch members) answered from the
	// duplicate window instead of being stored: the ids above are then
	// those of the copy stored first.
	Duplicates int
}

// Stored reports whether the put's records are in the log: PutOK, or
// stored but not yet known to be on disk (PutFlushDiskTimeout) or on a
// slave (PutFlushSlaveTimeout, PutSlaveNotAvailable).
func (r PutResult) Stored() bool {
	switch r.Status {
	case PutOK, PutFlushDiskTimeout, PutFlushSlaveTimeout, PutSlaveNotAvailable, PutInSyncReplicasNotEnough:
		return true
	}
	return false
}

// Batch is a SEND_BATCH_MESSAGE: items sharing topic, queue, sysFlag, born
// and reconsume fields taken from Template.
type Batch struct {
	Template message.Message
	Items    []message.BatchItem
}

// PutRequest is one put of Submit: a message (Msg) or a batch (Batch),
// which is stored as one append of consecutive records with consecutive
// queue offsets (it never straddles two segments).
type PutRequest struct {
	Msg   *message.Message
	Batch *Batch
	// NoWait answers once the records are written to the OS, even in sync
	// flush mode (RocketMQ's WAIT=false).
	NoWait bool
	// Dedup checks the message's (each batch member's) UNIQ_KEY against the
	// duplicate window: a producer's send, never the broker's own re-puts.
	Dedup bool
	// Done receives the result, exactly once: during Submit when the put
	// failed or needs no fsync (async flush mode, NoWait), else from the
	// store's notifier once the records are on disk (PutFlushDiskTimeout
	// after the sync flush timeout: stored all the same). It must not
	// block.
	Done Answerer
}

// Answerer receives a put's result (PutRequest.Done). A sender's own
// state can be its Answerer: the broker's sends cost no closure each.
type Answerer interface{ PutDone(PutResult) }

// AnswerFunc is a function as an Answerer.
type AnswerFunc func(PutResult)

// PutDone calls f.
func (f AnswerFunc) PutDone(r PutResult) { f(r) }

// Submit is the store's one put path. It stores reqs in order, holding the
// put lock once, with as few appends as their sizes allow (one write for a
// burst of small messages), and then answers each through its Done. It
// waits for the put lock, never for the disk.
func (s *Store) Submit(reqs []PutRequest) {
	s.submit(reqs, make([]PutResult, len(reqs)), make([]sized, len(reqs)))
}

// PutScratch is Submit's working space, reused by a caller that submits
// again and again (the broker's bursts, from a pool): 248 bytes a request,
// which Submit allocates and zeroes each time. The zero value is ready.
type PutScratch struct {
	res   []PutResult
	sizes []sized
}

// SubmitWith is Submit in sc's space.
// REQUIRES: no other SubmitWith uses sc meanwhile.
func (s *Store) SubmitWith(reqs []PutRequest, sc *PutScratch) {
	n := len(reqs)
	if cap(sc.res) < n {
		sc.res, sc.sizes = make([]PutResult, n), make([]sized, n)
	}
	res, sizes := sc.res[:n], sc.sizes[:n]
	s.submit(reqs, res, sizes)
	// NB: submit keeps nothing of them (answers get copies): zeroed for
	// the next, which wants them so, and holding no pointers meanwhile.
	clear(res)
	clear(sizes)
}

// submit is Submit with the caller's scratch space: res and sizes as long
// as reqs, zeroed.
func (s *Store) submit(reqs []PutRequest, res []PutResult, sizes []sized) {
	s.prepare(reqs, res, sizes)
	s.putMu.Lock()
	// NB: refused before the duplicate window is asked: a store that
	// takes no put answers a resend as it answers any send, never as a
	// duplicate of a message it may not keep (a replica's log is its
	// master's to cut).
	if remark := s.putsRefusedLocked(); remark != "" {
		s.putMu.Unlock()
		for k := range reqs {
			if sizes[k].n > 0 {
				res[k] = PutResult{Status: PutServiceNotAvailable, Remark: remark}
			}
		}
		s.answer(reqs, res)
		return
	}
	dedup := s.dedup != nil && s.dedupCheck(reqs, sizes)
	appended := false
	for i := 0; i < len(reqs); {
		if sizes[i].n == 0 {
			i++
			continue
		}
		// The chunk is reqs[i:j]: the legal ones, within the chunk bound
		// (a request larger than that goes alone).
		j, total := i, 0
		for j < len(reqs) && (sizes[j].n == 0 || j == i || total+sizes[j].n <= s.chunkBytes()) {
			total += sizes[j].n
			j++
		}
		if s.appendChunk(reqs[i:j], res[i:j], sizes[i:j], total) {
			appended = true
		}
		i = j
	}
	if dedup {
		s.dedupRecord(reqs, res, sizes)
	}
	s.putMu.Unlock()
	if appended {
		s.dispatchInline(inlineDispatchMax)
	}
	s.answer(reqs, res)
}

// sized is a request's encoded size: n bytes in all (0: refused or a
// duplicate), and each item's for a batch; and its meeting with the
// duplicate window (dd for a message, members for a batch with keys).
type sized struct {
	n       int
	items   []int
	dd      dedupState
	members []dedupState
}

// prepare checks each request's limits and computes its size.
func (s *Store) prepare(reqs []PutRequest, res []PutResult, sizes []sized) {
	for i := range reqs {
		r := &reqs[i]
		var err error
		switch {
		case r.Batch != nil:
			if sizes[i].items, err = s.batchSizes(r.Batch); err == nil {
				for _, n := range sizes[i].items {
					sizes[i].n += n
				}
			}
		case r.Msg != nil:
			if !r.Msg.StoreHost.IsValid() {
				r.Msg.StoreHost = s.opts.StoreHost
			}
			if err = r.Msg.CheckLimits(int(s.cfg.MaxMessageSize)); err == nil {
				err = checkQueue(r.Msg)
			}
			if err == nil {
				sizes[i].n = r.Msg.EncodedSize()
			}
		default:
			err = errNoMessage
		}
		if err != nil {
			res[i] = PutResult{Status: PutMessageIllegal, Remark: err.Error()}
		} else if r.Dedup && s.dedup != nil {
			s.dedupPrepare(r, &sizes[i])
		}
	}
}

// batchSizes checks a batch and returns its items' encoded sizes.
func (s *Store) batchSizes(b *Batch) ([]int, error) {
	if len(b.Items) == 0 {
		return nil, errEmptyBatch
	}
	if !advancesQueue(b.Template.SysFlag) {
		return nil, errTxBatch
	}
	if !b.Template.StoreHost.IsValid() {
		b.Template.StoreHost = s.opts.StoreHost
	}
	m := b.Template
	sizes := make([]int, len(b.Items))
	for i, it := range b.Items {
		m.Flag, m.Body, m.Properties = it.Flag, it.Body, it.Properties
		if err := m.CheckLimits(int(s.cfg.MaxMessageSize)); err != nil {
			return nil, err
		}
		sizes[i] = m.EncodedSize()
	}
	if err := checkQueue(&b.Template); err != nil {
		return nil, err
	}
	return sizes, nil
}

// checkQueue refuses a message whose consume queue cannot exist (a
// negative queue id, a topic that is no directory name): stored, the
// dispatcher could never index it.
func checkQueue(m *message.Message) error {
	if err := consumequeue.CheckName(m.Topic, m.QueueID); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// appendChunk stores a chunk of requests with one append and reports
// whether it did. REQUIRES: putMu held, the store taking puts
// (putsRefusedLocked).
func (s *Store) appendChunk(reqs []PutRequest, res []PutResult, sizes []sized, total int) bool {
	now := s.opts.Now().UnixMilli()
	// NB: queue offsets advance as records are encoded; a failed append
	// puts them back (see giveBack).
	_, err := s.log.Append(total, func(at commitlog.Offset, dst []byte) error {
		p := 0
		for k := range reqs {
			n := sizes[k].n
			if n == 0 {
				continue
			}
			r := &reqs[k]
			pos := int64(at) + int64(p)
			if r.Msg != nil {
				m := r.Msg
				ctr, qo := s.queueCounter(m.Topic, m.QueueID, advancesQueue(m.SysFlag))
				m.StoreTimestamp = now
				if err := m.Encode(dst[p:p+n], qo, pos); err != nil {
					return err
				}
				if ctr != nil {
					ctr.Store(qo + 1)
				}
				res[k] = PutResult{Status: PutOK, Pos: pos, Size: int32(n), QueueOffset: qo, StoreTimestamp: now, QueueID: m.QueueID}
				p += n
				continue
			}
			b := r.Batch
			m := b.Template
			ctr, qo := s.queueCounter(m.Topic, m.QueueID, true)
			m.StoreTimestamp = now
			positions := make([]int64, len(b.Items))
			q := p
			for i, it := range b.Items {
				in := sizes[k].items[i]
				m.Flag, m.Body, m.Properties = it.Flag, it.Body, it.Properties
				positions[i] = int64(at) + int64(q)
				if err := m.Encode(dst[q:q+in], qo+int64(i), positions[i]); err != nil {
					return err
				}
				q += in
			}
			ctr.Store(qo + int64(len(b.Items)))
			res[k] = PutResult{Status: PutOK, Pos: pos, Size: int32(n), QueueOffset: qo, StoreTimestamp: now, Positions: positions, QueueID: m.QueueID}
			p += n
		}
		return nil
	})
	if err != nil {
		s.giveBack(reqs, res)
		failed := s.appendFailed(err)
		for k := range reqs {
			if sizes[k].n > 0 {
				res[k] = failed
			}
		}
		return false
	}
	return true
}

// giveBack puts back the queue offsets a failed append took: those of the
// requests its fill encoded (res PutOK with a size), in reverse, so that
// each queue ends at the first offset the chunk took. REQUIRES: putMu held.
func (s *Store) giveBack(reqs []PutRequest, res []PutResult) {
	for k := len(reqs) - 1; k >= 0; k-- {
		if res[k].Status != PutOK || res[k].Size == 0 { // NB: res starts zeroed, PutOK with no size
			continue
		}
		m := reqs[k].Msg
		if m == nil {
			m = &reqs[k].Batch.Template
		}
		if advancesQueue(m.SysFlag) {
			s.queueNext.counter(m.Topic, m.QueueID).Store(res[k].QueueOffset)
		}
	}
}

// answer calls each request's Done: at once, or once on disk (sync flush
// mode, stored, not NoWait).
func (s *Store) answer(reqs []PutRequest, res []PutResult) {
	waiting := false
	if s.cfg.SyncFlush() {
		durable, deadline := s.log.Durable(), time.Now().Add(s.cfg.SyncFlushTimeout)
		s.waitMu.Lock()
		for i := range reqs {
			end := commitlog.Offset(res[i].Pos + int64(res[i].Size))
			if res[i].Status == PutOK && !reqs[i].NoWait && end > durable {
				s.waiters = append(s.waiters, durableWaiter{end: end, deadline: deadline, res: res[i], done: reqs[i].Done})
				reqs[i].Done, waiting = nil, true
			}
		}
		s.waitMu.Unlock()
	}
	for i := range reqs {
		if reqs[i].Done != nil {
			s.hold(reqs[i].NoWait, res[i], reqs[i].Done)
		}
	}
	if waiting {
		s.kickWaiters()
	}
}

// Put stores one message and waits for its result (in sync flush mode,
// until it is on disk: PutFlushDiskTimeout after the sync flush timeout,
// stored all the same). The store sets StoreTimestamp, and StoreHost when
// m has none. For the broker's own puts (retries, commits, delays); sends
// use Submit.
func (s *Store) Put(ctx context.Context, m *message.Message) PutResult {
	return s.putWait(ctx, PutRequest{Msg: m})
}

// PutBatch stores a batch and waits for its result, as Put.
func (s *Store) PutBatch(ctx context.Context, b *Batch) PutResult {
	return s.putWait(ctx, PutRequest{Batch: b})
}

// putWaiter is the scratch space of one waiting put, pooled: Put costs no
// allocation.
type putWaiter struct {
	reqs  [1]PutRequest
	res   [1]PutResult
	sizes [1]sized
	ch    chan PutResult
	done  Answerer
}

var putWaiters = sync.Pool{New: func() any {
	w := &putWaiter{ch: make(chan PutResult, 1)}
	w.done = AnswerFunc(func(r PutResult) { w.ch <- r })
	return w
}}

func (s *Store) putWait(ctx context.Context, r PutRequest) PutResult {
	w := putWaiters.Get().(*putWaiter)
	r.Done = w.done
	w.reqs[0], w.res[0], w.sizes[0] = r, PutResult{}, sized{}
	s.submit(w.reqs[:], w.res[:], w.sizes[:])
	var res PutResult
	select {
	case res = <-w.ch: // NB: answered during Submit, whatever ctx says
	default:
		select {
		case res = <-w.ch:
		case <-ctx.Done():
			// NB: the put is stored and waits for its fsync; its Done
			// will still write to w.ch, so w is not reused.
			return PutResult{Status: PutFlushDiskTimeout,
				Remark: "store: stored, but the caller stopped waiting for the flush: " + ctx.Err().Error()}
		}
	}
	w.reqs[0] = PutRequest{}
	putWaiters.Put(w)
	return res
}

// advancesQueue reports whether a message takes a queue offset: PREPARED
// and ROLLBACK transactional messages get 0 and do not advance the queue.
func advancesQueue(sysFlag int32) bool {
	tx := message.TxType(sysFlag)
	return tx == message.TxNot || tx == message.TxCommit
}

// queueNexts is the next queue offset of every queue: written by the put
// path under putMu, read by the pull path without it.
type queueNexts struct {
	mu sync.RWMutex // the maps' structure; writers also hold putMu
	m  map[string]map[int32]*atomic.Int64
}

// counter returns a queue's next-offset counter, creating it.
// REQUIRES: putMu held, or no concurrent Put (Open).
func (q *queueNexts) counter(topic string, id int32) *atomic.Int64 {
	if c := q.m[topic][id]; c != nil { // NB: putMu excludes structural writers
		return c
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	byID := q.m[topic]
	if byID == nil {
		byID = map[int32]*atomic.Int64{}
		q.m[topic] = byID
	}
	c := new(atomic.Int64)
	byID[id] = c
	return c
}

// load returns a queue's next offset (0 for an unknown queue).
func (q *queueNexts) load(topic string, id int32) int64 {
	q.mu.RLock()
	c := q.m[topic][id]
	q.mu.RUnlock()
	if c == nil {
		return 0
	}
	return c.Load()
}

// queueCounter returns, for a message that takes a queue offset, its
// queue's counter and offset; (nil, 0) for one that does not.
// REQUIRES: putMu held.
func (s *Store) queueCounter(topic string, id int32, advance bool) (*atomic.Int64, int64) {
	if !advance {
		return nil, 0
	}
	c := s.queueNext.counter(topic, id)
	return c, c.Load()
}

// QueueNext returns the next queue offset the put path will assign. It
// does not take the put lock.
func (s *Store) QueueNext(topic string, queueID int32) int64 {
	return s.queueNext.load(topic, queueID)
}

// chunkBytes bounds the bytes of one append of Submit (a request larger
// than that is appended alone).
func (s *Store) chunkBytes() int {
	return int(min(256<<10, s.cfg.SegmentSize/4))
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

var (
	errNoMessage  = errors.New("store: a put with neither a message nor a batch")
	errEmptyBatch = errors.New("store: empty batch")
	errTxBatch    = errors.New("store: transactional messages cannot be sent in a batch")
)
