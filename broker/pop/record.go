package pop

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluicemq/sluice/internal/remoting"
)

// Records: every change of a journaled Table (SetJournal) is also written
// as a record, in the order the changes were made, to its Journal (the
// broker's commitlog, on a system topic): the log carries them to the
// slaves, whose tables apply them (Apply), and a restarted broker applies
// those past its saved state. A record holds the change's outcome, not
// its request (a pop's outcome depends on the map order and the clock):
// applying it sets what the change set.

// RecordVersion is the version of the records Encode writes.
const RecordVersion = 1

// Record ops.
const (
	OpPop    = 1 // a pop's deliveries (Set), new waiting offsets (Wait), the queue's next (Next)
	OpAck    = 2 // Offset acked (removed; its message group's next released)
	OpChange = 3 // Offset's new Nonce and VisibleAt
	OpReset  = 4 // the queue reset to Offset
	OpDelete = 5 // the group deleted
)

// maxRecordItems bounds a record's Set and Wait (a pop takes at most
// MaxInflight offsets of a queue).
const maxRecordItems = MaxInflight

// recordEntry is one offset a pop delivered: its state after the pop.
type recordEntry struct {
	Offset    int64  `msgpack:"o"`
	VisibleAt int64  `msgpack:"v"`
	Attempt   int32  `msgpack:"a"`
	Nonce     uint64 `msgpack:"n"`
	Group     string `msgpack:"g,omitempty"`
	Busy      bool   `msgpack:"b,omitempty"` // its message group's offset in flight from now on
}

// Record is one change of a Table.
type Record struct {
	Version int    `msgpack:"ver"`
	Op      int    `msgpack:"op"`
	Group   string `msgpack:"g"`
	Topic   string `msgpack:"t,omitempty"`
	Queue   int32  `msgpack:"q,omitempty"`
	// OpPop: the queue's next offset after the pop; whether the pop
	// released its waiting offsets first; the offsets delivered; the
	// offsets that went waiting; the table's nonce after.
	Next    int64         `msgpack:"x,omitempty"`
	Release bool          `msgpack:"r,omitempty"`
	Set     []recordEntry `msgpack:"s,omitempty"`
	Wait    []waitingSnap `msgpack:"w,omitempty"`
	// OpAck, OpChange, OpReset: the offset; OpChange: its new nonce and
	// visible time (OpPop: Nonce is the table's).
	Offset    int64  `msgpack:"o,omitempty"`
	Nonce     uint64 `msgpack:"n,omitempty"`
	VisibleAt int64  `msgpack:"v,omitempty"`
}

// ErrRecord is a record that does not decode or makes no sense.
var ErrRecord = errors.New("pop: bad state record")

