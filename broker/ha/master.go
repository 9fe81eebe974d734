package ha

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/commitlog"
)

// MasterOptions configure a Master. Zero values select the defaults.
type MasterOptions struct {
	// SyncTimeout bounds a held put (FLUSH_SLAVE_TIMEOUT). Default 5 s.
	SyncTimeout time.Duration
	// MaxLag is how far behind the end a slave may be and still count as
	// available for held puts. Default 256 MiB.
	MaxLag int64
	// ChunkSize bounds one frame's bytes. Default 256 KiB.
	ChunkSize int
	// HeartbeatInterval is how often an idle master sends a heartbeat
	// (and a slave reports). Default 5 s.
	HeartbeatInterval time.Duration
	// ReportTimeout drops a slave that reported nothing for this long.
	// Default 4 heartbeat intervals.
	ReportTimeout time.Duration
	// WriteTimeout bounds one frame's write to a slave. Default 10 s.
	WriteTimeout time.Duration
	// OnSyncWait, if set, observes each held put: how long it waited and
	// how it ended (metrics).
	OnSyncWait func(d time.Duration, status store.PutStatus)
	// Epoch, set in controller mode, is the master's epoch: slaves open
	// with a hello naming their broker id and the epoch they follow (see
	// hello.go), and InSync decides held puts.
	Epoch func() int32
	// OnStale is told when a slave follows a newer epoch than the
	// master's: this master was replaced and must stop acknowledging.
	OnStale func(slaveEpoch int32)
	// InSync, in controller mode, returns the rule held puts are
	// acknowledged by: the SyncStateSet's slaves, and while a change of it
	// is pending, the new set's too (see InSyncRule). It is called for
	// every held put and must not block.
	InSync func() InSyncRule
	// Leased, in controller mode, reports whether the master's lease holds
	// (a controller leader answered a heartbeat it sent within the lease).
	// Once it does not, the controllers may have elected another master:
	// no put is answered SUCCESS (FLUSH_SLAVE_TIMEOUT instead: stored, not
	// confirmed) and OnLeaseLost is told, once. Called for every answer; it
	// must not block.
	Leased      func() bool
	OnLeaseLost func()
	// TLS, when set, is the HA port's TLS (the broker's certificate).
	TLS *tls.Config
	// Authenticate, when set (ACL on), checks a slave's broker account
	// (see auth.go).
	Authenticate func(key string, content []byte, signature string) bool
	// CheckSlave, when set (controller mode), decides whether the peer at
	// remote may be the broker id its hello claims (see hello.go).
	CheckSlave func(id int64, remote net.Addr) error
	Logger     *slog.Logger
}

func (o *MasterOptions) defaults() {
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = 5 * time.Second
	}
	if o.MaxLag <= 0 {
		o.MaxLag = 256 << 20
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = 256 << 10
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 5 * time.Second
	}
	if o.ReportTimeout <= 0 {
		o.ReportTimeout = 4 * o.HeartbeatInterval
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Master serves the master's end of replication: a sender per slave, and
// the gate of SYNC_MASTER puts.
type Master struct {
	log  *commitlog.Log
	opts MasterOptions
	ln   net.Listener

	mu     sync.Mutex
	slaves map[*slaveConn]struct{} // guarded by mu

	acked atomic.Int64 // the highest offset a slave acknowledged
	hist  history

	waitMu  sync.Mutex
	waiters []heldPut // guarded by waitMu
	closed  bool      // guarded by waitMu: Close began; puts are no longer held
	wake    chan struct{}

	chunks, bytes           atomic.Int64 // sent
	syncOK, syncTimeout     atomic.Int64 // held puts answered by a slave's ack, by the timeout
	syncNoSlave, syncClosed atomic.Int64 // answered at once for want of a slave; at Close
	authFailures            atomic.Int64 // slaves refused for their account
	syncUnleased            atomic.Int64 // held puts refused SUCCESS for a lease that ran out
	leaseLost               atomic.Bool  // OnLeaseLost was told

	quit      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// heldPut is a put waiting for a slave's acknowledgement.
type heldPut struct {
	end      int64
	since    time.Time
	deadline time.Time
	res      store.PutResult
	done     store.Answerer
}

// slaveConn is one connected slave.
type slaveConn struct {
	id        atomic.Int64 // broker id from the hello (controller mode); -1 without
	addr      string
	conn      net.Conn
	since     time.Time
	acked     atomic.Int64 // last reported offset; -1 before the first report
	reported  chan struct{}
	closeOnce sync.Once
	closed    chan struct{}
}

func (s *slaveConn) close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.conn.Close()
	})
}

