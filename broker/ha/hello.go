package ha

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/sluicemq/sluice/broker/store"
)

// Controller mode adds a hello to the 4.x stream, before the slave's
// first offset report, so that the master knows which broker each
// connection is (the SyncStateSet names broker ids) and neither side
// follows a stale epoch:
//
//	slave → master: "SLHA" | broker id (8) | epoch (4), the epoch the
//	                 slave learned from the controller
//	master → slave: "SLHA" | epoch (4) | status (4): 0 go on, 1 refused
//	                 (epochs), 2 refused (the broker id is not the peer's)
//
// A master whose epoch is older than the slave's was replaced: it refuses
// and is told (OnStale) so that it stops acknowledging. A slave that meets
// another epoch than the one it follows drops the connection and asks the
// controller again. With CheckSlave set, a peer is taken only as the
// broker id the controllers know at its address: a peer claiming another
// member's id would otherwise have its offset reports count toward
// acknowledging sends.

const (
	helloMagic     = "SLHA"
	helloSize      = 16
	helloReplySize = 12
)

// helloBadID is the hello status of a peer refused for its broker id.
const helloBadID = 2

// errStaleEpoch marks a hello refused for its epoch.
var errStaleEpoch = errors.New("ha: epochs differ")

// hello reads a slave's hello and answers it; false drops the connection.
func (m *Master) hello(s *slaveConn) bool {
	var b [helloSize]byte
	s.conn.SetReadDeadline(time.Now().Add(m.opts.ReportTimeout))
	if _, err := io.ReadFull(s.conn, b[:]); err != nil {
		m.opts.Logger.Warn("ha: slave sent no hello", "slave", s.addr, "err", err)
		return false
	}
	if string(b[:4]) != helloMagic {
		m.opts.Logger.Warn("ha: a slave without the controller-mode hello (a 4.x slave?); dropped", "slave", s.addr)
		return false
	}
	id := int64(binary.BigEndian.Uint64(b[4:12]))
	slaveEpoch := int32(binary.BigEndian.Uint32(b[12:16]))
	own := m.opts.Epoch()
	status := uint32(0)
	if m.opts.CheckSlave != nil {
		if err := m.opts.CheckSlave(id, s.conn.RemoteAddr()); err != nil {
			status = helloBadID
			m.opts.Logger.Warn("ha: slave refused: its broker id is not its own", "slave", s.addr, "slave_id", id, "err", err)
		}
	}
	if status == 0 {
		s.id.Store(id) // NB: only once checked: the gate counts this connection's reports for id from now on
	}
	if status == 0 && slaveEpoch > own {
		status = 1
		m.opts.Logger.Error("ha: a slave follows a newer epoch: this master was replaced", "slave", s.addr,
			"slave_id", id, "slave_epoch", slaveEpoch, "epoch", own)
		if m.opts.OnStale != nil {
			m.opts.OnStale(slaveEpoch)
		}
	}
	var r [helloReplySize]byte
	copy(r[:4], helloMagic)
	binary.BigEndian.PutUint32(r[4:8], uint32(own))
	binary.BigEndian.PutUint32(r[8:12], status)
	s.conn.SetWriteDeadline(time.Now().Add(m.opts.WriteTimeout))
	if _, err := s.conn.Write(r[:]); err != nil || status != 0 {
		return false
	}
	return true
}

// sayHello opens a controller-mode session from the slave's side.
func sayHello(rw io.ReadWriter, id int64, epoch int32) error {
	var b [helloSize]byte
	copy(b[:4], helloMagic)
	binary.BigEndian.PutUint64(b[4:12], uint64(id))
	binary.BigEndian.PutUint32(b[12:16], uint32(epoch))
	if _, err := rw.Write(b[:]); err != nil {
		return err
	}
	var r [helloReplySize]byte
	if _, err := io.ReadFull(rw, r[:]); err != nil {
		return err
	}
	if string(r[:4]) != helloMagic {
		return errors.New("ha: the master answered the hello with something else (a 4.x master?)")
	}
	got := int32(binary.BigEndian.Uint32(r[4:8]))
	if binary.BigEndian.Uint32(r[8:12]) == helloBadID {
		return fmt.Errorf("ha: the master refused broker id %d: the controllers know another address for it "+
			"(see the master's log)", id)
	}
	if binary.BigEndian.Uint32(r[8:12]) != 0 || got != epoch {
		return fmt.Errorf("%w: this slave follows epoch %d, the master is at %d", errStaleEpoch, epoch, got)
	}
	return nil
}