// Encode returns the record's bytes: the msgpack map msgpack.Marshal
// makes of it (its tags, empty fields left out), written field by field:
// Marshal's reflection was 40% of an ack's allocations.
func (r *Record) Encode() []byte {
	r.Version = RecordVersion
	var buf bytes.Buffer
	buf.Grow(48 + len(r.Group) + len(r.Topic) + 40*len(r.Set))
	e := msgpack.GetEncoder()
	defer msgpack.PutEncoder(e)
	e.Reset(&buf)
	n := 2 // ver, g: never left out
	for _, set := range []bool{r.Op != 0, r.Topic != "", r.Queue != 0, r.Next != 0, r.Release, len(r.Set) > 0, len(r.Wait) > 0,
		r.Offset != 0, r.Nonce != 0, r.VisibleAt != 0} {
		if set {
			n++
		}
	}
	// NB: writes to a bytes.Buffer do not fail.
	_ = e.EncodeMapLen(n)
	str := func(k, v string) { _ = e.EncodeString(k); _ = e.EncodeString(v) }
	num := func(k string, v int64) { _ = e.EncodeString(k); _ = e.EncodeInt(v) }
	num("ver", int64(r.Version))
	if r.Op != 0 {
		num("op", int64(r.Op))
	}
	str("g", r.Group)
	if r.Topic != "" {
		str("t", r.Topic)
	}
	if r.Queue != 0 {
		num("q", int64(r.Queue))
	}
	if r.Next != 0 {
		num("x", r.Next)
	}
	if r.Release {
		_ = e.EncodeString("r")
		_ = e.EncodeBool(true)
	}
	if len(r.Set) > 0 {
		_ = e.EncodeString("s")
		_ = e.EncodeArrayLen(len(r.Set))
		for _, s := range r.Set {
			m := 4
			if s.Group != "" {
				m++
			}
			if s.Busy {
				m++
			}
			_ = e.EncodeMapLen(m)
			num("o", s.Offset)
			num("v", s.VisibleAt)
			num("a", int64(s.Attempt))
			_ = e.EncodeString("n")
			_ = e.EncodeUint(s.Nonce)
			if s.Group != "" {
				str("g", s.Group)
			}
			if s.Busy {
				_ = e.EncodeString("b")
				_ = e.EncodeBool(true)
			}
		}
	}
	if len(r.Wait) > 0 {
		_ = e.EncodeString("w")
		_ = e.EncodeArrayLen(len(r.Wait))
		for _, w := range r.Wait {
			_ = e.EncodeMapLen(2)
			str("g", w.Group)
			_ = e.EncodeString("o")
			if w.Offsets == nil {
				_ = e.EncodeNil()
			} else {
				_ = e.EncodeArrayLen(len(w.Offsets))
				for _, off := range w.Offsets {
					_ = e.EncodeInt(off)
				}
			}
		}
	}
	if r.Offset != 0 {
		num("o", r.Offset)
	}
	if r.Nonce != 0 {
		_ = e.EncodeString("n")
		_ = e.EncodeUint(r.Nonce)
	}
	if r.VisibleAt != 0 {
		num("v", r.VisibleAt)
	}
	return buf.Bytes()
}

// DecodeRecord reads a record made by Encode, checking its version and
// fields.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	// NB: checked first: msgpack allocates what an array header claims
	// (FuzzDecodeRecord: 0xdd 0xdddddddd ran the fuzzer out of memory)
	if _, err := remoting.CheckMsgpack(b); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	if err := msgpack.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	switch {
	case r.Version != RecordVersion:
		return Record{}, fmt.Errorf("%w: version %d, want %d", ErrRecord, r.Version, RecordVersion)
	case r.Op < OpPop || r.Op > OpDelete:
		return Record{}, fmt.Errorf("%w: op %d", ErrRecord, r.Op)
	case r.Queue < 0 || r.Queue > 1<<16 || r.Offset < 0 || r.Next < 0:
		return Record{}, fmt.Errorf("%w: queue %d, offset %d, next %d", ErrRecord, r.Queue, r.Offset, r.Next)
	case len(r.Set) > maxRecordItems || len(r.Wait) > maxRecordItems:
		return Record{}, fmt.Errorf("%w: %d offsets set, %d groups waiting", ErrRecord, len(r.Set), len(r.Wait))
	}
	n := 0
	for _, w := range r.Wait {
		n += len(w.Offsets)
		for _, off := range w.Offsets {
			if off < 0 {
				return Record{}, fmt.Errorf("%w: waiting offset %d", ErrRecord, off)
			}
		}
	}
	if n > maxRecordItems {
		return Record{}, fmt.Errorf("%w: %d offsets waiting", ErrRecord, n)
	}
	for _, e := range r.Set {
		if e.Offset < 0 {
			return Record{}, fmt.Errorf("%w: offset %d", ErrRecord, e.Offset)
		}
	}
	return r, nil
}

// Wait waits for a record to be durable (as a send under the broker's
// replication policy) and reports why it is not.
type Wait func() error

// Journal stores a journaled table's records. Append is called with the
// table's lock held, in the order of the changes; it stores rec (or fails
// to) and returns the position after it (what Apply calls the next
// record's position; 0: unknown, the table's position stays) and a wait
// for its durability. It must not call the table.
type Journal interface {
	Append(rec []byte) (next int64, wait Wait)
}

