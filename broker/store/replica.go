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
// wait at its ReplicaGate before they are answered (SYNC_MASTER), and a
// slave writes its master's bytes with ApplyReplica, which the dispatcher
// then indexes as it indexes the master's own puts.

// ReplicaGate holds answered puts until a slave has their bytes.
type ReplicaGate interface {
	// Hold calls done with res once a slave has the bytes below end, or
	// with res turned into PutFlushSlaveTimeout or PutSlaveNotAvailable.
	// It must not block.
	Hold(end int64, res PutResult, done Answerer)
}

// gateBox lets SetReplicaGate swap the gate while puts read it.
type gateBox struct{ g ReplicaGate }

// SetReplicaGate makes every stored put that waits for its answer (not
// NoWait) wait at g too, after its fsync in sync flush mode; nil removes
// the gate.
func (s *Store) SetReplicaGate(g ReplicaGate) {
	if g == nil {
		s.gate.Store(nil)
		return
	}
	s.gate.Store(&gateBox{g})
}

// hold answers a put through the replica gate, if any.
func (s *Store) hold(noWait bool, res PutResult, done Answerer) {
	if box := s.gate.Load(); box != nil && !noWait && res.Status == PutOK {
		box.g.Hold(res.Pos+int64(res.Size), res, done)
		return
	}
	done.PutDone(res)
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
type replicaState struct {
	gate    atomic.Pointer[gateBox]
	replica atomic.Bool // SetReplica: puts refused, ApplyReplica allowed
}
