package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// Handler serves one inbound request. It runs on a goroutine of its own,
// so it may block, but a request that waits for an event (a long-polled
// pull) should park w and return: the goroutine counts against the
// owner's MaxInflight until the handler returns, not until it replies.
//
// ctx is the connection's context, cancelled when the connection closes or
// the server shuts down. req is the handler's to keep.
//
// The handler answers through w, now or later from any goroutine. A
// request with the oneway flag gets no reply whatever w is told. A handler
// that never calls w.Write leaves the peer waiting for its own timeout.
type Handler func(ctx context.Context, w ResponseWriter, req *Command)

// ResponseWriter answers one request.
type ResponseWriter interface {
	// Write sends resp as the answer. It sets resp's Opaque, the response
	// flag and the request's serialize type, so NewResponse is optional.
	// Only the first call writes; later calls return ErrAlreadyReplied.
	// For a oneway request it writes nothing and returns nil. Write is
	// safe to call from any goroutine; it returns when the frame has
	// been handed to the kernel (resp.Body may be reused after that).
	// Neither Write nor WriteSoon keeps resp once it returns: the caller
	// may reuse the command itself (the broker's send answers do).
	Write(resp *Command) error
	// WriteSoon is Write for a goroutine that must not block on the
	// network (one answering many requests): the frame is queued and the
	// connection's flusher sends it.
	WriteSoon(resp *Command) error
	// Conn is the connection the request came on (nil in a
	// ResponseRecorder).
	Conn() *Conn
}

// InlineHandler serves a request on the connection's reader goroutine if
// it can do so without blocking, and reports whether it did. When it
// returns false it must not have written to w: the request then goes to
// the code's Handler on the connection's ordered executor (see
// dispatcher). Answers written while it runs
// are flushed together with the answers to the other requests that arrived
// with it: under load, one write for many.
//
// req.Body may be a view of the connection's input buffer: it stays valid
// while the handler runs and until the hooks it registered with
// Conn.AtBatchEnd have run, no longer. A handler that keeps the body past
// that (or hands it to another goroutine) copies it.
type InlineHandler func(ctx context.Context, w ResponseWriter, req *Command) bool

type responseWriter struct {
	c        *Conn
	opaque   int32
	st       SerializeType
	oneway   bool
	done     atomic.Bool
	onReader atomic.Bool // an InlineHandler is running: the reader flushes
	parked   atomic.Bool // Parked: not counted in busy until written
}

func (w *responseWriter) Conn() *Conn { return w.c }

func (w *responseWriter) Write(resp *Command) error { return w.write(resp, flushSoon) }

// Parked tells w's connection that the request waits for something other
// than its own work (a long poll): until it is answered it is not an
// exchange in progress there, which would make the connection's other
// answers, and its own when it comes, wait for the flusher goroutine
// (see flushSoon) instead of going out at once. A consumer keeps a pull
// parked per queue: with it, every answer of a quiet connection took a
// goroutine switch more. Call it before the answer can be written; it
// does nothing to another ResponseWriter or a oneway request's.
func Parked(w ResponseWriter) {
	if rw, ok := w.(*responseWriter); ok && !rw.oneway && !rw.done.Load() && rw.parked.CompareAndSwap(false, true) {
		rw.c.busy.Add(-1)
	}
}

func (w *responseWriter) WriteSoon(resp *Command) error { return w.write(resp, flushLater) }

func (w *responseWriter) write(resp *Command, mode flushMode) error {
	if !w.done.CompareAndSwap(false, true) {
		return ErrAlreadyReplied
	}
	if w.oneway {
		return nil
	}
	resp.Opaque = w.opaque
	resp.Flag = (resp.Flag | FlagResponse) &^ FlagOneway
	resp.SerializeType = w.st
	if w.parked.Load() {
		w.c.busy.Add(1) // NB: an exchange in progress again, until written
	}
	defer w.c.busy.Add(-1)
	if w.onReader.Load() {
		mode = flushByReader
	}
	err := w.c.writeMode(resp, mode)
	if errors.Is(err, ErrFrameTooLarge) {
		// NB: never sent, the answer would leave its caller waiting out
		// its timeout; it gets one that says why (the remark is made
		// here: the answer's own may be what was too large).
		small := NewResponse(resp, protocol.SystemError, fmt.Sprintf("the answer to this request is larger than a frame may be (%v)", err))
		small.SerializeType = w.st
		_ = w.c.writeMode(small, mode)
	}
	return err
}

