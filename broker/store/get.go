package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/consumequeue/keyindex"
	"github.com/sluicemq/sluice/internal/message"
)

// GetRequest asks for messages of one queue from a queue offset.
type GetRequest struct {
	Topic   string
	QueueID int32
	Offset  int64
	// MaxMsgs caps the messages returned (at least 1 is always allowed).
	MaxMsgs int
	// MaxBytes caps the bytes returned; the first message is always taken.
	// 0 means 256 KiB.
	MaxBytes int
	// TagCodes filters by tags hash code; nil takes every message.
	TagCodes *message.TagCodeSet
	// Filter, if set, is asked about each message TagCodes takes, with its
	// properties string (valid only during the call): SQL92 filters.
	Filter func(props []byte) bool
	// Buf is reused for the result's Body when it is large enough.
	Buf []byte
}

// GetResult holds the raw stored records found, back to back, exactly as in
// the commitlog: a pull response body.
type GetResult struct {
	Status GetStatus
	Body   []byte
	Count  int
	// NextOffset is where the next get should start (RocketMQ's
	// nextBeginOffset); MinOffset and MaxOffset are the queue's bounds.
	NextOffset, MinOffset, MaxOffset int64
}

const (
	defaultMaxBytes = 256 << 10
	maxScanEntries  = 800 // RocketMQ scans at most 16,000 bytes of entries
	entryBatch      = 64
)

// Get reads messages from a queue (RocketMQ's getMessage): see GetStatus for
// the outcomes and how NextOffset is set for each.
func (s *Store) Get(_ context.Context, req GetRequest) (GetResult, error) {
	q := s.cq.Lookup(req.Topic, req.QueueID)
	if q == nil {
		if req.Offset >= 0 && req.Offset <= s.QueueNext(req.Topic, req.QueueID) && req.Offset > 0 {
			// Stored but not dispatched yet: nothing new for now.
			return GetResult{Status: GetOffsetOverflowOne, NextOffset: req.Offset}, nil
		}
		return GetResult{Status: GetNoMatchedLogicQueue}, nil
	}
	minOff, maxOff := s.minOffset(q), q.Next()
	res := GetResult{MinOffset: minOff, MaxOffset: maxOff, NextOffset: req.Offset}
	if req.Offset > maxOff && req.Offset <= s.QueueNext(req.Topic, req.QueueID) {
		res.Status = GetOffsetOverflowOne // stored, not dispatched yet
		return res, nil
	}
	switch {
	case maxOff == 0 || minOff >= maxOff:
		res.Status, res.NextOffset = GetNoMessageInQueue, 0
		return res, nil
	case req.Offset < minOff:
		res.Status, res.NextOffset = GetOffsetTooSmall, minOff
		return res, nil
	case req.Offset == maxOff:
		res.Status = GetOffsetOverflowOne
		return res, nil
	case req.Offset > maxOff:
		res.Status, res.NextOffset = GetOffsetOverflowBadly, maxOff
		return res, nil
	}
	maxMsgs := max(req.MaxMsgs, 1)
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = defaultMaxBytes
	}
	var entriesArr, chosenArr [entryBatch]consumequeue.Entry
	sc := scan{off: req.Offset, maxOff: maxOff, maxMsgs: maxMsgs, maxBytes: maxBytes, tagCodes: req.TagCodes}
	body := req.Buf[:0]
	// NB: entries are chosen first, then the records are read with one
	// read per run of records adjacent in the log (a queue written in
	// bursts or batches is mostly such runs). With a Filter, the records
	// it refuses are cut out after the read and the scan goes on while
	// the result has room (RocketMQ reads each record and goes on).
	for {
		chosen, total, full, err := sc.choose(q, int64(s.log.Min()), len(body), entriesArr[:0], chosenArr[:0])
		if err != nil {
			if errors.Is(err, consumequeue.ErrOffsetBelowMin) {
				res.Status, res.NextOffset = GetOffsetTooSmall, q.Min()
				return res, nil
			}
			return res, fmt.Errorf("store: read %s/%d at %d: %w", req.Topic, req.QueueID, sc.off, err)
		}
		if body, err = s.readChosen(body, chosen, total, req.Filter, &sc); err != nil {
			return res, err
		}
		if full || sc.count >= maxMsgs || sc.scanned >= maxScanEntries || sc.off >= maxOff {
			break
		}
	}
	res.NextOffset, res.Body, res.Count = sc.off, body, sc.count
	switch {
	case res.Count > 0:
		res.Status = GetFound
	case sc.removed > 0 && sc.removed == sc.scanned:
		res.Status = GetMessageWasRemoving
	default:
		res.Status = GetNoMatchedMessage
	}
	return res, nil
}