// NewMaster returns a Master over log; Serve starts it.
func NewMaster(log *commitlog.Log, opts MasterOptions) *Master {
	opts.defaults()
	return &Master{log: log, opts: opts, slaves: map[*slaveConn]struct{}{},
		wake: make(chan struct{}, 1), quit: make(chan struct{})}
}

// Serve accepts slaves on ln until Close.
func (m *Master) Serve(ln net.Listener) {
	m.ln = ln
	m.Start()
	m.wg.Add(1)
	go m.acceptLoop()
}

// Start starts the master without a listener of its own: its owner hands
// it slaves' connections with Accept (controller mode, where the HA port
// outlives each term as master).
func (m *Master) Start() {
	m.wg.Add(2)
	go m.gateLoop()
	go m.sampleLoop()
}

// Addr returns the address the master listens on (Serve).
func (m *Master) Addr() net.Addr { return m.ln.Addr() }

// Close stops accepting, drops every slave and answers every held put
// (FLUSH_SLAVE_TIMEOUT unless a slave confirmed it); a put Hold is given
// afterwards is answered at once, the same way.
func (m *Master) Close() {
	m.closeOnce.Do(func() {
		// NB: before quit: every put held before this is in waiters when
		// gateLoop answers them on its way out.
		m.waitMu.Lock()
		m.closed = true
		m.waitMu.Unlock()
		close(m.quit)
		if m.ln != nil {
			m.ln.Close()
		}
		m.mu.Lock()
		for s := range m.slaves {
			s.close()
		}
		m.mu.Unlock()
		m.wg.Wait()
	})
}

// Drain waits, for up to timeout, until no put is held, and reports
// whether none is. A closing master calls it once it refuses puts: the
// slaves confirm what they can (SUCCESS) before Close answers the rest
// FLUSH_SLAVE_TIMEOUT.
func (m *Master) Drain(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for m.held() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond) // NB: once per handover, for what a slave confirms within ms
	}
	return true
}

func (m *Master) held() int {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	return len(m.waiters)
}

func (m *Master) acceptLoop() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.quit:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.opts.Logger.Error("ha: accept failed; no new slaves", "err", err)
			return
		}
		if !m.Accept(c) {
			return
		}
	}
}

// Accept serves a slave's connection; false (and the connection closed)
// once the master is closed.
func (m *Master) Accept(c net.Conn) bool {
	select {
	case <-m.quit:
		c.Close()
		return false
	default:
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if c = m.secure(c); c != nil {
			m.serveSlave(c)
		}
	}()
	return true
}

// serveSlave starts a slave's reader and sender.
func (m *Master) serveSlave(c net.Conn) {
	s := &slaveConn{addr: c.RemoteAddr().String(), conn: c, since: time.Now(),
		reported: make(chan struct{}), closed: make(chan struct{})}
	s.id.Store(-1)
	s.acked.Store(-1)
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.quit:
		c.Close()
		return
	default:
	}
	m.slaves[s] = struct{}{}
	m.wg.Add(2)
	go m.readReports(s)
	go m.sendLoop(s)
}

// readReports reads a slave's offset reports until the connection ends.
func (m *Master) readReports(s *slaveConn) {
	defer m.wg.Done()
	defer s.close()
	var b [8]byte
	if m.opts.Epoch != nil && !m.hello(s) {
		return
	}
	first := true
	for {
		s.conn.SetReadDeadline(time.Now().Add(m.opts.ReportTimeout))
		off, err := readReport(s.conn, b[:])
		if err != nil {
			select {
			case <-s.closed:
			default:
				m.opts.Logger.Warn("ha: slave connection lost", "slave", s.addr, "err", err)
			}
			return
		}
		s.acked.Store(off)
		if first {
			first = false
			close(s.reported)
			m.opts.Logger.Info("ha: slave connected", "slave", s.addr, "offset", off, "master_end", int64(m.log.Next()))
		}
		if prev := m.acked.Load(); off > prev && off <= int64(m.log.Next()) {
			for !m.acked.CompareAndSwap(prev, max(prev, off)) {
				prev = m.acked.Load()
			}
			m.kickGate()
		}
	}
}

