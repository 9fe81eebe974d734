package controller

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// stream is the Raft transport's TCP layer: raft.TCPStreamLayer's job, but
// over a listener the caller may have bound already (tests bind port 0
// first and then tell every node the ports), and closing every connection
// it accepted or dialed on Close so that no transport goroutine outlives
// the node.
type stream struct {
	ln net.Listener
	// cut, set by tests (partition), makes the node unreachable: every
	// connection closes, dials fail, accepted connections close at once.
	cut atomic.Bool

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // guarded by mu
	closed bool                  // guarded by mu
}

func newStream(ln net.Listener) *stream { return &stream{ln: ln, conns: map[net.Conn]struct{}{}} }

func (s *stream) track(c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	if s.cut.Load() {
		// NB: cut while it was dialed or accepted: partition closed the
		// connections it found, not this one.
		c.Close()
		return nil, errPartitioned
	}
	s.conns[c] = struct{}{}
	return &trackedConn{Conn: c, s: s}, nil
}

func (s *stream) Accept() (net.Conn, error) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return nil, err
		}
		tc, err := s.track(c)
		if errors.Is(err, errPartitioned) {
			continue // NB: track closed it
		}
		return tc, err
	}
}

func (s *stream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.cut.Load() {
		return nil, errPartitioned
	}
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	return s.track(c)
}

func (s *stream) Addr() net.Addr { return s.ln.Addr() }

var errPartitioned = errors.New("controller: partitioned (test)")

// partition cuts the node off from its peers (true) or heals it (false):
// the fault a test injects.
func (s *stream) partition(cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut.Store(cut) // NB: under mu, so that track either sees it or has its connection closed here
	if !cut {
		return
	}
	for c := range s.conns {
		c.Close()
	}
}

// Close closes the listener and every connection. Idempotent.
func (s *stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	clear(s.conns)
	return s.ln.Close()
}

type trackedConn struct {
	net.Conn
	s    *stream
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c.Conn)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}
