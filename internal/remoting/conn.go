package remoting

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
)

// endpoint is the owner of a Conn: a Server or a Client.
type endpoint interface {
	// dispatch hands an inbound request to a handler. It runs on the
	// connection's reader and must not block.
	dispatch(c *Conn, req *Command)
	// connClosed runs once per connection, after it closed and its pending
	// calls failed.
	connClosed(c *Conn)
	// background runs Async callbacks.
	background() *group
	// deadlines makes sure the owner's deadline sweeper runs and reports
	// whether it has one (a Client does, a Server does not).
	deadlines() bool
	// badFrame logs (a Server: counts and rate-limits) a connection about
	// to close because its peer sent garbage or stalled in a frame; reason
	// is one of the Reason* constants. It runs on the reader.
	badFrame(c *Conn, reason string, err error)
	// warnPeer logs a warning a peer's request caused: a Server once per
	// remote IP and reason a minute (see Conn.WarnPeer).
	warnPeer(c *Conn, reason, msg string, attrs ...any)
	logger() *slog.Logger
}

// Conn is one remoting connection, on either side: the server's view of a
// client, or a client's connection to a server. Both sides can invoke
// requests on it (the broker calls consumers and transactional producers
// back over the connection they opened, spec §4) and answer requests that
// arrive on it.
//
// All methods are safe for concurrent use. Writes are serialized by one
// per-connection mutex; reads happen on the connection's netpoll reader,
// one frame per OnRequest call.
//
// Files by concern: conn.go has the lifecycle (make, close), conn_write.go
// the write path and the flusher, conn_read.go the read path, and
// conn_call.go the calls waiting for responses.
type Conn struct {
	id       uint64
	addr     string // dialed address (client side), "" on the server side
	nc       netpoll.Connection
	ep       endpoint
	local    net.Addr
	remote   net.Addr
	remoteAP netip.AddrPort // remote as an AddrPort, made once
	maxFrame int
	// frameTimeout (server side) bounds a frame from the first of its
	// bytes the reader sees to its last; 0 leaves netpoll's per-wait read
	// timeout (client side).
	frameTimeout time.Duration
	opaque       *atomic.Int32  // the owner's opaque counter
	sign         func(*Command) // client side: ClientOptions.Sign, set before the conn is used
	due          *atomic.Int64  // client side: the Client's due, lowered to each deadline (set before use)
	// NB: a connection-scoped context (like net/http's per-connection
	// context): handlers and parked requests watch it to learn that the
	// peer went away. It is cancelled in closeWith.
	ctx    context.Context
	cancel context.CancelFunc

	// reqType is the serialize type of requests sent on this connection:
	// the client's configured type, or on the server side the type of the
	// peer's last request (a peer may only speak JSON).
	reqType    atomic.Uint32
	followPeer bool
	frames     atomic.Uint64 // whole frames read (the idle check watches it)
	// ordered is set while the connection's ordered executor runs (set by
	// the reader, cleared by the executor under dispatcher.orderedMu): the
	// reader's lock-free check before it serves an ordered request inline.
	ordered atomic.Bool
	// Touched by the server's idle loop only: the frame count it saw last
	// and since when.
	idleFrames uint64
	idleSince  time.Time
	// backlogged is set once the server closes the connection for its
	// input backlog (closeBacklogged).
	backlogged atomic.Bool

	// fd is nc's socket for writeNoWait (-1: not known, every frame goes
	// through netpoll).
	fd      int
	wmu     sync.Mutex    // serializes Malloc/WriteBinary/Flush on nc
	wclosed bool          // guarded by wmu; set before netpoll frees the buffers
	dirty   bool          // guarded by wmu: frames written but not flushed
	kicked  bool          // guarded by wmu: the flusher has been told to flush
	kick    chan struct{} // wakes the flusher
	// Frames flushLater writers queued while wmu was held (queueLater),
	// written by its next holder; laterN is len(later), read without lmu.
	lmu        sync.Mutex
	later      []*[]byte // framePrefixPool's buffers
	laterBytes int
	laterN     atomic.Int32
	laterSpare []*[]byte // guarded by wmu: the drained queue's slice, for reuse
	// Guarded by wmu: frames written and flushes made (benchmarks report
	// frames per flush), and of those flushes the WriteSoon frames written
	// without waiting (writeNoWait) whole.
	framesOut, flushes, noWaits uint64
	// busy counts exchanges in progress on this connection: calls waiting
	// for a response, and requests being served. A lone exchange flushes
	// its frame at once (lowest latency); with company, frames wait for
	// the flusher and go out together.
	busy atomic.Int32

	// The reader's batch: hooks InlineHandlers registered to run when the
	// reader has no whole frame left (reader-only).
	batchEnd []func()
	held     int // bytes of frames read since the last release (reader-only)
	// inBatchEnd (guarded by wmu) is set while the hooks run and cleared
	// by the flush that follows them: every frame written meanwhile, from
	// any goroutine, is left to that flush.
	inBatchEnd bool

	mu       sync.Mutex
	pending  map[int32]*call // guarded by mu: calls waiting for a response
	closed   bool            // guarded by mu
	closeErr error           // guarded by mu: why the connection closed

	// soonest is at most the earliest deadline of the pending calls (unix
	// nanos; 0: none), written under mu and read without it by expire,
	// which looks at pending only once it has passed. It may be older than
	// the calls still pending (answered calls leave it alone): expire then
	// sets it right.
	// NB: the sweeper looked at every pending call every 10 ms: with 128
	// producers in one process (mqbench's durable row), 7% of its CPU.
	soonest atomic.Int64
}

