package ha

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/commitlog"
)

// Replica is the store a slave writes into.
type Replica interface {
	// ApplyReplica writes the master's bytes at at (ReplicaOffset).
	ApplyReplica(at int64, data []byte) error
	// IndexReplica indexes what ApplyReplica wrote; the slave calls it
	// once it has reported their end to its master.
	IndexReplica()
	// ReplicaOffset is where the stream continues.
	ReplicaOffset() int64
}

// SlaveOptions configure a Slave. Zero values select the defaults.
type SlaveOptions struct {
	// Master returns the master's HA address ("" while unknown; the
	// broker learns it from its nameserver registrations).
	Master func() string
	// HeartbeatInterval is how often the slave reports its offset when
	// idle. Default 5 s.
	HeartbeatInterval time.Duration
	// ReadTimeout drops a master silent for this long. Default 4
	// heartbeat intervals.
	ReadTimeout time.Duration
	// RetryInterval is the wait before a new connection. Default 1 s.
	RetryInterval time.Duration
	// Hello, set in controller mode, returns the slave's broker id and
	// the master epoch it follows, sent before the first report.
	Hello func() (id int64, epoch int32)
	// TLS, when set, dials the master's HA port with TLS.
	TLS *tls.Config
	// Credentials, when set (ACL on), are the broker account the slave
	// opens its connection with.
	Credentials *Credentials
	Logger      *slog.Logger
}

// Slave copies its master's log into a Replica.
type Slave struct {
	r    Replica
	opts SlaveOptions

	mu       sync.Mutex
	conn     net.Conn // current connection, for Close; guarded by mu
	master   string   // guarded by mu
	since    time.Time
	stopped  string // why replication stopped for good; guarded by mu
	lastErr  string
	lastData time.Time

	connected     atomic.Bool
	chunks, bytes atomic.Int64
	reconnects    atomic.Int64
	masterEnd     atomic.Int64 // the master's end as last seen (heartbeats)
	quit          chan struct{}
	wg            sync.WaitGroup
	closeOnce     sync.Once
}

// errStop marks a condition under which the slave must not go on.
var errStop = errors.New("ha: replication stopped")

// NewSlave returns a slave of r; Start starts it.
func NewSlave(r Replica, opts SlaveOptions) *Slave {
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 5 * time.Second
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 4 * opts.HeartbeatInterval
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Slave{r: r, opts: opts, quit: make(chan struct{})}
}

// Start connects to the master and keeps the replica following it.
func (s *Slave) Start() {
	s.wg.Add(1)
	go s.run()
}

