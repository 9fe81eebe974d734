package remoting

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"

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
	Write(resp *Command) error
	// Conn is the connection the request came on (nil in a
	// ResponseRecorder).
	Conn() *Conn
}

type responseWriter struct {
	c      *Conn
	opaque int32
	st     SerializeType
	oneway bool
	done   atomic.Bool
}

func (w *responseWriter) Conn() *Conn { return w.c }

func (w *responseWriter) Write(resp *Command) error {
	if !w.done.CompareAndSwap(false, true) {
		return ErrAlreadyReplied
	}
	if w.oneway {
		return nil
	}
	resp.Opaque = w.opaque
	resp.Flag = (resp.Flag | FlagResponse) &^ FlagOneway
	resp.SerializeType = w.st
	return w.c.write(resp)
}

// dispatcher runs inbound requests on goroutines, at most cap(sem) at a
// time. Over the limit, and while shutting down, it answers SYSTEM_BUSY
// (2) itself so that clients retry elsewhere; unknown codes get
// REQUEST_CODE_NOT_SUPPORTED (3); a handler panic is logged and answered
// with SYSTEM_ERROR (1), and the connection stays open (the frame stream
// is intact: the panic happened above it).
type dispatcher struct {
	log      *slog.Logger
	handlers map[int16]Handler
	fallback Handler // nil: REQUEST_CODE_NOT_SUPPORTED
	sem      chan struct{}
	running  group
	closing  atomic.Bool
}

func newDispatcher(log *slog.Logger, maxInflight int) dispatcher {
	return dispatcher{log: log, handlers: make(map[int16]Handler), sem: make(chan struct{}, maxInflight)}
}

func (d *dispatcher) dispatch(c *Conn, req *Command) {
	if d.closing.Load() {
		d.reject(c, req, protocol.SystemBusy, "remoting: shutting down; retry on another node")
		return
	}
	select {
	case d.sem <- struct{}{}:
	default:
		d.log.Warn("remoting: too many requests in flight; answering SYSTEM_BUSY",
			"remote", addrString(c.remote), "conn", c.id, "code", req.Code, "limit", cap(d.sem))
		d.reject(c, req, protocol.SystemBusy,
			fmt.Sprintf("remoting: %d requests in flight, the limit; retry later", cap(d.sem)))
		return
	}
	if !d.running.goFunc(func() {
		defer func() { <-d.sem }()
		d.serve(c, req)
	}) {
		<-d.sem
		d.reject(c, req, protocol.SystemBusy, "remoting: shutting down; retry on another node")
	}
}

func (d *dispatcher) reject(c *Conn, req *Command, code int16, remark string) {
	if req.IsOneway() {
		return
	}
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
