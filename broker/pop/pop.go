// Package pop keeps the state of POP consumption (RocketMQ 5's
// SimpleConsumer): per group, topic and queue, the next offset never
// delivered and the offsets in flight, each invisible until its time, with
// its delivery attempt and a nonce that its receipt handle names. A
// receive takes expired in-flight offsets first (delivered again, attempt
// + 1), then new ones; an ack removes an offset whose handle is current;
// a change of invisible time gives the offset a new nonce and handle.
//
// Open keeps the state in a crash-safe state file, saved every
// PersistInterval while it changes and at Close: after a restart the
// offsets in flight are in flight still (their handles valid) and acked
// ones are not delivered again; a kill -9 loses at most the last interval
// (those messages are delivered again: at least once). A journaled table
// (SetJournal, record.go) also writes each change as a record to the
// broker's log: the saved state names the position it covers, a restart
// applies the records past it (nothing acked is lost by a kill -9), and
// a slave's table applies its master's records as they arrive.
//
// FIFO (PopOrderly, for a group with consumeMessageOrderly): a message
// group's next offset is delivered only once the one before it is acked
// (or dead-lettered, which acks it); the offsets behind wait in the table
// and are delivered, in order, one at a time. Only the message group
// waits: other groups of the same queue keep flowing (RocketMQ blocks the
// whole queue, rocketmq#6828). A message with no message group is its own
// group (it never waits, nothing waits for it). An offset redelivered
// after its invisible time keeps its successors waiting, so order holds
// across redeliveries; a head never acked is dead-lettered after the
// group's max attempts, which releases the next, so no offset waits
// forever. Waiting offsets count against MaxInflight and the committed
// offset, and are saved with the rest.
//
// Receipt handles are opaque to clients and versioned: "1" followed by the
// URL-safe base64 of the broker name, topic, queue, offset, nonce and the
// time the message becomes visible again.
package pop

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrInvalidHandle is a handle that does not decode, is not current (acked,
// changed, delivered again) or whose invisible time is over.
var ErrInvalidHandle = errors.New("pop: invalid receipt handle")

// Handle is what a receipt handle names.
type Handle struct {
	Broker    string
	Topic     string
	Queue     int32
	Offset    int64
	Nonce     uint64
	VisibleAt int64 // Unix ms: when the message is delivered again
}

// handleVersion is the first character of every handle this version makes.
const handleVersion = '1'

// maxHandleName bounds a handle's broker and topic names.
const maxHandleName = 1024

// Encode returns the handle's opaque string.
func (h Handle) Encode() string {
	b := make([]byte, 0, 32+len(h.Broker)+len(h.Topic))
	b = binary.AppendUvarint(b, uint64(len(h.Broker)))
	b = append(b, h.Broker...)
	b = binary.AppendUvarint(b, uint64(len(h.Topic)))
	b = append(b, h.Topic...)
	b = binary.AppendVarint(b, int64(h.Queue))
	b = binary.AppendVarint(b, h.Offset)
	b = binary.AppendUvarint(b, h.Nonce)
	b = binary.AppendVarint(b, h.VisibleAt)
	return string(handleVersion) + base64.RawURLEncoding.EncodeToString(b)
}

// DecodeHandle reads a handle made by Encode.
func DecodeHandle(s string) (Handle, error) {
	var h Handle
	if len(s) < 2 || s[0] != handleVersion {
		return h, fmt.Errorf("%w: not a version-1 handle", ErrInvalidHandle)
	}
	b, err := base64.RawURLEncoding.DecodeString(s[1:])
	if err != nil {
		return h, fmt.Errorf("%w: %v", ErrInvalidHandle, err)
	}
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > maxHandleName || uint64(len(b)-k) < n {
			return "", false
		}
		v := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return v, true
	}
	num := func() (int64, bool) {
		v, k := binary.Varint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return v, true
	}
	var ok [6]bool
	var q int64
	h.Broker, ok[0] = str()
	h.Topic, ok[1] = str()
	q, ok[2] = num()
	h.Offset, ok[3] = num()
	if n, k := binary.Uvarint(b); k > 0 {
		h.Nonce, ok[4], b = n, true, b[k:]
	}
	h.VisibleAt, ok[5] = num()
	for _, o := range ok {
		if !o {
			return Handle{}, fmt.Errorf("%w: truncated", ErrInvalidHandle)
		}
	}
	if len(b) != 0 || q < 0 || q > 1<<16 || h.Offset < 0 {
		return Handle{}, fmt.Errorf("%w: malformed", ErrInvalidHandle)
	}
	h.Queue = int32(q)
	return h, nil
}

