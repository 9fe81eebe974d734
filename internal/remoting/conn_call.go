package remoting

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/internal/protocol"
)

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