// sendLoop streams the log to one slave from the offset it reported.
func (m *Master) sendLoop(s *slaveConn) {
	defer m.wg.Done()
	defer func() {
		s.close()
		m.mu.Lock()
		delete(m.slaves, s)
		m.mu.Unlock()
	}()
	select {
	case <-s.reported:
	case <-s.closed:
		return
	case <-m.quit:
		return
	}
	from := s.acked.Load()
	buf := make([]byte, headerSize+m.opts.ChunkSize)
	hb := time.NewTimer(m.opts.HeartbeatInterval)
	defer hb.Stop()
	warnedAhead := false
	send := func(off int64, n int) error {
		putHeader(buf, off, n)
		s.conn.SetWriteDeadline(time.Now().Add(m.opts.WriteTimeout))
		_, err := s.conn.Write(buf[:headerSize+n])
		hb.Reset(m.opts.HeartbeatInterval)
		return err
	}
	for {
		next, lo := int64(m.log.Next()), int64(m.log.Min())
		if from < lo {
			m.opts.Logger.Info("ha: slave is behind what the log retains; sending from its first segment",
				"slave", s.addr, "slave_offset", from, "master_min", lo)
			from = lo
		}
		switch {
		case from < next:
			n, err := m.log.ReadAt(buf[headerSize:], commitlog.Offset(from))
			if n == 0 {
				if errors.Is(err, commitlog.ErrOffsetRemoved) {
					continue // retention moved Min: start from it
				}
				m.opts.Logger.Error("ha: read the log for a slave", "slave", s.addr, "offset", from, "err", err)
				return
			}
			if err := send(from, n); err != nil {
				m.dropped(s, err)
				return
			}
			from += int64(n)
			m.chunks.Add(1)
			m.bytes.Add(int64(n))
			continue
		case from > next && !warnedAhead:
			warnedAhead = true
			m.opts.Logger.Error("ha: slave's log is longer than the master's: it must not continue (see the README: a slave ahead of its master)",
				"slave", s.addr, "slave_offset", from, "master_end", next)
			// NB: a heartbeat at the master's end tells the slave.
			if err := send(next, 0); err != nil {
				m.dropped(s, err)
				return
			}
		}
		changed := m.log.NextChanged()
		if int64(m.log.Next()) > from {
			continue
		}
		select {
		case <-changed:
		case <-hb.C:
			if err := send(min(from, next), 0); err != nil {
				m.dropped(s, err)
				return
			}
		case <-s.closed:
			return
		case <-m.quit:
			return
		}
	}
}

func (m *Master) dropped(s *slaveConn, err error) {
	select {
	case <-s.closed:
	case <-m.quit:
	default:
		m.opts.Logger.Warn("ha: write to slave failed; dropping it", "slave", s.addr, "err", err)
	}
}

// Hold implements store.ReplicaGate for SYNC_MASTER.
func (m *Master) Hold(end int64, res store.PutResult, done store.Answerer) {
	if m.opts.InSync != nil {
		m.holdInSync(end, res, done)
		return
	}
	if m.acked.Load() >= end {
		done.PutDone(res)
		m.syncOK.Add(1)
		return
	}
	if !m.slaveAvailable() {
		m.syncNoSlave.Add(1)
		res.Status = store.PutSlaveNotAvailable
		res.Remark = "stored on the master, but no slave is connected and caught up to copy it (SYNC_MASTER)"
		m.observe(0, res.Status)
		done.PutDone(res)
		return
	}
	m.hold(end, res, done)
}