// MaxInflight bounds the offsets of one group's queue in flight or
// waiting (FIFO): a consumer that receives and never acks stops getting
// new messages of the queue (those in flight are delivered again as their
// time runs out, and dead-lettered past the group's max attempts).
const MaxInflight = 1 << 16

type key struct {
	group, topic string
	queue        int32
}

type entry struct {
	visibleAt int64 // Unix ms; 0 for an offset released to be delivered
	attempt   int32 // deliveries so far; 0 before the first
	nonce     uint64
	group     string // its message group when popped FIFO; "" none
}

type queueState struct {
	next     int64            // the next offset never delivered
	inflight map[int64]*entry // delivered (or released to be), not acked
	// FIFO: busy is, per message group, its one offset in flight; waiting
	// the group's offsets behind it, lowest first (nWaiting in all).
	busy     map[string]int64
	waiting  map[string][]int64
	nWaiting int
	// reset: Reset moved next; the next pop, if unordered, takes it as
	// it is (its start may predate the reset, see Reset). Not saved.
	reset bool
}

// done removes an acked offset; when it was its message group's offset in
// flight, the group's next waiting offset takes its place, visible now
// (the next pop delivers it with attempt 1), and done reports true.
func (q *queueState) done(off int64, e *entry) bool {
	delete(q.inflight, off)
	if b, ok := q.busy[e.group]; e.group == "" || !ok || b != off {
		return false
	}
	delete(q.busy, e.group)
	w := q.waiting[e.group]
	if len(w) == 0 {
		return false
	}
	if len(w) == 1 {
		delete(q.waiting, e.group)
	} else {
		q.waiting[e.group] = w[1:]
	}
	q.nWaiting--
	q.inflight[w[0]] = &entry{group: e.group}
	q.busy[e.group] = w[0]
	return true
}

// releaseAll makes every waiting offset deliverable (a group no longer
// orderly). REQUIRES: t.mu held.
func (q *queueState) releaseAll() {
	for g, w := range q.waiting {
		for _, off := range w {
			q.inflight[off] = &entry{group: g}
		}
	}
	q.waiting, q.busy, q.nWaiting = nil, nil, 0
}

// Delivery is one offset to deliver.
type Delivery struct {
	Offset  int64
	Attempt int32 // 1 on the first delivery
	Handle  Handle
}

// Table is the POP state of a broker. Safe for concurrent use; its lock is
// a leaf.
type Table struct {
	mu     sync.Mutex
	queues map[key]*queueState // guarded by mu
	nonce  uint64              // guarded by mu
	p      *persister          // nil: in memory only (New)
	// journal receives a record of each change (record.go); pos is the
	// position of the next record not in the state. Guarded by mu.
	journal Journal
	pos     int64
	// diverged: a change's record was not stored (the log refused it):
	// the state holds what the log does not. Saved.
	diverged bool
}

// New returns an empty Table.
func New() *Table { return &Table{queues: map[key]*queueState{}} }

// Pop takes up to n offsets of group's topic queue for broker: in-flight
// ones whose invisible time is over first (delivered again), then new ones
// below end. start is where a group new to the queue begins (and where one
// behind the queue's first offset resumes). Offsets waiting from FIFO pops
// are delivered too (the group is no longer orderly).
func (t *Table) Pop(broker, group, topic string, queue int32, start, end int64, n int, invisible time.Duration, now time.Time) []Delivery {
	return t.pop(broker, group, topic, queue, start, end, n, invisible, now, nil)
}

// PopOrderly is Pop for an orderly group: FIFO per message group (see the
// package doc). groupOf names the message group of a new offset ("": none)
// and answers false for one it cannot tell (not read yet): no new offset
// is taken from there on. It is called with the table's lock held and must
// not call the table.
func (t *Table) PopOrderly(broker, group, topic string, queue int32, start, end int64, n int, invisible time.Duration, now time.Time,
	groupOf func(off int64) (string, bool)) []Delivery {
	if groupOf == nil {
		groupOf = func(int64) (string, bool) { return "", true }
	}
	return t.pop(broker, group, topic, queue, start, end, n, invisible, now, groupOf)
}

