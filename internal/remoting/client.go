package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/sluicemq/sluice/internal/workpool"
)

// ClientOptions configures a Client. Zero durations and sizes take the
// defaults of DefaultClientOptions; negative durations disable the
// timeout.
//
// NB: the zero SerializeType is JSON (wire value 0). Start from
// DefaultClientOptions to get Sluice's native msgpack headers.
type ClientOptions struct {
	// SerializeType of the requests the client sends: SerializeMsgpack
	// (default in DefaultClientOptions) to a Sluice server, SerializeJSON
	// to a Java broker or nameserver.
	SerializeType SerializeType
	// DialTimeout bounds connecting (default 3 s); a shorter context
	// deadline shortens it.
	DialTimeout time.Duration
	// ReadTimeout bounds the rest of a frame once its first bytes arrived
	// (default 30 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds one frame write (default 30 s).
	WriteTimeout time.Duration
	// MaxFrameSize bounds frames in both directions (default 16 MiB).
	MaxFrameSize int
	// MaxInflight bounds OnRequest handlers running at once (default 256);
	// over it the client answers SYSTEM_BUSY.
	MaxInflight int
	// Logger receives connection-level events. Default slog.Default().
	Logger *slog.Logger
	// OnRequest serves requests the server sends to the client (spec §4:
	// NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, …). Nil
	// answers them with REQUEST_CODE_NOT_SUPPORTED.
	OnRequest Handler
	// TLS, when set, makes every connection TLS with this configuration
	// (served over a socketpair to netpoll; see tls.go).
	TLS *tls.Config
	// Sign, when set, is applied to every request the client sends, after
	// its opaque and serialize type are set and before it is encoded
	// (ACL credentials: sig.Signer). It may replace the request's custom
	// header.
	Sign func(*Command)
}

// DefaultClientOptions returns the defaults (msgpack headers).
func DefaultClientOptions() ClientOptions {
	return ClientOptions{
		SerializeType: SerializeMsgpack,
		DialTimeout:   3 * time.Second,
		ReadTimeout:   30 * time.Second,
		WriteTimeout:  30 * time.Second,
		MaxFrameSize:  DefaultMaxFrameSize,
		MaxInflight:   256,
	}
}