// hold queues a put until the slaves it needs have acknowledged end; once
// the master is closed (a store may still hand it a put it loaded the
// gate for before the gate was removed), it answers at once.
func (m *Master) hold(end int64, res store.PutResult, done store.Answerer) {
	now := time.Now()
	m.waitMu.Lock()
	if m.closed {
		m.waitMu.Unlock()
		m.syncClosed.Add(1)
		res.Status, res.Remark = store.PutFlushSlaveTimeout, closedRemark
		m.observe(0, res.Status)
		done.PutDone(res)
		return
	}
	m.waiters = append(m.waiters, heldPut{end: end, since: now, deadline: now.Add(m.opts.SyncTimeout), res: res, done: done})
	m.waitMu.Unlock()
	m.kickGate()
}

// closedRemark answers the puts a closing master held.
const closedRemark = "stored on the master, but it stopped replicating (closing or handing over) before a slave confirmed it"

// slaveAvailable reports whether a slave is connected and within MaxLag.
func (m *Master) slaveAvailable() bool {
	next := int64(m.log.Next())
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.slaves {
		if a := s.acked.Load(); a >= 0 && next-a <= m.opts.MaxLag {
			return true
		}
	}
	return false
}

// Kick makes held puts be looked at again (the SyncStateSet changed).
func (m *Master) Kick() { m.kickGate() }

func (m *Master) kickGate() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// gateTick bounds how late a FLUSH_SLAVE_TIMEOUT answer can be.
const gateTick = 10 * time.Millisecond

// gateLoop answers held puts as slaves acknowledge them or they time out.
func (m *Master) gateLoop() {
	defer m.wg.Done()
	t := time.NewTimer(gateTick)
	defer t.Stop()
	for {
		var tick <-chan time.Time
		if m.answerHeld(false) > 0 {
			t.Reset(gateTick)
			tick = t.C
		}
		select {
		case <-m.wake:
		case <-tick:
		case <-m.quit:
			m.answerHeld(true)
			return
		}
	}
}

// answerHeld answers the held puts a slave has, or whose time is up, and
// returns how many still wait.
func (m *Master) answerHeld(closing bool) int {
	m.waitMu.Lock()
	if len(m.waiters) == 0 {
		m.waitMu.Unlock()
		return 0
	}
	acked, now := m.ackedNeeded(), time.Now()
	leased := m.leased()
	var ready []heldPut
	keep := m.waiters[:0]
	for _, w := range m.waiters {
		switch {
		case w.end <= acked && !leased:
			m.syncUnleased.Add(1)
			w.res.Status, w.res.Remark = store.PutFlushSlaveTimeout, unleasedRemark
		case w.end <= acked:
			m.syncOK.Add(1)
		case closing:
			m.syncClosed.Add(1)
			w.res.Status, w.res.Remark = store.PutFlushSlaveTimeout, closedRemark
		case now.After(w.deadline):
			m.syncTimeout.Add(1)
			w.res.Status = store.PutFlushSlaveTimeout
			w.res.Remark = fmt.Sprintf("stored on the master, but no slave confirmed it within %v (ha.sync_timeout)", m.opts.SyncTimeout)
		default:
			keep = append(keep, w)
			continue
		}
		ready = append(ready, w)
	}
	clear(m.waiters[len(keep):])
	m.waiters = keep
	m.waitMu.Unlock()
	if !leased {
		m.lostLease()
	}
	for _, w := range ready {
		m.observe(now.Sub(w.since), w.res.Status)
		w.done.PutDone(w.res)
	}
	return len(keep)
}

// unleasedRemark answers a put a master whose lease ran out would have
// acknowledged.
const unleasedRemark = "stored on the master, but its controller lease ran out (no controller leader answered it in time): another master may have been elected; not confirmed"

// leased reports whether the master may acknowledge: always without a
// lease (4.x), else while its lease holds.
func (m *Master) leased() bool { return m.opts.Leased == nil || m.opts.Leased() }

// lostLease tells OnLeaseLost, once.
func (m *Master) lostLease() {
	if m.opts.OnLeaseLost != nil && m.leaseLost.CompareAndSwap(false, true) {
		m.opts.OnLeaseLost()
	}
}

func (m *Master) observe(d time.Duration, st store.PutStatus) {
	if m.opts.OnSyncWait != nil {
		m.opts.OnSyncWait(d, st)
	}
}