// Next is where group's next new offset of the queue is (what PopOrderly
// asks groupOf about first), and whether the queue may take new offsets
// (MaxInflight): a caller need not read ahead when it may not.
func (t *Table) Next(group, topic string, queue int32, start int64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q := t.queues[key{group, topic, queue}]; q != nil {
		return max(q.next, start), len(q.inflight)+q.nWaiting < MaxInflight
	}
	return start, true
}

func (t *Table) pop(broker, group, topic string, queue int32, start, end int64, n int, invisible time.Duration, now time.Time,
	groupOf func(off int64) (string, bool)) []Delivery {
	if n <= 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key{group, topic, queue}
	q := t.queues[k]
	if q == nil {
		q = &queueState{next: start, inflight: map[int64]*entry{}}
		t.queues[k] = q
	}
	keep := q.reset && groupOf == nil // NB: start may predate a reset
	q.reset = false
	if !keep && q.next < start {
		q.next = start
	}
	changed := false
	var rec *Record
	if t.journal != nil {
		rec = &Record{Op: OpPop, Group: group, Topic: topic, Queue: queue}
	}
	if groupOf == nil && q.nWaiting > 0 {
		q.releaseAll()
		changed = true
		if rec != nil {
			rec.Release = true
		}
	}
	nowMs := now.UnixMilli()
	visibleAt := now.Add(invisible).UnixMilli()
	var out []Delivery
	take := func(off int64, e *entry) {
		t.nonce++
		e.nonce, e.visibleAt = t.nonce, visibleAt
		out = append(out, Delivery{Offset: off, Attempt: e.attempt, Handle: Handle{Broker: broker, Topic: topic,
			Queue: queue, Offset: off, Nonce: e.nonce, VisibleAt: visibleAt}})
		if rec != nil {
			b, ok := q.busy[e.group]
			rec.Set = append(rec.Set, recordEntry{Offset: off, VisibleAt: visibleAt, Attempt: e.attempt, Nonce: e.nonce,
				Group: e.group, Busy: e.group != "" && ok && b == off})
		}
	}
	for off, e := range q.inflight {
		if len(out) >= n {
			break
		}
		if e.visibleAt <= nowMs {
			e.attempt++
			take(off, e)
		}
	}
	for ; len(out) < n && q.next < end && len(q.inflight)+q.nWaiting < MaxInflight; q.next++ {
		var g string
		if groupOf != nil {
			var ok bool
			if g, ok = groupOf(q.next); !ok {
				break
			}
			if _, blocked := q.busy[g]; g != "" && blocked {
				if q.waiting == nil {
					q.waiting = map[string][]int64{}
				}
				q.waiting[g] = append(q.waiting[g], q.next)
				q.nWaiting++
				changed = true
				if rec != nil {
					if n := len(rec.Wait); n > 0 && rec.Wait[n-1].Group == g {
						rec.Wait[n-1].Offsets = append(rec.Wait[n-1].Offsets, q.next)
					} else {
						rec.Wait = append(rec.Wait, waitingSnap{Group: g, Offsets: []int64{q.next}})
					}
				}
				continue
			}
			if g != "" {
				if q.busy == nil {
					q.busy = map[string]int64{}
				}
				q.busy[g] = q.next
			}
		}
		e := &entry{attempt: 1, group: g}
		q.inflight[q.next] = e
		take(q.next, e)
	}
	if changed || len(out) > 0 {
		t.changed()
		if rec != nil {
			rec.Next, rec.Nonce = q.next, t.nonce
			t.emit(rec)
		}
	}
	return out
}

