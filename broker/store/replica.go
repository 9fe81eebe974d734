package store

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/consumequeue"

	"github.com/sluicemq/sluice/commitlog"
)

// Replication (broker/ha) meets the store at two points: a master's puts
// wait at its ReplicaGate before they are answered (SYNC_MASTER, or a
// master in controller mode), and a slave writes its master's bytes with
// ApplyReplica, which the dispatcher then indexes as it indexes the
// master's own puts.
//
// INVARIANT: a store that needs a gate (RequireReplicaGate, or once
// SetReplicaGate set one) never acknowledges a put without it. While it
// has none (a master handing over, closing, or not yet replicating) it
// refuses puts, and a put it stored while it had one but answers after
// the gate was removed (one waiting for its fsync, or between the put lock
// and the gate) gets PutFlushSlaveTimeout: stored, not replicated; never
// PutOK. Both the gate and the need for one change under putMu, so a put
// either was appended with a gate in place or was refused.

// ReplicaGate holds answered puts until a slave has their bytes.
type ReplicaGate interface {
	// Hold calls done with res once a slave has the bytes below end, or
	// with res turned into PutFlushSlaveTimeout or PutSlaveNotAvailable.
	// It must not block, and it must answer even once the gate is
	// closed (with PutFlushSlaveTimeout, never PutOK for want of a
	// slave): a put may reach it after it was removed.
	Hold(end int64, res PutResult, done Answerer)
}

// gateBox is the gate puts read: a nil box, no gate needed (an
// asynchronous master, a lone broker); a box with a nil g, a gate needed
// and none set (puts refused, stored ones answered PutFlushSlaveTimeout).
type gateBox struct{ g ReplicaGate }

// noGate is the box of a store that needs a gate and has none.
var noGate = &gateBox{}

// RequireReplicaGate makes the store a replicated master's (SYNC_MASTER,
// controller mode) before it takes puts: from then on it takes puts only
// while a gate is set (SetReplicaGate), and never answers PutOK without
// one. It cannot be undone.
func (s *Store) RequireReplicaGate() {
	s.putMu.Lock()
	defer s.putMu.Unlock()
	if s.gate.Load() == nil {
		s.gate.Store(noGate)
	}
}

// SetReplicaGate makes every stored put that waits for its answer (not
// NoWait) wait at g too, after its fsync in sync flush mode, and makes
// the store need a gate from now on (RequireReplicaGate). nil removes the
// gate, not the need: the store then refuses puts, and those it stored
// but has not answered yet get PutFlushSlaveTimeout. To hand over, make
// the store refuse puts first (SetReplica), then remove the gate, then
// close it (which answers the puts it holds).
func (s *Store) SetReplicaGate(g ReplicaGate) {
	s.putMu.Lock()
	defer s.putMu.Unlock()
	switch {
	case g != nil:
		s.gate.Store(&gateBox{g})
	case s.gate.Load() != nil:
		s.gate.Store(noGate)
	}
}

// hold answers a put through the replica gate, if the store needs one.
func (s *Store) hold(noWait bool, res PutResult, done Answerer) {
	box := s.gate.Load()
	switch {
	case box == nil || noWait || res.Status != PutOK:
		done.PutDone(res)
	case box.g == nil:
		res.Status = PutFlushSlaveTimeout
		res.Remark = "stored on the master, but it stopped replicating (closing or handing over) before a replica confirmed it"
		done.PutDone(res)
	default:
		box.g.Hold(res.Pos+int64(res.Size), res, done)
	}
}

// StopPuts makes the store refuse every put from now on, as Close does
// first. A closing master (Broker.Close) calls it before it lets its
// replicas confirm what it stored.
func (s *Store) StopPuts() {
	s.putMu.Lock()
	s.putClosed = true
	s.putMu.Unlock()
}

// Unanswered returns how many stored puts wait for their fsync before they
// are answered (or handed to the gate): sync flush mode.
func (s *Store) Unanswered() int {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	return len(s.waiters)
}