// lowerTo lowers a (0: none) to d, unless it is at most d already.
func lowerTo(a *atomic.Int64, d int64) {
	for {
		e := a.Load()
		if e != 0 && e <= d || a.CompareAndSwap(e, d) {
			return
		}
	}
}

func newConn(ep endpoint, nc netpoll.Connection, id uint64, opaque *atomic.Int32,
	maxFrame int, reqType SerializeType, followPeer bool, parent context.Context,
) *Conn {
	c := &Conn{
		id:         id,
		nc:         nc,
		ep:         ep,
		local:      nc.LocalAddr(),
		remote:     nc.RemoteAddr(),
		maxFrame:   maxFrame,
		opaque:     opaque,
		followPeer: followPeer,
		pending:    make(map[int32]*call),
		fd:         -1,
	}
	if fc, ok := nc.(netpoll.Conn); ok {
		c.fd = fc.Fd()
	}
	c.ctx, c.cancel = context.WithCancel(parent)
	c.kick = make(chan struct{}, 1)
	go c.flusher()
	c.reqType.Store(uint32(reqType))
	c.remoteAP = addrPort(c.remote)
	c.idleSince = time.Now()
	return c
}

// ID returns a number unique among the connections of its Server or
// Client.
func (c *Conn) ID() uint64 { return c.id }

// WarnPeer logs a warning this connection's peer caused, with reason as
// its kind (a short word, as the Reason* constants). On a server's
// connection it is rate-limited like the remoting layer's own lines: one
// line per remote IP and reason a minute, then one counting those held
// back.
func (c *Conn) WarnPeer(reason, msg string, attrs ...any) { c.ep.warnPeer(c, reason, msg, attrs...) }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// RemoteAddrPort is RemoteAddr as a netip.AddrPort (invalid when it is not
// an IP address and port), without a string per call.
func (c *Conn) RemoteAddrPort() netip.AddrPort { return c.remoteAP }

func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		// NB: an IPv4 peer as an IPv4 address, as its string form parses
		// (net.TCPAddr may hold it IPv4-mapped).
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	if a == nil {
		return netip.AddrPort{}
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// LocalAddr returns this side's address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// Context is cancelled when the connection closes. Handlers receive it.
func (c *Conn) Context() context.Context { return c.ctx }

func (c *Conn) String() string {
	return "conn#" + strconv.FormatUint(c.id, 10) + "(" + addrString(c.remote) + ")"
}

func addrString(a net.Addr) string {
	if a == nil {
		return "?"
	}
	return a.String()
}

// Close closes the connection. Pending calls fail with ErrConnClosed,
// later writes fail, and the owner's disconnect hook runs. Close is
// idempotent.
func (c *Conn) Close() error {
	c.closeWith(fmt.Errorf("%w: closed locally", ErrConnClosed))
	return nil
}

// Closed reports whether the connection is closed.
func (c *Conn) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// closeWith closes the connection once, failing pending calls with cause.
func (c *Conn) closeWith(cause error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.closeErr = cause
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()

	// NB: answers already written (waiting for the flusher or the reader)
	// go out before the connection closes: a shutdown answers what it can.
	c.flushPending()
	c.cancel()
	// NB: netpoll runs our close callback (setting wclosed) before it frees
	// the connection's buffers; it may run it here or, if this
	// connection's OnRequest is running, when OnRequest returns.
	_ = c.nc.Close()
	for _, cl := range pending {
		c.finish(cl, nil, cause)
	}
	c.ep.connClosed(c)
}

// onNetpollClose is the netpoll close callback: the connection is gone,
// whoever closed it. It runs before netpoll frees the buffers.
func (c *Conn) onNetpollClose(netpoll.Connection) error {
	c.wmu.Lock()
	c.wclosed = true
	c.wmu.Unlock()
	c.closeWith(fmt.Errorf("%w: by peer or on error", ErrConnClosed))
	return nil
}

func (c *Conn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeErr != nil {
		return c.closeErr
	}
	return ErrConnClosed
}
