package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/sluicemq/sluice/internal/workpool"
)

// ServerOptions configures a Server. Zero fields take the defaults of
// DefaultServerOptions; negative durations disable the timeout.
type ServerOptions struct {
	// MaxFrameSize bounds a whole frame, the 4-byte length included
	// (default 16 MiB, as Java). A larger frame closes the connection
	// before any of it is buffered.
	MaxFrameSize int
	// FrameTimeout is how long a frame may take from the first of its
	// bytes the reader sees to its last (default 30 s); a connection that
	// does not complete one in time is closed. It bounds what a stalled or
	// hostile peer can hold (the reader's goroutine and the buffered
	// bytes); it is not an idle timeout.
	FrameTimeout time.Duration
	// WriteTimeout bounds one frame write to a peer that does not read
	// (default 30 s). A write that times out closes the connection.
	WriteTimeout time.Duration
	// IdleTimeout closes connections that sent no frame for this long
	// (default 120 s, Java's channel idle time; clients heartbeat every
	// 30 s).
	IdleTimeout time.Duration
	// MaxConnsPerAddr bounds the open connections from one remote IP
	// address (default 1000; negative: no bound). A connection over it is
	// closed at accept, before anything is read.
	MaxConnsPerAddr int
	// MaxInputBacklog bounds the bytes a peer may have sent that its
	// connection's reader has not read yet (default four frames of
	// MaxFrameSize, 64 MiB). netpoll reads a socket into memory whatever
	// the reader does, so a peer that goes on sending while its reader is
	// held up (by a write to that peer, which does not read, for one)
	// would grow it without end; over the bound, checked every 100 ms, the
	// connection is closed.
	MaxInputBacklog int
	// MaxInflight bounds the handler goroutines running at once, over all
	// connections (default 4096). A request over the bound is answered at
	// once with SYSTEM_BUSY (2) and a remark; the client retries. Parked
	// requests whose handler returned do not count.
	MaxInflight int
	// Logger receives connection-level events (bad frames with the remote
	// address, handler panics, overload). Default slog.Default(). What a
	// peer can trigger (bad frames, frame timeouts, refused and idle
	// connections) is logged once per remote IP and reason a minute, with
	// the count of the lines held back (see ServerStats for the totals).
	Logger *slog.Logger
	// OnConnect runs when a connection is established, before its first
	// request is read. It must not block.
	OnConnect func(*Conn)
	// Authorize, when set, decides every request before it is dispatched
	// (the inline try included), on the connection's reader: ok false
	// answers the request with code and remark (nothing for a oneway
	// request) and its handler never runs. It must not block; the broker
	// and the nameserver check ACL signatures and permissions here.
	Authorize func(c *Conn, req *Command) (code int16, remark string, ok bool)
	// TLS, when set, serves TLS connections (permissive: plaintext too, on
	// the same port) on the path tls.go describes. Nil: plaintext only.
	TLS *ServerTLS
	// OnDisconnect runs once per connection after it closed (by either
	// side, on error, or at Shutdown) and its pending calls failed, on a
	// goroutine of its own. The broker drops the connection's producer and
	// consumer registrations here; the nameserver drops brokers.
	OnDisconnect func(*Conn)
}

// DefaultServerOptions returns the defaults.
func DefaultServerOptions() ServerOptions {
	return ServerOptions{
		MaxFrameSize:    DefaultMaxFrameSize,
		FrameTimeout:    30 * time.Second,
		WriteTimeout:    30 * time.Second,
		IdleTimeout:     120 * time.Second,
		MaxConnsPerAddr: 1000,
		MaxInflight:     4096,
	}
}