// Close stops replicating.
func (s *Slave) Close() {
	s.closeOnce.Do(func() {
		close(s.quit)
		s.mu.Lock()
		if s.conn != nil {
			s.conn.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

func (s *Slave) run() {
	defer s.wg.Done()
	for {
		addr := s.opts.Master()
		if addr != "" {
			err := s.session(addr)
			s.connected.Store(false)
			select {
			case <-s.quit:
				return
			default:
			}
			s.mu.Lock()
			changed := s.lastErr != err.Error()
			s.lastErr = err.Error()
			if errors.Is(err, errStop) {
				s.stopped = err.Error()
			}
			s.mu.Unlock()
			if errors.Is(err, errStop) {
				s.opts.Logger.Error("ha: slave stopped replicating; see the README (replication) to resolve it", "master", addr, "err", err)
				<-s.quit
				return
			}
			if changed {
				s.opts.Logger.Warn("ha: replication connection ended; reconnecting", "master", addr, "err", err)
			}
			s.reconnects.Add(1)
		}
		select {
		case <-s.quit:
			return
		case <-time.After(s.opts.RetryInterval):
		}
	}
}

// session is one connection to the master: report, then apply frames.
func (s *Slave) session(addr string) error {
	d := net.Dialer{Timeout: 3 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	if c, err = s.secureDial(c); err != nil {
		return err
	}
	s.mu.Lock()
	select {
	case <-s.quit:
		s.mu.Unlock()
		c.Close()
		return net.ErrClosed
	default:
	}
	s.conn, s.master, s.since = c, addr, time.Now()
	s.mu.Unlock()
	defer c.Close()
	if s.opts.Hello != nil {
		id, epoch := s.opts.Hello()
		c.SetDeadline(time.Now().Add(s.opts.ReadTimeout))
		if err := sayHello(c, id, epoch); err != nil {
			return err
		}
		c.SetDeadline(time.Time{})
	}

	var wmu sync.Mutex
	report := func(off int64) error {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(off))
		wmu.Lock()
		defer wmu.Unlock()
		c.SetWriteDeadline(time.Now().Add(s.opts.ReadTimeout))
		_, err := c.Write(b[:])
		return err
	}
	if err := report(s.r.ReplicaOffset()); err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(s.opts.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if report(s.r.ReplicaOffset()) != nil {
					c.Close()
					return
				}
			}
		}
	}()
	s.connected.Store(true)
	var hdr [headerSize]byte
	var buf []byte
	// NB: frames are read through a buffer (one read for a frame, or for
	// the several that arrived together, where there were two each), and
	// the report and the indexing wait until no whole frame is left in it:
	// one report covers the frames that arrived together.
	br := bufio.NewReaderSize(c, readBuffer)
	unreported := false
	defer s.r.IndexReplica() // NB: frames applied, then an error before their report
	for {
		if unreported && !wholeFrameBuffered(br) {
			if err := report(s.r.ReplicaOffset()); err != nil {
				return err
			}
			s.r.IndexReplica()
			unreported = false
		}
		c.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout))
		off, data, err := readFrame(br, hdr[:], &buf)
		if err != nil {
			return err
		}
		own := s.r.ReplicaOffset()
		if len(data) == 0 {
			s.masterEnd.Store(max(s.masterEnd.Load(), off))
			if off < own {
				return fmt.Errorf("%w: this slave's log ends at %d, past its master's end %d: "+
					"the master lost its unflushed tail; going on would diverge", errStop, own, off)
			}
			continue
		}
		if off != own {
			if off < own {
				return fmt.Errorf("ha: chunk at %d, but this slave continues at %d", off, own)
			}
			err := s.r.ApplyReplica(off, data)
			if errors.Is(err, commitlog.ErrRawGap) {
				return fmt.Errorf("%w: the master starts at %d, but this slave's log ends at %d: "+
					"the master no longer retains what this slave lacks", errStop, off, own)
			}
			if err != nil {
				return err
			}
		} else if err := s.r.ApplyReplica(off, data); err != nil {
			return err
		}
		s.chunks.Add(1)
		s.bytes.Add(int64(len(data)))
		end := off + int64(len(data))
		s.masterEnd.Store(max(s.masterEnd.Load(), end))
		s.mu.Lock()
		s.lastData = time.Now()
		s.mu.Unlock()
		unreported = true
	}
}

// readBuffer is the slave's read buffer: a chunk of a slave that keeps up
// fits (13 KiB with 128 durable senders on its master); a larger one
// (ChunkSize, catching up) is read past it, straight into the frame.
const readBuffer = 64 << 10

// SlaveSideStatus is the slave's side of replication.
type SlaveSideStatus struct {
	Master        string    `json:"master"`
	LocalAddr     string    `json:"localAddr"` // of the connection: the master knows the slave by it
	Connected     bool      `json:"connected"`
	Since         time.Time `json:"since"`
	Offset        int64     `json:"offset"`    // where the stream continues
	MasterEnd     int64     `json:"masterEnd"` // the master's end as last seen
	ChunksApplied int64     `json:"chunksApplied"`
	BytesApplied  int64     `json:"bytesApplied"`
	Reconnects    int64     `json:"reconnects"`
	LastError     string    `json:"lastError,omitempty"`
	// Stopped says why replication stopped for good ("" while it runs).
	Stopped string `json:"stopped,omitempty"`
}

// Status reports the slave's side of replication.
func (s *Slave) Status() SlaveSideStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	local := ""
	if s.conn != nil && s.connected.Load() {
		local = s.conn.LocalAddr().String()
	}
	return SlaveSideStatus{Master: s.master, LocalAddr: local, Connected: s.connected.Load(), Since: s.since,
		Offset: s.r.ReplicaOffset(), MasterEnd: s.masterEnd.Load(), ChunksApplied: s.chunks.Load(),
		BytesApplied: s.bytes.Load(), Reconnects: s.reconnects.Load(), LastError: s.lastErr, Stopped: s.stopped}
}