// scan is where one Get is in its queue.
type scan struct {
	off, maxOff       int64
	maxMsgs, maxBytes int
	scanned, removed  int
	count             int // records taken
	tagCodes          *message.TagCodeSet
}

// choose appends to chosen the next entries to read, from sc.off on, as the
// limits allow (bodyLen bytes are taken already); total is their size and
// full reports the byte limit reached. entries is a buffer.
func (sc *scan) choose(q *consumequeue.Queue, logMin int64, bodyLen int, entries, chosen []consumequeue.Entry) (
	_ []consumequeue.Entry, total int, full bool, err error) {
	for sc.scanned < maxScanEntries && sc.off < sc.maxOff {
		es, err := q.Read(sc.off, entries)
		if err != nil || len(es) == 0 {
			return chosen, total, false, err
		}
		for _, e := range es {
			taken := sc.count + len(chosen)
			if taken >= sc.maxMsgs {
				return chosen, total, false, nil
			}
			if taken > 0 && bodyLen+total+int(e.Size) > sc.maxBytes {
				return chosen, total, true, nil
			}
			sc.off++
			sc.scanned++
			if e.Pos < logMin {
				sc.removed++
				continue
			}
			if !sc.tagCodes.Has(e.TagsCode) {
				continue
			}
			chosen = append(chosen, e)
			total += int(e.Size)
			if sc.scanned >= maxScanEntries {
				return chosen, total, false, nil
			}
		}
	}
	return chosen, total, false, nil
}

// readChosen appends the chosen records (total bytes) to body, skipping
// those retention removed meanwhile and those filter refuses.
func (s *Store) readChosen(body []byte, chosen []consumequeue.Entry, total int, filter func([]byte) bool, sc *scan) ([]byte, error) {
	n := len(body)
	body = slices.Grow(body, total)[:n+total]
	for i := 0; i < len(chosen); {
		j, end := i+1, chosen[i].Pos+int64(chosen[i].Size)
		for j < len(chosen) && chosen[j].Pos == end {
			end += int64(chosen[j].Size)
			j++
		}
		run := int(end - chosen[i].Pos)
		if _, err := s.log.ReadAt(body[n:n+run], commitlog.Offset(chosen[i].Pos)); err == nil {
			n = keep(body, n, chosen[i:j], filter, sc)
			i = j
			continue
		}
		// NB: a run never crosses a segment end (every segment ends with
		// a blank filler), so this is retention removing part of the run
		// under us: read its records one by one and skip the removed.
		for ; i < j; i++ {
			e := chosen[i]
			if _, err := s.log.ReadAt(body[n:n+int(e.Size)], commitlog.Offset(e.Pos)); err != nil {
				if errors.Is(err, commitlog.ErrOffsetRemoved) {
					sc.removed++
					continue
				}
				return body[:n], fmt.Errorf("store: read record at %d: %w", e.Pos, err)
			}
			n = keep(body, n, chosen[i:i+1], filter, sc)
		}
	}
	return body[:n], nil
}

// keep takes the records of es, just read into body from n on, and returns
// the body's new length: with a filter, the records it refuses are cut out
// (so are records whose properties cannot be read).
func keep(body []byte, n int, es []consumequeue.Entry, filter func([]byte) bool, sc *scan) int {
	if filter == nil {
		sc.count += len(es)
		for _, e := range es {
			n += int(e.Size)
		}
		return n
	}
	kept := n
	for _, e := range es {
		rec := body[n : n+int(e.Size)]
		n += int(e.Size)
		if di, err := message.ReadDispatchInfo(rec); err == nil && filter(di.Properties) {
			kept += copy(body[kept:], rec)
			sc.count++
		}
	}
	return kept
}