// dispatcher runs inbound requests on goroutines, at most cap(sem) at a
// time. Over the limit, and while shutting down, it answers SYSTEM_BUSY
// (2) itself so that clients retry elsewhere; unknown codes get
// REQUEST_CODE_NOT_SUPPORTED (3); a handler panic is logged and answered
// with SYSTEM_ERROR (1), and the connection stays open (the frame stream
// is intact: the panic happened above it).
//
// Requests of the codes that have an InlineHandler are ordered: on one
// connection their handlers run in arrival order, one at a time. The
// dispatcher is the one owner of that order. Such a request is served
// inline on the reader while none of its connection's ordered requests
// waits; one its InlineHandler declines starts the connection's ordered
// executor, a goroutine that serves it with the code's Handler and then
// every ordered request that arrived meanwhile (they queue behind it, at
// most cap(sem), then SYSTEM_BUSY), and ends when none is left. So a
// connection's sends are stored in the order they were sent, whichever
// way each is served.
type dispatcher struct {
	log      *slog.Logger
	peers    *peerLog // a Server's: rate-limits the busy lines; nil logs each
	handlers map[int16]Handler
	inline   map[int16]InlineHandler
	fallback Handler // nil: REQUEST_CODE_NOT_SUPPORTED
	// authorize is a Server's ServerOptions.Authorize (nil: none).
	authorize func(c *Conn, req *Command) (int16, string, bool)
	sem       chan struct{}
	running   group
	closing   atomic.Bool

	orderedMu sync.Mutex
	// ordered holds, for each connection whose ordered executor runs, the
	// ordered requests waiting for it. Guarded by orderedMu.
	ordered map[*Conn][]*Command
}

func newDispatcher(log *slog.Logger, maxInflight int) dispatcher {
	return dispatcher{log: log, handlers: make(map[int16]Handler), inline: make(map[int16]InlineHandler),
		sem: make(chan struct{}, maxInflight), ordered: make(map[*Conn][]*Command)}
}

// warnPeer logs a line c's peer can trigger: on a Server once per remote
// IP and reason a minute (peerLog), on a Client every time.
func (d *dispatcher) warnPeer(c *Conn, reason, msg string, attrs ...any) {
	if d.peers == nil {
		d.log.Warn(msg, attrs...)
		return
	}
	d.peers.event(time.Now(), slog.LevelWarn, c.remoteAP.Addr(), reason, msg, attrs...)
}

func (d *dispatcher) dispatch(c *Conn, req *Command) {
	if !req.IsOneway() {
		c.busy.Add(1) // until the answer is written (responseWriter.Write)
	}
	if d.closing.Load() {
		d.reject(c, req, protocol.SystemBusy, "remoting: shutting down; retry on another node")
		return
	}
	if d.authorize != nil {
		if code, remark, ok := d.authorize(c, req); !ok {
			d.reject(c, req, code, remark)
			return
		}
	}
	ih := d.inline[req.Code]
	if ih != nil && d.queueOrdered(c, req) {
		return
	}
	if ih != nil && d.serveInline(ih, c, req) {
		return
	}
	req.own() // NB: it leaves the reader
	select {
	case d.sem <- struct{}{}:
	default:
		d.warnPeer(c, ReasonBusy, "remoting: too many requests in flight; answering SYSTEM_BUSY",
			"remote", addrString(c.remote), "conn", c.id, "code", req.Code, "limit", cap(d.sem))
		d.reject(c, req, protocol.SystemBusy,
			fmt.Sprintf("remoting: %d requests in flight, the limit; retry later", cap(d.sem)))
		return
	}
	serve := func() { d.serve(c, req) }
	if ih != nil {
		d.orderedMu.Lock()
		d.ordered[c] = nil // NB: the executor runs: ordered requests queue
		c.ordered.Store(true)
		d.orderedMu.Unlock()
		serve = func() { d.runOrdered(c, req) }
	}
	if !d.running.goFunc(func() {
		defer func() { <-d.sem }()
		serve()
	}) {
		<-d.sem
		if ih != nil {
			d.orderedMu.Lock()
			delete(d.ordered, c)
			c.ordered.Store(false)
			d.orderedMu.Unlock()
		}
		d.reject(c, req, protocol.SystemBusy, "remoting: shutting down; retry on another node")
	}
}

