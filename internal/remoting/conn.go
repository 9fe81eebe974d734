package remoting

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/sluicemq/sluice/internal/protocol"
)

// endpoint is the owner of a Conn: a Server or a Client.
type endpoint interface {
	// dispatch hands an inbound request to a handler. It runs on the
	// connection's reader and must not block.
	dispatch(c *Conn, req *Command)
	// connClosed runs once per connection, after it closed and its pending
	// calls failed.
	connClosed(c *Conn)
	// background runs InvokeAsync callbacks.
	background() *group
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
type Conn struct {
	id       uint64
	addr     string // dialed address (client side), "" on the server side
	nc       netpoll.Connection
	ep       endpoint
	local    net.Addr
	remote   net.Addr
	remoteAP netip.AddrPort // remote as an AddrPort, made once
	maxFrame int
	opaque   *atomic.Int32 // the owner's opaque counter
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
	// Touched by the server's idle loop only: the frame count it saw last
	// and since when.
	idleFrames uint64
	idleSince  time.Time

	wmu     sync.Mutex    // serializes Malloc/WriteBinary/Flush on nc
	wclosed bool          // guarded by wmu; set before netpoll frees the buffers
	dirty   bool          // guarded by wmu: frames written but not flushed
	kicked  bool          // guarded by wmu: the flusher has been told to flush
	kick    chan struct{} // wakes the flusher
	// Guarded by wmu: frames written and flushes made (benchmarks report
	// frames per flush).
	framesOut, flushes uint64
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
}

// call is one request waiting for its response. Whoever removes it from
// Conn.pending (the reader, a timeout, closeWith) completes it, exactly
// once.
type call struct {
	ch       chan result           // Invoke: cap 1
	cb       func(*Command, error) // InvokeAsync
	stop     func() bool           // InvokeAsync: stops the context watcher
	deadline int64                 // unix nanos, 0 for none: see Client.InvokeWithin
	inline   bool                  // cb runs where the call completes (Client.TryInvokeInline)
	pairs    bool                  // the response may keep its ext as ExtPairs (see pairsAnswer)
}

// pairsAnswer reports whether the answer to a request with code keeps a
// msgpack ext as Header.ExtPairs rather than a map: a send's, which the
// client reads with SendMessageResponseHeader.FromExtPairs (a map per
// answer was 6% of a producer's CPU). Every other answer gets its map.
func pairsAnswer(code int16) bool {
	return code == protocol.SendMessageV2 || code == protocol.SendBatchMessage
}

type result struct {
	cmd *Command
	err error
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

var framePrefixPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// smallBody is the size up to which a body is copied behind the header
// into one netpoll write; netpoll copies writes up to 4 KiB anyway and
// references larger ones.
const smallBody = 4096

// write sends cmd as one frame. Bodies above smallBody are passed to
// netpoll by reference (no copy); the header buffer is pooled and reused
// only after a successful Flush, when netpoll no longer references it.
func (c *Conn) write(cmd *Command) error { return c.writeMode(cmd, flushSoon) }

// flushMode says when a frame is handed to the kernel.
type flushMode uint8

const (
	// flushSoon: at once when no other exchange is in progress on the
	// connection, else by the connection's flusher, together with the
	// frames other goroutines write meanwhile.
	flushSoon flushMode = iota
	// flushLater: by the flusher; the writer never waits for the network.
	flushLater
	// flushByReader: by the connection's reader, once it has served every
	// request it has at hand (see onRequest). Only the reader may use it.
	flushByReader
)

func (c *Conn) writeMode(cmd *Command, mode flushMode) error {
	bp := framePrefixPool.Get().(*[]byte)
	buf, err := appendFramePrefix((*bp)[:0], cmd)
	if err != nil {
		framePrefixPool.Put(bp)
		return err
	}
	if n := len(buf) + len(cmd.Body); n > c.maxFrame {
		framePrefixPool.Put(bp)
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, c.maxFrame)
	}
	body := cmd.Body
	if len(body) <= smallBody {
		buf = append(buf, body...)
		body = nil
	}
	c.wmu.Lock()
	if c.wclosed {
		c.wmu.Unlock()
		*bp = buf[:0]
		framePrefixPool.Put(bp)
		return c.err()
	}
	if c.inBatchEnd && mode != flushByReader {
		mode = flushByReader // the flush after the batch-end hooks takes it
	}
	w := c.nc.Writer()
	_, err = w.WriteBinary(buf)
	if err == nil && len(body) > 0 {
		_, err = w.WriteBinary(body)
	}
	if err == nil {
		c.framesOut++
	}
	// NB: netpoll copied buf unless it is larger than its in-place
	// threshold; a referenced buffer (a large body, a pull's commitlog
	// slice) must be in the kernel before write returns, as the caller may
	// reuse it. A lone exchange flushes at once too (see busy). Other
	// copied frames wait for one flush shared with other frames.
	if err == nil {
		switch {
		case len(body) > 0 || len(buf) > netpoll.BinaryInplaceThreshold,
			mode == flushSoon && c.busy.Load() <= 1:
			err = w.Flush()
			c.dirty = false
			c.flushes++
		default:
			c.dirty = true
			if mode != flushByReader && !c.kicked {
				c.kicked = true
				c.kick <- struct{}{}
			}
		}
	}
	gone := err != nil && peerGone(err)
	if gone {
		c.wclosed = true
	}
	c.wmu.Unlock()
	if err != nil {
		// NB: buf is not returned to the pool: netpoll may still hold it.
		cause := fmt.Errorf("%w: write to %s: %v", ErrConnClosed, addrString(c.remote), err)
		if gone {
			// The peer closed the connection, perhaps right after its last
			// requests (a Go client commits its offsets and closes). Stop
			// writing but leave closing to the reader: it still handles
			// the requests that arrived, and netpoll closes the connection
			// once the input is drained.
			return cause
		}
		c.closeWith(cause)
		return c.err()
	}
	if cap(buf) <= 64<<10 {
		*bp = buf[:0]
		framePrefixPool.Put(bp)
	}
	return nil
}

func (c *Conn) flusher() {
	for {
		select {
		case <-c.kick:
		case <-c.ctx.Done():
			return
		}
		// NB: let the goroutines that are ready run first: writers woken
		// together (the callers a burst of responses completed) then add
		// their frames to this flush instead of each waking the flusher
		// for a sendmsg of its own. Measured on 128 goroutines sharing a
		// producer with sync sends: 24k sendmsg per 50k sends without it,
		// 2.3k with it.
		runtime.Gosched()
		c.wmu.Lock()
		c.kicked = false
		c.flushLocked()
	}
}

// writeStats returns how many frames were written and how many flushes
// carried them.
func (c *Conn) writeStats() (frames, flushes uint64) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.framesOut, c.flushes
}