func (o *ClientOptions) fill() {
	d := DefaultClientOptions()
	if o.DialTimeout == 0 {
		o.DialTimeout = d.DialTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = d.ReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = d.WriteTimeout
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = d.MaxFrameSize
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = d.MaxInflight
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Client sends requests to remoting servers. It keeps one connection per
// address, multiplexes concurrent calls on it by opaque, and dials again
// on the next call after a connection failed. Safe for concurrent use.
type Client struct {
	opts   ClientOptions
	d      dispatcher
	bg     group // Async callbacks
	opaque atomic.Int32
	ids    atomic.Uint64

	mu     sync.Mutex
	conns  map[string]*dialEntry // guarded by mu: by address
	closed bool                  // guarded by mu
	pooled bool                  // guarded by mu: a user of workpool since the first dial

	sweepOnce sync.Once // registers with the sweeper at the first call with a deadline
	// due is at most the soonest of its connections' soonest deadlines
	// (unix nanos; 0: none): the sweeper skips the client until it passes.
	due atomic.Int64
}

// dialEntry is one address's connection, or the dial in progress.
type dialEntry struct {
	ready chan struct{} // closed when the dial finished
	conn  *Conn         // set before ready is closed, on success
	err   error         // set before ready is closed, on failure
}

// NewClient returns a client; it dials lazily.
func NewClient(opts ClientOptions) *Client {
	opts.fill()
	if _, err := CodecFor(opts.SerializeType); err != nil {
		opts.SerializeType = SerializeMsgpack
	}
	c := &Client{opts: opts, d: newDispatcher(opts.Logger, opts.MaxInflight), conns: make(map[string]*dialEntry)}
	c.d.fallback = opts.OnRequest
	return c
}

// Conn returns the connection to addr ("ip:port"), dialing it if needed.
// Concurrent callers share one dial.
func (c *Client) Conn(ctx context.Context, addr string) (*Conn, error) { return c.conn(ctx, addr, 0) }

// conn is Conn for a call whose deadline (unix nanos, 0 for none) also
// bounds dialing and waiting for another caller's dial: a call with a
// 300 ms timeout does not wait out a 3 s dial.
func (c *Client) conn(ctx context.Context, addr string, deadline int64) (*Conn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		e := c.conns[addr]
		if e == nil {
			if !c.pooled {
				c.pooled = true
				workpool.Acquire() // NB: released at the end of Close
			}
			e = &dialEntry{ready: make(chan struct{})}
			c.conns[addr] = e
			c.mu.Unlock()
			dctx, cancel := withDeadline(ctx, deadline)
			c.dial(dctx, addr, e)
			cancel()
			return e.conn, e.err
		}
		c.mu.Unlock()
		select {
		case <-e.ready:
		default:
			// NB: only a caller that must wait pays for the bound.
			if err := waitDial(ctx, deadline, addr, e); err != nil {
				return nil, err
			}
		}
		if e.err != nil {
			return nil, e.err
		}
		if !e.conn.Closed() {
			return e.conn, nil
		}
		// A dead connection whose close callback has not removed it yet.
		c.forget(addr, e)
	}
}

// withDeadline bounds ctx by deadline (unix nanos, 0 for none).
func withDeadline(ctx context.Context, deadline int64) (context.Context, context.CancelFunc) {
	if deadline == 0 {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, time.Unix(0, deadline))
}

// waitDial waits for another caller's dial of addr to finish, bounded by
// ctx and deadline.
func waitDial(ctx context.Context, deadline int64, addr string, e *dialEntry) error {
	ctx, cancel := withDeadline(ctx, deadline)
	defer cancel()
	select {
	case <-e.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("remoting: dial %s: %w", addr, ctxError(ctx))
	}
}

// Connected reports whether an open connection to addr exists, without
// dialing.
func (c *Client) Connected(addr string) bool { return c.openConn(addr) != nil }

// openConn returns the open connection to addr, or nil: none, still
// dialing, or closed. It never dials.
func (c *Client) openConn(addr string) *Conn {
	c.mu.Lock()
	e := c.conns[addr]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	select {
	case <-e.ready:
	default:
		return nil
	}
	if e.conn == nil || e.conn.Closed() {
		return nil
	}
	return e.conn
}

func (c *Client) forget(addr string, e *dialEntry) {
	c.mu.Lock()
	if c.conns[addr] == e {
		delete(c.conns, addr)
	}
	c.mu.Unlock()
}

// dial connects e to addr, runs on the first caller's goroutine.
func (c *Client) dial(ctx context.Context, addr string, e *dialEntry) {
	defer close(e.ready)
	timeout := c.opts.DialTimeout
	if timeout < 0 {
		timeout = 0
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			e.err = fmt.Errorf("remoting: dial %s: %w", addr, ctxError(ctx))
			c.forget(addr, e)
			return
		}
		if timeout == 0 || left < timeout {
			timeout = left
		}
	}
	var nc netpoll.Connection
	var remote net.Addr
	var err error
	if c.opts.TLS != nil {
		nc, remote, err = c.dialTLS(ctx, addr, timeout)
	} else {
		nc, err = netpoll.DialConnection("tcp", addr, timeout)
	}
	if c.opts.TLS == nil && errors.Is(err, netpoll.ErrConnClosed) {
		// NB: a hang-up while connecting (see refusedError). netpoll also
		// reports it, now and then, for a connect that a listening peer
		// accepted (under load, with descriptors reused quickly: "operator
		// has critical problem"), so it dials once more before it fails.
		nc, err = netpoll.DialConnection("tcp", addr, timeout)
	}
	if err != nil {
		if errors.Is(err, netpoll.ErrDialTimeout) {
			err = fmt.Errorf("%w: %w", ErrTimeout, err)
		}
		e.err = fmt.Errorf("remoting: dial %s: %w", addr, refusedError(addr, timeout, err))
		c.forget(addr, e)
		return
	}
	if c.opts.ReadTimeout > 0 {
		_ = nc.SetReadTimeout(c.opts.ReadTimeout)
	}
	if c.opts.WriteTimeout > 0 {
		_ = nc.SetWriteTimeout(c.opts.WriteTimeout)
	}
	conn := newConn(c, nc, c.ids.Add(1), &c.opaque, c.opts.MaxFrameSize, c.opts.SerializeType, false, context.Background())
	conn.sign = c.opts.Sign
	conn.due = &c.due
	if remote != nil {
		conn.remote, conn.remoteAP = remote, addrPort(remote)
	}
	conn.addr = addr
	_ = nc.AddCloseCallback(conn.onNetpollClose)
	_ = nc.SetOnRequest(conn.onRequest)

	c.mu.Lock()
	closed := c.closed
	if !closed {
		e.conn = conn
	}
	c.mu.Unlock()
	if closed {
		conn.closeWith(ErrClosed)
		e.err = ErrClosed
	}
}