func (o *ServerOptions) fill() {
	d := DefaultServerOptions()
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = d.MaxFrameSize
	}
	if o.FrameTimeout == 0 {
		o.FrameTimeout = d.FrameTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = d.WriteTimeout
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = d.IdleTimeout
	}
	if o.MaxConnsPerAddr == 0 {
		o.MaxConnsPerAddr = d.MaxConnsPerAddr
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = d.MaxInflight
	}
	if o.MaxInputBacklog <= 0 {
		o.MaxInputBacklog = 4 * o.MaxFrameSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Server accepts remoting connections on a netpoll event loop and runs a
// Handler per request code.
//
// Lifecycle: NewServer, Handle (before Start), Start, …, Shutdown. See the
// package documentation for the concurrency contract.
type Server struct {
	addr   string
	opts   ServerOptions
	d      dispatcher
	bg     group // OnDisconnect hooks, Async callbacks
	opaque atomic.Int32
	ids    atomic.Uint64

	baseCtx    context.Context
	cancelBase context.CancelFunc

	mu      sync.Mutex
	state   serverState           // guarded by mu
	conns   map[uint64]*Conn      // guarded by mu
	perIP   map[netip.Addr]int32  // guarded by mu: open connections by remote IP
	ln      netpoll.Listener      // set by Start (plaintext only)
	tln     net.Listener          // set by Start (with TLS)
	pending map[net.Conn]struct{} // guarded by mu: TLS-path connections not yet handed to netpoll
	evl     netpoll.EventLoop     // set by Start
	done    chan struct{}         // closed when Shutdown finishes
	quit    chan struct{}         // closed by Shutdown: stops houseLoop
	served  chan struct{}         // closed when serveLoop returns
	houseWG sync.WaitGroup        // houseLoop

	peers         *peerLog
	rejected      atomic.Uint64
	frameTimeouts atomic.Uint64
	backlogClosed atomic.Uint64
	// plaintextRefused counts plaintext connections an enforcing TLS
	// server closed.
	plaintextRefused  atomic.Uint64
	handshakeFailures atomic.Uint64
	badFrames         [len(BadFrameReasons)]atomic.Uint64
}

type serverState int

const (
	serverNew serverState = iota
	serverRunning
	serverStopped
)

type connKey struct{}

// NewServer returns a server that will listen on addr ("127.0.0.1:0"
// picks a free port).
func NewServer(addr string, opts ServerOptions) *Server {
	opts.fill()
	s := &Server{
		addr:   addr,
		opts:   opts,
		d:      newDispatcher(opts.Logger, opts.MaxInflight),
		conns:  make(map[uint64]*Conn),
		perIP:  make(map[netip.Addr]int32),
		peers:  newPeerLog(opts.Logger, peerLogEvery),
		done:   make(chan struct{}),
		quit:   make(chan struct{}),
		served: make(chan struct{}),
	}
	s.d.peers = s.peers
	s.d.authorize = opts.Authorize
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	return s
}

// Handle registers h for requests with the given code, replacing any
// earlier registration.
// REQUIRES: called before Start (it panics after).
func (s *Server) Handle(code int16, h Handler) {
	s.beforeStart("Handle", func() { s.d.handlers[code] = h })
}

// HandleInline registers, for code, an InlineHandler tried on the
// connection's reader before the code's Handler runs on a goroutine.
// REQUIRES: called before Start (it panics after).
func (s *Server) HandleInline(code int16, h InlineHandler) {
	s.beforeStart("HandleInline", func() { s.d.inline[code] = h })
}

// HandleDefault registers h for codes without a handler of their own.
// Without it they are answered with REQUEST_CODE_NOT_SUPPORTED (3).
// REQUIRES: called before Start (it panics after).
func (s *Server) HandleDefault(h Handler) {
	s.beforeStart("HandleDefault", func() { s.d.fallback = h })
}

// beforeStart runs set under mu; called after Start it panics, naming
// method: the handler tables are read without a lock once serving.
func (s *Server) beforeStart(method string, set func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != serverNew {
		panic("remoting: Server." + method + " called after Start")
	}
	set()
}

// Start binds the listener and starts serving in the background. It
// returns once the listener is bound; Addr then reports the address.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != serverNew {
		return fmt.Errorf("remoting: server already started")
	}
	start := s.startNetpoll
	if s.opts.TLS != nil {
		start = s.startTLS
	}
	if err := start(); err != nil {
		return err
	}
	workpool.Acquire() // NB: released at the end of Shutdown
	s.houseWG.Add(1)
	go s.houseLoop()
	return nil
}