// AckedBy returns the highest offset the slave with broker id acknowledged
// over its current connections (-1: none).
func (m *Master) AckedBy(id int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	best := int64(-1)
	for s := range m.slaves {
		if s.id.Load() == id {
			best = max(best, s.acked.Load())
		}
	}
	return best
}

// InSyncRule is what a controller-mode master acknowledges held puts by
// (MasterOptions.InSync).
type InSyncRule struct {
	// Slaves are the broker ids of the SyncStateSet, the master's left out.
	Slaves []int64
	// Changing reports that the master asked the controllers to change the
	// set and has not learnt the outcome; Pending are then the slaves of
	// every set it asked for. A put is acknowledged only once both Slaves
	// and Pending have it as the rule requires, as RocketMQ 5 acknowledges
	// against the union of the old and the new set: whichever the
	// controllers hold, its replicas have every acknowledged put.
	Changing bool
	Pending  []int64
	// AllAck (ha.all_ack_in_sync_state_set): every slave of a set must
	// have a put; otherwise MinReplicas-1 of them (the master is one).
	AllAck bool
	// MinReplicas is the replicas (the master included) each set must
	// hold at least; below it puts are answered IN_SYNC_REPLICAS_NOT_ENOUGH.
	MinReplicas int
	// Unknown: the master has not learnt its set yet; puts are answered
	// IN_SYNC_REPLICAS_NOT_ENOUGH (stored, not confirmed) until it has.
	Unknown bool
}

// need is how many of a set's n slaves must have a put.
func (r *InSyncRule) need(n int) int {
	if r.AllAck {
		return n
	}
	return min(n, max(r.MinReplicas-1, 0))
}

// ackedNeeded is the offset below which every held put is acknowledged as
// its mode requires: by any slave (4.x), or by as many slaves of the
// SyncStateSet, and of the set a pending change asks for, as InSync says
// (controller mode).
func (m *Master) ackedNeeded() int64 {
	if m.opts.InSync == nil {
		return m.acked.Load()
	}
	r := m.opts.InSync()
	if r.Unknown {
		return -1
	}
	acked := m.ackedBy(r.Slaves, r.need(len(r.Slaves)))
	if r.Changing {
		acked = min(acked, m.ackedBy(r.Pending, r.need(len(r.Pending))))
	}
	return acked
}

// ackedBy is the offset need of the slaves ids have acknowledged.
func (m *Master) ackedBy(ids []int64, need int) int64 {
	if need <= 0 {
		return math.MaxInt64
	}
	if need > len(ids) {
		return -1
	}
	// NB: per held send: one pass under mu, no allocation for a set of
	// up to 8 slaves.
	var buf [8]int64
	acks := buf[:0]
	m.mu.Lock()
	for _, id := range ids {
		best := int64(-1)
		for s := range m.slaves {
			if s.id.Load() == id {
				best = max(best, s.acked.Load())
			}
		}
		acks = append(acks, best)
	}
	m.mu.Unlock()
	slices.Sort(acks)
	return acks[len(acks)-need] // NB: the need-th highest
}

// holdInSync is Hold in controller mode: a put waits for the slaves of the
// SyncStateSet (and of a pending change's); with fewer replicas in either
// than the minimum, it is answered at once; a master whose lease ran out
// answers no put SUCCESS.
func (m *Master) holdInSync(end int64, res store.PutResult, done store.Answerer) {
	r := m.opts.InSync()
	if r.Unknown {
		m.syncNoSlave.Add(1)
		res.Status = store.PutInSyncReplicasNotEnough
		res.Remark = "stored on the master, but it has not learnt its SyncStateSet from the controllers yet"
		m.observe(0, res.Status)
		done.PutDone(res)
		return
	}
	if n := 1 + len(r.Slaves); n < r.MinReplicas || (r.Changing && 1+len(r.Pending) < r.MinReplicas) {
		if r.Changing {
			n = min(n, 1+len(r.Pending))
		}
		m.syncNoSlave.Add(1)
		res.Status = store.PutInSyncReplicasNotEnough
		res.Remark = fmt.Sprintf("stored on the master, but the SyncStateSet has %d replicas, fewer than ha.min_in_sync_replicas (%d)",
			n, r.MinReplicas)
		m.observe(0, res.Status)
		done.PutDone(res)
		return
	}
	if m.ackedNeeded() >= end {
		if !m.leased() {
			m.syncUnleased.Add(1)
			res.Status, res.Remark = store.PutFlushSlaveTimeout, unleasedRemark
			m.observe(0, res.Status)
			done.PutDone(res)
			m.lostLease()
			return
		}
		m.syncOK.Add(1)
		done.PutDone(res)
		return
	}
	m.hold(end, res, done)
}