// current returns the in-flight entry h names, if h is its current handle
// and its invisible time is not over.
// REQUIRES: t.mu held.
func (t *Table) current(group string, h Handle, now time.Time) (*queueState, *entry, error) {
	q := t.queues[key{group, h.Topic, h.Queue}]
	if q == nil {
		return nil, nil, fmt.Errorf("%w: nothing of topic %s queue %d is in flight for group %s", ErrInvalidHandle, h.Topic, h.Queue, group)
	}
	e := q.inflight[h.Offset]
	switch {
	case e == nil:
		return nil, nil, fmt.Errorf("%w: offset %d is not in flight (acked already?)", ErrInvalidHandle, h.Offset)
	case e.nonce != h.Nonce:
		return nil, nil, fmt.Errorf("%w: a newer handle replaced it (changed or delivered again)", ErrInvalidHandle)
	case e.visibleAt <= now.UnixMilli():
		return nil, nil, fmt.Errorf("%w: its invisible time is over", ErrInvalidHandle)
	}
	return q, e, nil
}

// Ack ends h's delivery.
func (t *Table) Ack(group string, h Handle, now time.Time) error {
	_, err := t.AckNext(group, h, now)
	return err
}

// AckNext is Ack, reporting whether the ack made the next offset of its
// message group deliverable (FIFO): a receive waiting for arrivals can
// take it now.
func (t *Table) AckNext(group string, h Handle, now time.Time) (bool, error) {
	released, _, err := t.AckDurable(group, h, now)
	return released, err
}

// AckDurable is AckNext, returning too the wait for the ack's record
// (nil when the table is not journaled): an ack is answered OK only once
// its record is as durable as a send would be, so that a slave that takes
// over knows it.
func (t *Table) AckDurable(group string, h Handle, now time.Time) (bool, Wait, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q, e, err := t.current(group, h, now)
	if err != nil {
		return false, nil, err
	}
	released := q.done(h.Offset, e)
	t.changed()
	w := t.emit(&Record{Op: OpAck, Group: group, Topic: h.Topic, Queue: h.Queue, Offset: h.Offset})
	return released, w, nil
}

// Change makes h's message invisible for d from now and returns its new
// handle; h is no longer current. On error h stays as it was.
func (t *Table) Change(group string, h Handle, d time.Duration, now time.Time) (Handle, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, e, err := t.current(group, h, now)
	if err != nil {
		return h, err
	}
	t.nonce++
	e.nonce, e.visibleAt = t.nonce, now.Add(d).UnixMilli()
	h.Nonce, h.VisibleAt = e.nonce, e.visibleAt
	t.changed()
	t.emit(&Record{Op: OpChange, Group: group, Topic: h.Topic, Queue: h.Queue, Offset: h.Offset, Nonce: e.nonce, VisibleAt: e.visibleAt})
	return h, nil
}

// Extend makes h's message invisible for d from now and keeps its
// handle: h stays current, its nonce unchanged (a PushConsumer's
// auto_renew: the client acks or changes the handle it was given, whose
// VisibleAt is then out of date; validity is the nonce and the table's
// invisible time, never the handle's). On error nothing changes.
func (t *Table) Extend(group string, h Handle, d time.Duration, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, e, err := t.current(group, h, now)
	if err != nil {
		return err
	}
	e.visibleAt = now.Add(d).UnixMilli()
	t.changed()
	return nil
}

// Attempt is the delivery attempt of h's message, h being current.
func (t *Table) Attempt(group string, h Handle, now time.Time) (int32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, e, err := t.current(group, h, now)
	if err != nil {
		return 0, err
	}
	return e.attempt, nil
}

// DeleteGroup forgets group's state on every queue (the group was
// deleted): its handles are no longer current, and a group of that name
// starts anew. It reports whether there was any.
func (t *Table) DeleteGroup(group string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := t.deleteGroup(group)
	if found {
		t.changed()
		t.emit(&Record{Op: OpDelete, Group: group})
	}
	return found
}

// deleteGroup forgets group's state. REQUIRES: t.mu held.
func (t *Table) deleteGroup(group string) bool {
	found := false
	for k := range t.queues {
		if k.group == group {
			delete(t.queues, k)
			found = true
		}
	}
	return found
}

// Committed is the lowest offset of group's topic queue not acked: where
// the group resumes after a restart. False when the group never popped
// the queue.
func (t *Table) Committed(group, topic string, queue int32) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[key{group, topic, queue}]
	if q == nil {
		return 0, false
	}
	low := q.next
	for off := range q.inflight {
		low = min(low, off)
	}
	for _, w := range q.waiting {
		low = min(low, w[0])
	}
	return low, true
}