// putsRefusedLocked says why the store takes no put now ("" if it does).
// REQUIRES: putMu held.
func (s *Store) putsRefusedLocked() string {
	switch {
	case s.putClosed:
		return "store: closing, retry on another broker"
	case s.replica.Load():
		return "store: this broker is a slave: its log is its master's copy; send to the master"
	case s.gate.Load() == noGate:
		return "store: this master is not replicating now (starting, closing or handing over to another): retry, on the group's master"
	}
	return ""
}

// ErrNotReplica is returned by ApplyReplica on a store that is not a
// replica (SetReplica): a master's log is never written by another's.
var ErrNotReplica = errors.New("store: this store takes puts, not a master's bytes")

// SetReplica makes the store a slave's: puts are refused
// (PutServiceNotAvailable) and ApplyReplica writes the log. Off, it is a
// master's again: once the dispatcher has indexed the whole log, queue
// offsets continue from the consume queues (a replica's unfinished record
// is dropped at the next put). It fails if the dispatcher does not catch
// up within 30 s.
func (s *Store) SetReplica(on bool) error {
	if on || !s.replica.Load() {
		s.putMu.Lock()
		s.replica.Store(on)
		s.putMu.Unlock()
		// NB: a replica's duplicate window learns its keys from its
		// dispatcher, ready for when it becomes master.
		s.SetDedupFeed(on)
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.dispatched.Load() < int64(s.log.Next()) {
		if time.Now().After(deadline) {
			return fmt.Errorf("store: the dispatcher is %d bytes behind the log after 30 s; still a replica", s.DispatchLag())
		}
		s.kickDispatcher()
		time.Sleep(time.Millisecond) // NB: once per role change
	}
	s.putMu.Lock()
	defer s.putMu.Unlock()
	s.cq.Queues(func(topic string, id int32, q *consumequeue.Queue) bool {
		s.queueNext.counter(topic, id).Store(q.Next())
		return true
	})
	s.replica.Store(false)
	s.SetDedupFeed(false) // NB: the dispatcher fed every replicated key; puts record their own
	return nil
}

// ApplyReplica writes bytes of the master's commitlog at at, which must be
// ReplicaOffset() (see commitlog.Log.AppendRaw). The records are indexed
// once IndexReplica is called.
func (s *Store) ApplyReplica(at int64, data []byte) error {
	s.putMu.Lock()
	defer s.putMu.Unlock()
	if s.putClosed {
		return ErrClosed
	}
	if !s.replica.Load() {
		return ErrNotReplica
	}
	if err := s.log.AppendRaw(commitlog.Offset(at), data); err != nil {
		return fmt.Errorf("store: replicate %d bytes at %d: %w", len(data), at, err)
	}
	return nil
}

// IndexReplica indexes what ApplyReplica wrote: on the caller's goroutine
// when at most replicaInlineMax bytes wait and no other dispatch runs, as a
// put does (dispatchInline), otherwise on the dispatcher's. A slave calls
// it once it has acknowledged the bytes to its master, whose answers do
// not wait for it.
func (s *Store) IndexReplica() { s.dispatchInline(replicaInlineMax) }

// replicaInlineMax is the most IndexReplica dispatches itself: the chunks
// of a slave that keeps up (13 KiB each with 128 durable senders on its
// master, about ten 1 KiB messages), up to some fifty 1 KiB messages; a
// slave catching up leaves its chunks to the dispatcher, which works beside
// its next reads.
// NB: waking the dispatcher's goroutine for every chunk was 12% of a
// slave's CPU in a profile (futex, another thread's wake-up) with 128
// durable senders on its master.
const replicaInlineMax = 64 << 10

// ReplicaOffset returns where the replication stream continues: the end of
// the bytes written, records whole or not.
func (s *Store) ReplicaOffset() int64 { return int64(s.log.Written()) }

// replicaState is what ApplyReplica and puts know of each other.
// Both are written under putMu, read by puts without it.
type replicaState struct {
	gate    atomic.Pointer[gateBox] // nil: no gate needed; noGate: needed, none set
	replica atomic.Bool             // SetReplica: puts refused, ApplyReplica allowed
}
