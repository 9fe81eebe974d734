package controller

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/conf"
)

// stream is the Raft transport's TCP layer: raft.TCPStreamLayer's job, but
// over a listener the caller may have bound already (tests bind port 0
// first and then tell every node the ports), and closing every connection
// it accepted or dialed on Close so that no transport goroutine outlives
// the node.
type stream struct {
	ln net.Listener
	// tls, when set, makes every connection mutually verified TLS (the
	// same configuration both ways: this node's certificate, its peers'
	// CA); nil: plain TCP.
	tls *tls.Config
	// cut, set by tests (partition), makes the node unreachable: every
	// connection closes, dials fail, accepted connections close at once.
	cut atomic.Bool

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // guarded by mu
	closed bool                  // guarded by mu
}

func newStream(ln net.Listener, tc *tls.Config) *stream {
	return &stream{ln: ln, tls: tc, conns: map[net.Conn]struct{}{}}
}

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
		if err == nil && s.tls != nil {
			// NB: the handshake runs on the transport's goroutine for the
			// connection, at its first read, not here in the accept loop.
			return tls.Server(tc, s.tls), nil
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
	tc, err := s.track(c)
	if err != nil || s.tls == nil {
		return tc, err
	}
	host, _, _ := net.SplitHostPort(string(addr))
	cfg := s.tls.Clone()
	cfg.ServerName = host // NB: the peer's certificate must name its Raft address's host
	sc := tls.Client(tc, cfg)
	sc.SetDeadline(time.Now().Add(timeout))
	if err := sc.Handshake(); err != nil {
		sc.Close()
		return nil, fmt.Errorf("controller: raft TLS with %s: %w", addr, err)
	}
	sc.SetDeadline(time.Time{})
	return sc, nil
}

// RaftTLS returns the Raft transport's TLS configuration of k (nil when
// k is unset): this node's certificate, presented both ways, and its
// peers' CA, required and verified both ways.
func RaftTLS(k conf.RaftTLS) (*tls.Config, error) {
	if !k.Enabled() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(k.Cert, k.Key)
	if err != nil {
		return nil, fmt.Errorf("controller: raft_tls.cert %s / raft_tls.key %s: %w", k.Cert, k.Key, err)
	}
	pem, err := os.ReadFile(k.CA)
	if err != nil {
		return nil, fmt.Errorf("controller: raft_tls.ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("controller: raft_tls.ca: %s holds no PEM certificate", k.CA)
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool,
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}, nil
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