// queueOrdered queues an ordered request behind its connection's running
// executor and reports whether it did (false: no executor runs).
// REQUIRES: on c's reader, the only goroutine that starts c's executor.
func (d *dispatcher) queueOrdered(c *Conn, req *Command) bool {
	if !c.ordered.Load() {
		// NB: no lock per request while no executor runs: only this
		// reader sets the flag, and the executor clears it once it has
		// decided, under the lock, that nothing waits for it.
		return false
	}
	d.orderedMu.Lock()
	waiting, running := d.ordered[c]
	full := running && len(waiting) >= cap(d.sem)
	if running && !full {
		req.own() // NB: it leaves the reader
		d.ordered[c] = append(waiting, req)
	}
	d.orderedMu.Unlock()
	if full {
		d.warnPeer(c, ReasonOrderedBusy, "remoting: too many ordered requests waiting on one connection; answering SYSTEM_BUSY",
			"remote", addrString(c.remote), "conn", c.id, "code", req.Code, "limit", cap(d.sem))
		d.reject(c, req, protocol.SystemBusy,
			fmt.Sprintf("remoting: %d requests of this connection wait to be served in order, the limit; retry later", cap(d.sem)))
	}
	return running
}

// runOrdered is c's ordered executor: it serves req, then the ordered
// requests queued behind it, in order, and ends when none is left.
func (d *dispatcher) runOrdered(c *Conn, req *Command) {
	for {
		d.serve(c, req)
		d.orderedMu.Lock()
		waiting := d.ordered[c]
		if len(waiting) == 0 {
			delete(d.ordered, c)
			c.ordered.Store(false)
			d.orderedMu.Unlock()
			return
		}
		req = waiting[0]
		waiting[0] = nil
		d.ordered[c] = waiting[1:]
		d.orderedMu.Unlock()
	}
}

// serveInline runs ih on the reader and reports whether it served req.
func (d *dispatcher) serveInline(ih InlineHandler, c *Conn, req *Command) (served bool) {
	w := req.inlineW
	req.inlineW = nil // NB: one writer per serve: a declined request gets a fresh one
	if w == nil {
		w = new(responseWriter)
	}
	w.c, w.opaque, w.st, w.oneway = c, req.Opaque, req.SerializeType, req.IsOneway()
	w.onReader.Store(true)
	defer func() {
		w.onReader.Store(false)
		if r := recover(); r != nil {
			served = true
			d.log.Error("remoting: inline handler panicked; answering SYSTEM_ERROR",
				"remote", addrString(c.remote), "conn", c.id, "code", req.Code,
				"request", protocol.CodeName(req.Code), "panic", r, "stack", string(debug.Stack()))
			_ = w.Write(NewResponse(req, protocol.SystemError,
				fmt.Sprintf("internal error while handling %s; see the server log", protocol.CodeName(req.Code))))
		}
	}()
	return ih(c.ctx, w, req)
}

func (d *dispatcher) reject(c *Conn, req *Command, code int16, remark string) {
	if req.IsOneway() {
		return
	}
	defer c.busy.Add(-1)
	_ = c.write(NewResponse(req, code, remark))
}

func (d *dispatcher) serve(c *Conn, req *Command) {
	w := &responseWriter{c: c, opaque: req.Opaque, st: req.SerializeType, oneway: req.IsOneway()}
	h := d.handlers[req.Code]
	if h == nil {
		h = d.fallback
	}
	if h == nil {
		d.log.Debug("remoting: request code not supported",
			"remote", addrString(c.remote), "conn", c.id, "code", req.Code)
		_ = w.Write(NewResponse(req, protocol.RequestCodeNotSupported,
			fmt.Sprintf("request code %d (%s) is not supported", req.Code, protocol.CodeName(req.Code))))
		return
	}
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("remoting: handler panicked; answering SYSTEM_ERROR",
				"remote", addrString(c.remote), "conn", c.id, "code", req.Code,
				"request", protocol.CodeName(req.Code), "panic", r, "stack", string(debug.Stack()))
			_ = w.Write(NewResponse(req, protocol.SystemError,
				fmt.Sprintf("internal error while handling %s; see the server log", protocol.CodeName(req.Code))))
		}
	}()
	h(c.ctx, w, req)
}