// startNetpoll listens on a netpoll listener and starts serveLoop.
// REQUIRES: s.mu held, state serverNew.
func (s *Server) startNetpoll() error {
	ln, err := listen(s.addr)
	if err != nil {
		return fmt.Errorf("remoting: listen on %s: %w", s.addr, err)
	}
	opts := []netpoll.Option{
		netpoll.WithOnPrepare(s.onPrepare),
		netpoll.WithOnConnect(s.onConnect),
	}
	if s.opts.WriteTimeout > 0 {
		opts = append(opts, netpoll.WithWriteTimeout(s.opts.WriteTimeout))
	}
	evl, err := netpoll.NewEventLoop(s.onRequest, opts...)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("remoting: event loop: %w", err)
	}
	s.ln, s.evl, s.state = ln, evl, serverRunning
	go s.serveLoop()
	return nil
}

// Serve starts the server and blocks until Shutdown has finished.
func (s *Server) Serve() error {
	if err := s.Start(); err != nil {
		return err
	}
	<-s.done
	return nil
}

// Addr returns the listener's address (nil before Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.tln != nil:
		return s.tln.Addr()
	case s.ln == nil:
		return nil
	}
	return s.ln.Addr()
}

// Conns returns the open connections (a snapshot).
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	return out
}

func (s *Server) serveLoop() {
	defer close(s.served)
	if err := s.evl.Serve(s.ln); err != nil && !errors.Is(err, net.ErrClosed) {
		s.opts.Logger.Debug("remoting: event loop stopped", "addr", s.addr, "err", err)
	}
}