// SetJournal makes t write a record of each change to j (nil: none).
// Extend (auto_renew) writes none: a renewal lost in a failover only
// makes a message in flight visible again sooner (delivered twice).
func (t *Table) SetJournal(j Journal) {
	t.mu.Lock()
	t.journal = j
	t.mu.Unlock()
}

// Pos is the position of the next record t has not applied: records
// before it are in t's state (and in its saved state once Persist ran).
func (t *Table) Pos() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pos
}

// Clear forgets every queue's state and the position (a saved state the
// log no longer backs); the nonce stays, so no old handle is current.
func (t *Table) Clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queues, t.pos, t.diverged = map[key]*queueState{}, 0, false
	t.changed()
}

// emit writes r to the journal. REQUIRES: t.mu held.
func (t *Table) emit(r *Record) Wait {
	if t.journal == nil {
		return nil
	}
	next, w := t.journal.Append(r.Encode())
	if next > t.pos {
		t.pos = next
	} else {
		t.diverged = true
	}
	t.changed()
	return w
}

// Diverged reports whether a change's record was not stored since the
// table was opened empty or cleared: its state then holds what the log
// does not, and a table that applies records (a slave) must be rebuilt
// from the log (Clear, then Apply from the first record).
func (t *Table) Diverged() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.diverged
}

// Apply applies the record at position pos (made by another table: its
// master's, or this broker's before a restart) and moves t's position
// past it. A record before t's position is in t's state already: it is
// skipped, and Apply reports false. A record past it (those between were
// removed by retention) is applied all the same.
func (t *Table) Apply(pos int64, r *Record) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pos < t.pos {
		return false
	}
	t.pos = pos + 1
	t.apply(r)
	t.changed()
	return true
}

// Skip moves t's position to pos when it is behind (records there are
// gone or unreadable).
func (t *Table) Skip(pos int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pos > t.pos {
		t.pos = pos
		t.changed()
	}
}

// apply sets what r's change set. REQUIRES: t.mu held.
func (t *Table) apply(r *Record) {
	k := key{r.Group, r.Topic, r.Queue}
	switch r.Op {
	case OpPop:
		q := t.queues[k]
		if q == nil {
			q = &queueState{next: r.Next, inflight: map[int64]*entry{}}
			t.queues[k] = q
		}
		q.reset = false
		if r.Release {
			q.releaseAll()
		}
		for _, s := range r.Set {
			e := q.inflight[s.Offset]
			if e == nil {
				e = &entry{}
				q.inflight[s.Offset] = e
			}
			e.visibleAt, e.attempt, e.nonce, e.group = s.VisibleAt, s.Attempt, s.Nonce, s.Group
			if s.Busy && s.Group != "" {
				if q.busy == nil {
					q.busy = map[string]int64{}
				}
				q.busy[s.Group] = s.Offset
			}
		}
		for _, w := range r.Wait {
			if len(w.Offsets) == 0 {
				continue
			}
			if q.waiting == nil {
				q.waiting = map[string][]int64{}
			}
			q.waiting[w.Group] = append(q.waiting[w.Group], w.Offsets...)
			q.nWaiting += len(w.Offsets)
		}
		q.next = r.Next
		t.nonce = max(t.nonce, r.Nonce)
	case OpAck:
		if q := t.queues[k]; q != nil {
			if e := q.inflight[r.Offset]; e != nil {
				q.done(r.Offset, e)
			}
		}
	case OpChange:
		if q := t.queues[k]; q != nil {
			if e := q.inflight[r.Offset]; e != nil {
				e.nonce, e.visibleAt = r.Nonce, r.VisibleAt
			}
		}
		t.nonce = max(t.nonce, r.Nonce)
	case OpReset:
		if q := t.queues[k]; q != nil {
			q.resetTo(r.Offset)
		}
	case OpDelete:
		t.deleteGroup(r.Group)
	}
}