// minOffset is the first queue offset whose record is still in the log:
// retention deletes whole consume queue files, so the first file may still
// list entries of deleted segments.
func (s *Store) minOffset(q *consumequeue.Queue) int64 {
	lo, hi := q.Min(), q.Next()
	logMin := int64(s.log.Min())
	// NB: every pull asks; almost always the first entry is still in the
	// log, so one entry read settles it before any binary search.
	if lo < hi {
		if e, err := q.Entry(lo); err == nil && e.Pos >= logMin {
			return lo
		}
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.Entry(mid)
		if err != nil || e.Pos >= logMin {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// MaxOffset returns a queue's next queue offset (0 for an unknown queue).
func (s *Store) MaxOffset(topic string, queueID int32) int64 {
	if q := s.cq.Lookup(topic, queueID); q != nil {
		return q.Next()
	}
	return 0
}

// MinOffset returns a queue's first readable queue offset (0 if unknown).
func (s *Store) MinOffset(topic string, queueID int32) int64 {
	if q := s.cq.Lookup(topic, queueID); q != nil {
		return s.minOffset(q)
	}
	return 0
}

// OffsetByTime returns the first queue offset whose message was stored at
// or after ts (unix ms): MaxOffset when every message is older, MinOffset
// when every message is newer.
func (s *Store) OffsetByTime(topic string, queueID int32, ts int64) (int64, error) {
	q := s.cq.Lookup(topic, queueID)
	if q == nil {
		return 0, nil
	}
	off, err := q.SearchByTime(ts, s.entryStoreTime)
	if err != nil {
		return 0, err
	}
	return max(off, s.minOffset(q)), nil
}

// StoreTimeAt returns the store timestamp of the message at a queue offset.
func (s *Store) StoreTimeAt(topic string, queueID int32, offset int64) (int64, error) {
	q := s.cq.Lookup(topic, queueID)
	if q == nil {
		return 0, fmt.Errorf("store: no queue %s/%d", topic, queueID)
	}
	e, err := q.Entry(offset)
	if err != nil {
		return 0, err
	}
	return s.entryStoreTime(e)
}

// EarliestStoreTime returns the store time of a queue's first readable
// message.
func (s *Store) EarliestStoreTime(topic string, queueID int32) (int64, error) {
	return s.StoreTimeAt(topic, queueID, s.MinOffset(topic, queueID))
}

func (s *Store) entryStoreTime(e consumequeue.Entry) (int64, error) {
	var hdr [message.OffStoreTimestampV4 + 8 + message.LenHostV6 - message.LenHostV4]byte
	n, err := s.log.ReadAt(hdr[:], commitlog.Offset(e.Pos))
	if n < message.OffBornHost+message.LenHostV4+8 {
		return 0, fmt.Errorf("store: read record at %d: %w", e.Pos, err)
	}
	sysFlag := int32(binary.BigEndian.Uint32(hdr[message.OffSysFlag:]))
	at := message.OffStoreTimestampV4
	if sysFlag&message.FlagBornHostV6 != 0 {
		at += message.LenHostV6 - message.LenHostV4
	}
	if n < at+8 {
		return 0, fmt.Errorf("store: short record at %d", e.Pos)
	}
	return int64(binary.BigEndian.Uint64(hdr[at:])), nil
}

// ReadMessage returns the record stored at pos (view by offset message id),
// validated.
func (s *Store) ReadMessage(pos int64) ([]byte, error) {
	var hdr [4]byte
	if _, err := s.log.ReadAt(hdr[:], commitlog.Offset(pos)); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	if size < message.MinRecordSize || size > int32(s.cfg.MaxMessageSize)+64<<10 {
		return nil, fmt.Errorf("store: no message at %d (size %d)", pos, size)
	}
	rec := make([]byte, size)
	if _, err := s.log.ReadAt(rec, commitlog.Offset(pos)); err != nil {
		return nil, err
	}
	if err := message.Validate(rec, pos, true); err != nil {
		return nil, fmt.Errorf("store: no message at %d: %w", pos, err)
	}
	return rec, nil
}

// QueryByKey returns the records of topic whose KEYS or UNIQ_KEY include
// key, stored within [begin, end] (unix ms), newest first, at most max.
func (s *Store) QueryByKey(topic, key string, begin, end int64, max int) ([][]byte, error) {
	positions, err := s.index.Query(keyindex.Key(topic, key), begin, end, max*2+8)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	seen := map[int64]bool{}
	for _, pos := range positions {
		if len(out) >= max {
			break
		}
		if seen[pos] || pos < int64(s.log.Min()) {
			continue
		}
		seen[pos] = true
		rec, err := s.ReadMessage(pos)
		if err != nil {
			continue // deleted or not a record: a stale index entry
		}
		r, err := message.Decode(rec)
		if err != nil || string(r.Topic) != topic || r.StoreTimestamp < begin || r.StoreTimestamp > end {
			continue
		}
		if !hasKey(r.Properties, key) {
			continue // hash collision
		}
		out = append(out, rec)
	}
	return out, nil
}

func hasKey(props []byte, key string) bool {
	if v, ok := message.PropertyValueBytes(props, message.PropUniqKey); ok && string(v) == key {
		return true
	}
	keys, _ := message.PropertyValueBytes(props, message.PropKeys)
	for k := range message.KeysSeq(keys) {
		if bytes.Equal(k, []byte(key)) {
			return true
		}
	}
	return false
}

// Topics calls fn for each queue the store indexes, with its bounds.
func (s *Store) Topics(fn func(topic string, queueID int32, min, max int64) bool) {
	s.cq.Queues(func(topic string, id int32, q *consumequeue.Queue) bool {
		return fn(topic, id, s.minOffset(q), q.Next())
	})
}