// flushPending hands the frames written so far to the kernel, and ends
// the reader's batch-end hooks' window.
func (c *Conn) flushPending() {
	c.wmu.Lock()
	c.inBatchEnd = false
	c.flushLocked()
}

// flushLocked flushes if there is anything to flush, and unlocks wmu.
func (c *Conn) flushLocked() {
	var err error
	if c.dirty && !c.wclosed {
		err = c.nc.Writer().Flush()
		c.dirty = false
		c.flushes++
	}
	gone := err != nil && peerGone(err)
	if gone {
		c.wclosed = true
	}
	c.wmu.Unlock()
	if err != nil && !gone {
		c.closeWith(fmt.Errorf("%w: write to %s: %v", ErrConnClosed, addrString(c.remote), err))
	}
}

// peerGone reports whether a write failed because the peer has left:
// netpoll already saw the connection close, or the peer closed or reset it.
// (A write timeout on a live peer is not that.)
func peerGone(err error) bool {
	return errors.Is(err, netpoll.ErrConnClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// onRequest is the netpoll OnRequest callback: it reads exactly one frame,
// hands a request to the owner's dispatcher or a response to its waiting
// call, and returns. A garbage frame closes the connection.
func (c *Conn) onRequest(_ context.Context, nc netpoll.Connection) error {
	defer func() {
		if r := recover(); r != nil {
			c.ep.logger().Error("remoting: panic reading frame; closing connection",
				"remote", addrString(c.remote), "conn", c.id, "panic", r, "stack", string(debug.Stack()))
			c.closeWith(fmt.Errorf("%w: internal error reading frame", ErrConnClosed))
		}
	}()
	r := nc.Reader()
	cmd, size, err := readFrame(r, c.maxFrame, true)
	var wide *CodeRangeError
	if err != nil && !errors.As(err, &wide) {
		c.readFailed(err) // NB: before the release: its hooks may read borrowed bodies
		_ = r.Release()
		return nil
	}
	// NB: a count, not a clock reading: ~60 ns a frame on this VM, and
	// the idle check needs only to know that something arrived.
	c.frames.Add(1)
	c.held += size // NB: unreleased, whether or not its body is borrowed
	switch {
	case wide != nil:
		c.codeOutOfRange(cmd, wide)
	case cmd.IsResponse():
		c.deliver(cmd)
	default:
		if c.followPeer {
			c.reqType.Store(uint32(cmd.SerializeType))
		}
		c.ep.dispatch(c, cmd)
	}
	// NB: answers written on the reader (flushByReader) go out when no
	// whole frame is left to read: one sendmsg for all the requests that
	// arrived together, and never a read that blocks on unflushed answers.
	// The input buffer (which borrowed request bodies are views of) is
	// released once no batch-end hook can read them, and at the latest
	// after maxHeld bytes: then the burst ends early.
	switch {
	case !wholeFrameBuffered(r) || c.held >= maxHeld:
		c.runBatchEnd()
		c.flushPending()
		_ = r.Release()
		c.held = 0
	case len(c.batchEnd) == 0:
		_ = r.Release()
		c.held = 0
	}
	return nil
}

// maxHeld bounds the frames (and the borrowed bodies among them) a reader
// holds unreleased while batch-end hooks are pending.
const maxHeld = 4 << 20

// AtBatchEnd registers f to run on the reader once it has no whole frame
// left (or stops reading), before it flushes the burst's answers: answers
// f writes go out with them. A handler uses it to finish, in one go, work
// it gathered over a burst of requests.
// REQUIRES: called by an InlineHandler (on the connection's reader).
func (c *Conn) AtBatchEnd(f func()) { c.batchEnd = append(c.batchEnd, f) }

// runBatchEnd runs the AtBatchEnd hooks. REQUIRES: on the reader.
func (c *Conn) runBatchEnd() {
	if len(c.batchEnd) == 0 {
		return
	}
	hooks := c.batchEnd
	c.batchEnd = nil
	c.wmu.Lock()
	c.inBatchEnd = true
	c.wmu.Unlock()
	// NB: the caller flushes next (flushPending clears inBatchEnd under
	// the same lock as its flush), also if a hook panics.
	for _, f := range hooks {
		f()
	}
}

// wholeFrameBuffered reports whether r holds at least one whole frame.
func wholeFrameBuffered(r netpoll.Reader) bool {
	n := r.Len()
	if n < 4 {
		return false
	}
	p, err := r.Peek(4)
	return err == nil && int64(n) >= 4+int64(binary.BigEndian.Uint32(p))
}

func isGarbage(err error) bool {
	return errors.Is(err, ErrBadFrame) || errors.Is(err, ErrFrameTooLarge) ||
		errors.Is(err, ErrUnknownSerializeType) || errors.Is(err, ErrBadHeader)
}

func (c *Conn) readFailed(err error) {
	c.runBatchEnd() // NB: its answers will not get out; its work is finished
	log := c.ep.logger()
	switch {
	case isGarbage(err):
		log.Warn("remoting: bad frame; closing connection",
			"remote", addrString(c.remote), "conn", c.id, "err", err)
	case errors.Is(err, netpoll.ErrReadTimeout):
		log.Warn("remoting: frame not completed within the read timeout; closing connection",
			"remote", addrString(c.remote), "conn", c.id)
	default:
		log.Debug("remoting: connection closed while reading",
			"remote", addrString(c.remote), "conn", c.id, "err", err)
	}
	c.closeWith(fmt.Errorf("%w: read from %s: %w", ErrConnClosed, addrString(c.remote), err))
}

// codeOutOfRange handles a frame whose code does not fit in 16 bits (see
// CodeRangeError) as Java does: a request is answered
// REQUEST_CODE_NOT_SUPPORTED naming the code (by the reader's flush); a
// response fails the call it answers. REQUIRES: on the reader.
func (c *Conn) codeOutOfRange(cmd *Command, cause *CodeRangeError) {
	c.ep.logger().Debug("remoting: code does not fit in 16 bits",
		"remote", addrString(c.remote), "conn", c.id, "code", cause.Code, "response", cmd.IsResponse())
	if cmd.IsResponse() {
		if cl := c.take(cmd.Opaque); cl != nil {
			c.finish(cl, nil, cause)
		}
		return
	}
	if cmd.IsOneway() {
		return
	}
	_ = c.writeMode(NewResponse(cmd, protocol.RequestCodeNotSupported,
		fmt.Sprintf("request code %d is not supported", cause.Code)), flushByReader)
}

// deliver completes the call waiting for resp. A response nobody waits for
// (its caller timed out) is dropped.
func (c *Conn) deliver(resp *Command) {
	cl := c.take(resp.Opaque)
	if cl == nil {
		c.ep.logger().Debug("remoting: dropping response nobody waits for",
			"remote", addrString(c.remote), "conn", c.id, "opaque", resp.Opaque, "code", resp.Code)
		return
	}
	if resp.ExtPairs != nil && !cl.pairs {
		resp.ExtFields, resp.ExtPairs = resp.ExtMap(), nil
	}
	c.finish(cl, resp, nil)
}

// take removes the call registered under opaque; nil if there is none.
func (c *Conn) take(opaque int32) *call {
	c.mu.Lock()
	cl := c.pending[opaque]
	if cl != nil {
		delete(c.pending, opaque)
		c.busy.Add(-1)
	}
	c.mu.Unlock()
	return cl
}

func (c *Conn) finish(cl *call, cmd *Command, err error) {
	if cl.cb == nil {
		cl.ch <- result{cmd, err}
		return
	}
	if cl.stop != nil {
		cl.stop()
	}
	cb := cl.cb
	if cl.inline {
		cb(cmd, err)
		return
	}
	if !c.ep.background().goFunc(func() { cb(cmd, err) }) {
		cb(cmd, err) // owner closing: run inline rather than never
	}
}

// prepare stamps a request with a fresh opaque and this connection's
// serialize type.
func (c *Conn) prepare(req *Command, oneway bool) {
	req.Flag &^= FlagResponse | FlagOneway
	if oneway {
		req.Flag |= FlagOneway
	}
	req.SerializeType = SerializeType(c.reqType.Load())
	req.Opaque = c.opaque.Add(1)
}

// register prepares req and records cl under its opaque.
func (c *Conn) register(req *Command, cl *call) error {
	c.prepare(req, false)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.closeErr
	}
	for c.pending[req.Opaque] != nil { // NB: only after the counter wrapped
		req.Opaque = c.opaque.Add(1)
	}
	cl.pairs = pairsAnswer(req.Code)
	c.pending[req.Opaque] = cl
	c.busy.Add(1)
	return nil
}

func (c *Conn) invokeErr(req *Command, err error) error {
	return fmt.Errorf("remoting: %s to %s: %w", protocol.CodeName(req.Code), addrString(c.remote), err)
}

// Invoke sends req and waits for its response, until ctx is done (then it
// returns an error wrapping ErrTimeout for an expired deadline, or the
// context's error) or the connection closes (ErrConnClosed). Invoke sets
// req's Opaque, SerializeType and Flag; req must not be reused until Invoke
// returns. A response that arrives after the caller gave up is dropped.
func (c *Conn) Invoke(ctx context.Context, req *Command) (*Command, error) {
	return c.invoke(ctx, req, 0)
}

// invoke is Invoke with an optional deadline (unix nanos) enforced by the
// owner's sweeper rather than by a timer per call.
func (c *Conn) invoke(ctx context.Context, req *Command, deadline int64) (*Command, error) {
	if ctx.Err() != nil {
		return nil, c.invokeErr(req, ctxError(ctx))
	}
	cl := &call{ch: make(chan result, 1), deadline: deadline}
	if err := c.register(req, cl); err != nil {
		return nil, c.invokeErr(req, err)
	}
	opaque := req.Opaque
	if err := c.write(req); err != nil {
		c.take(opaque)
		return nil, c.invokeErr(req, err)
	}
	select {
	case r := <-cl.ch:
		if r.err != nil {
			return nil, c.invokeErr(req, r.err)
		}
		return r.cmd, nil
	case <-ctx.Done():
		if c.take(opaque) != nil {
			return nil, c.invokeErr(req, ctxError(ctx))
		}
		r := <-cl.ch // completed while we were giving up
		if r.err != nil {
			return nil, c.invokeErr(req, r.err)
		}
		return r.cmd, nil
	}
}

// expire fails the calls whose deadline is before now with ErrTimeout.
func (c *Conn) expire(now int64) {
	var late []*call
	c.mu.Lock()
	for opaque, cl := range c.pending {
		if cl.deadline != 0 && cl.deadline < now {
			delete(c.pending, opaque)
			c.busy.Add(-1)
			late = append(late, cl)
		}
	}
	c.mu.Unlock()
	for _, cl := range late {
		c.finish(cl, nil, fmt.Errorf("%w: no response within the call's timeout: %w", ErrTimeout, context.DeadlineExceeded))
	}
}

// InvokeAsync sends req and calls cb exactly once with the response or an
// error (as Invoke's), on a goroutine of its own. ctx bounds the wait.
func (c *Conn) InvokeAsync(ctx context.Context, req *Command, cb func(*Command, error)) {
	fail := func(err error) {
		err = c.invokeErr(req, err)
		if !c.ep.background().goFunc(func() { cb(nil, err) }) {
			cb(nil, err)
		}
	}
	if ctx.Err() != nil {
		fail(ctxError(ctx))
		return
	}
	code := req.Code
	c.launch(ctx, req, &call{cb: func(cmd *Command, err error) {
		if err != nil {
			err = fmt.Errorf("remoting: %s to %s: %w", protocol.CodeName(code), addrString(c.remote), err)
		}
		cb(cmd, err)
	}}, fail)
}

// invokeInline sends req and calls cb once with the response or an error,
// on whichever goroutine completes the call (the reader, the sweeper at
// deadline, a failed write, the close): cb must not block.
func (c *Conn) invokeInline(ctx context.Context, req *Command, deadline int64, cb func(*Command, error)) {
	fail := func(err error) { cb(nil, c.invokeErr(req, err)) }
	if ctx.Err() != nil {
		fail(ctxError(ctx))
		return
	}
	code := req.Code
	c.launch(ctx, req, &call{inline: true, deadline: deadline, cb: func(cmd *Command, err error) {
		if err != nil {
			err = fmt.Errorf("remoting: %s to %s: %w", protocol.CodeName(code), addrString(c.remote), err)
		}
		cb(cmd, err)
	}}, fail)
}

// launch registers cl under req's fresh opaque, watches ctx, and writes
// req; fail gets the error when the connection is already closed.
func (c *Conn) launch(ctx context.Context, req *Command, cl *call, fail func(error)) {
	c.prepare(req, false)
	c.mu.Lock()
	if c.closed {
		err := c.closeErr
		c.mu.Unlock()
		fail(err)
		return
	}
	for c.pending[req.Opaque] != nil { // NB: only after the counter wrapped
		req.Opaque = c.opaque.Add(1)
	}
	opaque := req.Opaque
	cl.pairs = pairsAnswer(req.Code)
	c.pending[opaque] = cl
	c.busy.Add(1)
	if ctx.Done() != nil {
		// NB: set under mu, so finish (which runs after take) sees it.
		cl.stop = context.AfterFunc(ctx, func() {
			if cl := c.take(opaque); cl != nil {
				c.finish(cl, nil, ctxError(ctx))
			}
		})
	}
	c.mu.Unlock()
	if err := c.write(req); err != nil {
		if cl := c.take(opaque); cl != nil {
			c.finish(cl, nil, err)
		}
	}
}

// InvokeOneway sends req with the oneway flag and does not wait for a
// response (the peer sends none). It returns once the frame is written.
func (c *Conn) InvokeOneway(ctx context.Context, req *Command) error {
	if ctx.Err() != nil {
		return c.invokeErr(req, ctxError(ctx))
	}
	c.prepare(req, true)
	if err := c.write(req); err != nil {
		return c.invokeErr(req, err)
	}
	return nil
}