// Invoke sends req to addr's connection, dialing it if needed (see Conn),
// and returns the response; see Conn.Invoke for the call and CallOption
// for the options. A dial error goes to the callback of an Async or
// Inline call; an Async call dials on its callback's goroutine. A failed
// connection fails its pending calls with ErrConnClosed and is dialed
// again by the next call.
func (c *Client) Invoke(ctx context.Context, addr string, req *Command, opts ...CallOption) (*Command, error) {
	o, err := callOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.flags&callNoDial != 0 {
		conn := c.openConn(addr)
		if conn == nil {
			return nil, fmt.Errorf("remoting: %s: %w", addr, ErrNotConnected)
		}
		return conn.do(ctx, req, o)
	}
	if o.cb != nil && o.flags&callInline == 0 {
		if !c.bg.goFunc(func() { _, _ = c.dialAndDo(ctx, addr, req, o) }) {
			o.cb(nil, ErrClosed)
		}
		return nil, nil
	}
	return c.dialAndDo(ctx, addr, req, o)
}

// dialAndDo runs a call on addr's connection, dialing it if needed.
func (c *Client) dialAndDo(ctx context.Context, addr string, req *Command, o CallOption) (*Command, error) {
	conn, err := c.conn(ctx, addr, o.deadline)
	if err == nil {
		return conn.do(ctx, req, o)
	}
	if o.cb == nil {
		return nil, err
	}
	o.cb(nil, err)
	return nil, nil
}

// Close closes every connection (pending calls fail with ErrClosed), then
// waits for running OnRequest handlers and Async callbacks. Later
// calls fail with ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	entries := c.conns
	c.conns = nil
	if c.pooled {
		defer workpool.Release()
	}
	c.mu.Unlock()

	c.d.closing.Store(true)
	c.sweepOnce.Do(func() {}) // NB: no registration after Close
	sweepUnregister(c)
	for _, e := range entries {
		select {
		case <-e.ready:
			if e.conn != nil {
				e.conn.closeWith(fmt.Errorf("%w: client closed", ErrClosed))
			}
		default: // a dial in progress closes its connection when it sees closed
		}
	}
	c.d.running.close()
	_ = c.d.running.wait(context.Background())
	c.bg.close()
	return c.bg.wait(context.Background())
}

// endpoint implementation.

func (c *Client) dispatch(conn *Conn, req *Command) { c.d.dispatch(conn, req) }
func (c *Client) background() *group                { return &c.bg }
func (c *Client) deadlines() bool                   { c.sweepOnce.Do(func() { sweepRegister(c) }); return true }
func (c *Client) logger() *slog.Logger              { return c.opts.Logger }

// badFrame logs every bad frame: a client's peers are the servers it
// dials, not strangers.
func (c *Client) badFrame(conn *Conn, reason string, err error) {
	c.opts.Logger.Warn("remoting: bad frame or stalled frame from server; closing connection",
		"remote", addrString(conn.remote), "conn", conn.id, "reason", reason, "err", err)
}

func (c *Client) warnPeer(conn *Conn, reason, msg string, attrs ...any) {
	c.d.warnPeer(conn, reason, msg, attrs...)
}

func (c *Client) connClosed(conn *Conn) {
	c.mu.Lock()
	if e := c.conns[conn.addr]; e != nil && e.conn == conn {
		delete(c.conns, conn.addr)
	}
	c.mu.Unlock()
}