// SlaveStatus is what the master knows of one connected slave.
type SlaveStatus struct {
	ID         int64     `json:"brokerId"` // from the hello; -1 without (4.x)
	Addr       string    `json:"addr"`
	Since      time.Time `json:"since"`
	Acked      int64     `json:"acked"`      // -1 before its first report
	LagBytes   int64     `json:"lagBytes"`   // master's end - acked
	LagSeconds float64   `json:"lagSeconds"` // age of the oldest byte it lacks
}

// MasterStatus is the master's side of replication.
type MasterStatus struct {
	Listen       string        `json:"listen"`
	End          int64         `json:"end"`
	Acked        int64         `json:"acked"` // the highest offset any slave acknowledged
	Slaves       []SlaveStatus `json:"slaves"`
	ChunksSent   int64         `json:"chunksSent"`
	BytesSent    int64         `json:"bytesSent"`
	SyncOK       int64         `json:"syncOk"`
	SyncTimeouts int64         `json:"syncTimeouts"`
	SyncNoSlave  int64         `json:"syncNoSlave"`
	AuthFailures int64         `json:"authFailures"`
	SyncUnleased int64         `json:"syncUnleased"` // refused SUCCESS: the lease ran out
}

// Status reports the master's side of replication.
func (m *Master) Status() MasterStatus {
	next := int64(m.log.Next())
	st := MasterStatus{End: next, Acked: m.acked.Load(), ChunksSent: m.chunks.Load(), BytesSent: m.bytes.Load(),
		SyncOK: m.syncOK.Load(), SyncTimeouts: m.syncTimeout.Load(), SyncNoSlave: m.syncNoSlave.Load(),
		AuthFailures: m.authFailures.Load(), SyncUnleased: m.syncUnleased.Load()}
	if m.ln != nil {
		st.Listen = m.ln.Addr().String()
	}
	now := time.Now()
	m.mu.Lock()
	for s := range m.slaves {
		a := s.acked.Load()
		ss := SlaveStatus{ID: s.id.Load(), Addr: s.addr, Since: s.since, Acked: a, LagBytes: -1, LagSeconds: -1}
		if a >= 0 {
			ss.LagBytes = max(next-a, 0)
			ss.LagSeconds = m.hist.lag(a, next, now).Seconds()
		}
		st.Slaves = append(st.Slaves, ss)
	}
	m.mu.Unlock()
	sort.Slice(st.Slaves, func(i, j int) bool { return st.Slaves[i].Addr < st.Slaves[j].Addr })
	return st
}

// sampleEvery is how often the log's end is sampled for lag in seconds.
const sampleEvery = 10 * time.Millisecond

// sampleLoop records the log's end over time while slaves are connected.
func (m *Master) sampleLoop() {
	defer m.wg.Done()
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-m.quit:
			return
		case now := <-t.C:
			m.mu.Lock()
			n := len(m.slaves)
			m.mu.Unlock()
			if n > 0 {
				m.hist.add(int64(m.log.Next()), now)
			}
		}
	}
}

// history is a ring of (log end, time) samples: the time the log first
// grew past an offset, within the ring's span.
type history struct {
	mu    sync.Mutex
	ring  [6000]sample // a minute at sampleEvery
	head  int          // next slot
	count int
}

type sample struct {
	end int64
	at  time.Time
}

func (h *history) add(end int64, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count > 0 && h.ring[(h.head+len(h.ring)-1)%len(h.ring)].end == end {
		return // NB: idle: the first sample at this end keeps its time
	}
	h.ring[h.head] = sample{end, at}
	h.head = (h.head + 1) % len(h.ring)
	h.count = min(h.count+1, len(h.ring))
}

// lag returns the age of the oldest byte past acked: since the first
// sample whose end passed acked (the ring's oldest, if all did).
func (h *history) lag(acked, next int64, now time.Time) time.Duration {
	if acked >= next {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	first := (h.head - h.count + len(h.ring)) % len(h.ring)
	at := func(i int) sample { return h.ring[(first+i)%len(h.ring)] }
	i := sort.Search(h.count, func(i int) bool { return at(i).end > acked })
	if i == h.count {
		return 0 // NB: the bytes past acked are younger than the last sample
	}
	return now.Sub(at(i).at)
}