// houseLoop closes connections that sent nothing for IdleTimeout and ends
// the peer log's windows.
func (s *Server) houseLoop() {
	defer s.houseWG.Done()
	period := 10 * time.Second
	if s.opts.IdleTimeout > 0 {
		period = max(min(s.opts.IdleTimeout/2, period), 10*time.Millisecond)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	backlog := time.NewTicker(backlogCheck)
	defer backlog.Stop()
	for {
		select {
		case <-s.quit:
			s.peers.flush(time.Now().Add(peerLogEvery)) // NB: every window
			return
		case now := <-t.C:
			if s.opts.IdleTimeout > 0 {
				s.closeIdle(now)
			}
			s.peers.flush(now)
		case now := <-backlog.C:
			s.closeBacklogged(now)
		}
	}
}

// backlogCheck is how often houseLoop looks at the connections' input
// backlog (MaxInputBacklog).
const backlogCheck = 100 * time.Millisecond

// closeBacklogged closes the connections whose peer has sent more than
// MaxInputBacklog bytes their reader has not read.
func (s *Server) closeBacklogged(now time.Time) {
	for _, c := range s.Conns() {
		n := c.nc.Reader().Len()
		if n <= s.opts.MaxInputBacklog || !c.backlogged.CompareAndSwap(false, true) {
			continue
		}
		s.backlogClosed.Add(1)
		s.peers.event(now, slog.LevelWarn, c.remoteAP.Addr(), ReasonInputBacklog,
			"remoting: closing a connection whose peer sends faster than it is read",
			"remote", addrString(c.remote), "conn", c.id, "unread_bytes", n, "limit", s.opts.MaxInputBacklog)
		go c.abort(fmt.Errorf("%w: the peer sent %d bytes not read yet, over %d", ErrConnClosed, n, s.opts.MaxInputBacklog))
	}
}

func (s *Server) closeIdle(now time.Time) {
	for _, c := range s.Conns() {
		// NB: idle since the sweep that saw its last frame: up to a
		// period more than the last frame's time.
		if n := c.frames.Load(); n != c.idleFrames {
			c.idleFrames, c.idleSince = n, now
			continue
		}
		if idle := now.Sub(c.idleSince); idle > s.opts.IdleTimeout {
			s.peers.event(now, slog.LevelInfo, c.remoteAP.Addr(), ReasonIdle, "remoting: closing idle connection",
				"remote", addrString(c.remote), "conn", c.id, "idle", idle.Round(time.Millisecond))
			c.closeWith(fmt.Errorf("%w: idle for %v", ErrConnClosed, idle.Round(time.Millisecond)))
		}
	}
}

// onPrepare registers a new connection (netpoll calls it on accept).
func (s *Server) onPrepare(nc netpoll.Connection) context.Context {
	return s.prepare(nc, nc.RemoteAddr())
}

// prepare registers a new connection from remote.
func (s *Server) prepare(nc netpoll.Connection, remote net.Addr) context.Context {
	s.mu.Lock()
	if s.state != serverRunning {
		s.mu.Unlock()
		_ = nc.Close()
		return context.Background()
	}
	ip := addrPort(remote).Addr()
	if n := s.perIP[ip]; s.opts.MaxConnsPerAddr > 0 && int(n) >= s.opts.MaxConnsPerAddr {
		s.mu.Unlock()
		s.rejected.Add(1)
		s.peers.event(time.Now(), slog.LevelWarn, ip, ReasonTooManyConns,
			"remoting: too many connections from one address; closing the new one",
			"remote", addrString(remote), "open", n, "limit", s.opts.MaxConnsPerAddr)
		// NB: closed by onConnect: closed here, before netpoll registers
		// it, its close logs a failed detach to stderr, once per connection.
		return context.Background()
	}
	s.perIP[ip]++
	c := newConn(s, nc, s.ids.Add(1), &s.opaque, s.opts.MaxFrameSize, SerializeJSON, true, s.baseCtx)
	c.remote, c.remoteAP = remote, addrPort(remote)
	c.frameTimeout = max(s.opts.FrameTimeout, 0)
	s.conns[c.id] = c
	s.mu.Unlock()
	_ = nc.AddCloseCallback(c.onNetpollClose)
	return context.WithValue(c.ctx, connKey{}, c)
}

func connFrom(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}

func (s *Server) onConnect(ctx context.Context, nc netpoll.Connection) context.Context {
	c := connFrom(ctx)
	switch {
	case c == nil: // refused by onPrepare
		_ = nc.Close()
	case s.opts.OnConnect != nil:
		s.opts.OnConnect(c)
	}
	return ctx
}

func (s *Server) onRequest(ctx context.Context, nc netpoll.Connection) error {
	c := connFrom(ctx)
	if c == nil {
		return nc.Close()
	}
	return c.onRequest(ctx, nc)
}

// endpoint implementation.

func (s *Server) dispatch(c *Conn, req *Command) { s.d.dispatch(c, req) }
func (s *Server) background() *group             { return &s.bg }
func (s *Server) deadlines() bool                { return false }
func (s *Server) logger() *slog.Logger           { return s.opts.Logger }

func (s *Server) badFrame(c *Conn, reason string, err error) {
	msg := "remoting: bad frame; closing connection"
	if reason == ReasonFrameTimeout {
		s.frameTimeouts.Add(1)
		msg = "remoting: frame not completed within the frame timeout; closing connection"
	} else if i := slices.Index(BadFrameReasons[:], reason); i >= 0 {
		s.badFrames[i].Add(1)
	}
	s.peers.event(time.Now(), slog.LevelWarn, c.remoteAP.Addr(), reason, msg,
		"remote", addrString(c.remote), "conn", c.id, "err", err)
}

func (s *Server) warnPeer(c *Conn, reason, msg string, attrs ...any) {
	s.d.warnPeer(c, reason, msg, attrs...)
}

func (s *Server) connClosed(c *Conn) {
	ip := c.remoteAP.Addr()
	s.mu.Lock()
	delete(s.conns, c.id)
	if s.perIP[ip]--; s.perIP[ip] <= 0 {
		delete(s.perIP, ip)
	}
	s.mu.Unlock()
	if h := s.opts.OnDisconnect; h != nil {
		if !s.bg.goFunc(func() { h(c) }) {
			h(c)
		}
	}
}

// ServerStats counts what the server's peers did. Counters are totals since
// NewServer.
type ServerStats struct {
	Conns         int               // open connections
	Rejected      uint64            // connections closed at accept: over MaxConnsPerAddr
	FrameTimeouts uint64            // connections closed: a frame not completed within FrameTimeout
	BacklogClosed uint64            // connections closed: more unread input than MaxInputBacklog
	BadFrames     map[string]uint64 // connections closed for a bad frame, by reason (BadFrameReasons)
	// PlaintextRefused counts plaintext connections an enforcing TLS
	// server closed; TLSHandshakeFailures failed TLS handshakes.
	PlaintextRefused     uint64
	TLSHandshakeFailures uint64
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	st := ServerStats{Conns: len(s.conns)}
	s.mu.Unlock()
	st.Rejected = s.rejected.Load()
	st.FrameTimeouts = s.frameTimeouts.Load()
	st.BacklogClosed = s.backlogClosed.Load()
	st.PlaintextRefused = s.plaintextRefused.Load()
	st.TLSHandshakeFailures = s.handshakeFailures.Load()
	st.BadFrames = make(map[string]uint64, len(BadFrameReasons))
	for i, r := range BadFrameReasons {
		st.BadFrames[r] = s.badFrames[i].Load()
	}
	return st
}

// Shutdown stops the server:
//
//  1. new connections are closed on accept, and new requests are answered
//     SYSTEM_BUSY (2) so that clients retry elsewhere;
//  2. it waits for running handlers to return (their replies go out);
//  3. it closes every connection: parked requests see their connection's
//     context cancelled and their late replies fail with ErrConnClosed;
//     server→client calls fail with ErrConnClosed; OnDisconnect runs for
//     each;
//  4. it stops the event loop and waits for its own goroutines, hooks and
//     callbacks.
//
// If ctx ends first, Shutdown still closes everything and returns ctx's
// error; handlers that are still running are then left to finish on their
// own. Shutdown before Start just marks the server stopped. Calls after the
// first return nil at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	prev := s.state
	s.state = serverStopped
	s.mu.Unlock()
	if prev != serverRunning {
		if prev == serverNew {
			close(s.done)
		}
		return nil
	}
	defer close(s.done)
	defer workpool.Release()
	s.d.closing.Store(true)
	close(s.quit)
	s.houseWG.Wait()

	s.d.running.close() // requests that slip past closing are answered busy
	err := s.d.running.wait(ctx)

	for _, c := range s.Conns() {
		c.closeWith(fmt.Errorf("%w: server shutting down", ErrConnClosed))
	}
	s.cancelBase()
	if e := s.stopEventLoop(ctx); err == nil {
		err = e
	}
	s.bg.close() // later hooks and callbacks run inline
	if e := s.bg.wait(ctx); err == nil {
		err = e
	}
	return err
}

// stopEventLoop shuts the netpoll event loop down and waits for Serve to
// return.
//
// NB: netpoll's EventLoop.Shutdown is a no-op if Serve has not installed
// its server yet, which would leave Serve running forever; so it is
// retried until serveLoop has exited.
func (s *Server) stopEventLoop(ctx context.Context) error {
	if s.tln != nil {
		_ = s.tln.Close()
		s.closePending()
		select {
		case <-s.served:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		_ = s.evl.Shutdown(ctx)
		select {
		case <-s.served:
			return nil
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
