package remoting

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// call is one request waiting for its response. Whoever removes it from
// Conn.pending (the reader, a timeout, closeWith) completes it, exactly
// once.
type call struct {
	ch       chan result           // a waiting Invoke: cap 1
	cb       func(*Command, error) // Async or Inline
	stop     func() bool           // with cb: stops the context watcher
	deadline int64                 // unix nanos, 0 for none: see Deadline
	inline   bool                  // cb runs where the call completes (Inline)
	pairs    bool                  // the response may keep its ext as ExtPairs (see pairsAnswer)
	idle     bool                  // LongPoll: not counted in busy
	code     int16                 // with cb: finish passes errors through invokeErr with it (no closure per call)
}

// pairsAnswer reports whether the answer to a request with code keeps a
// msgpack ext as Header.ExtPairs rather than a map: a send's, which the
// client reads with SendMessageResponseHeader.FromExtPairs (a map per
// answer was 6% of a producer's CPU), and a pull's
// (PullMessageResponseHeader.FromExtPairs). Every other answer gets its
// map.
func pairsAnswer(code int16) bool {
	return code == protocol.SendMessageV2 || code == protocol.SendBatchMessage || code == protocol.PullMessage
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
	if resp.ExtPairs.Valid() && !cl.pairs {
		resp.ExtFields, resp.ExtPairs = resp.ExtMap(), protocol.ExtPairs{}
	}
	c.finish(cl, resp, nil)
}

// take removes the call registered under opaque; nil if there is none.
func (c *Conn) take(opaque int32) *call {
	c.mu.Lock()
	cl := c.pending[opaque]
	if cl != nil {
		c.unregisterLocked(opaque, cl)
	}
	c.mu.Unlock()
	return cl
}

// unregisterLocked removes cl, registered under opaque, from the pending
// calls, and from the exchanges in progress unless it is a LongPoll call
// (register's converse). REQUIRES: c.mu held.
func (c *Conn) unregisterLocked(opaque int32, cl *call) {
	delete(c.pending, opaque)
	if !cl.idle {
		c.busy.Add(-1)
	}
}

func (c *Conn) finish(cl *call, cmd *Command, err error) {
	if cl.cb == nil {
		cl.ch <- result{cmd, err}
		return
	}
	if cl.stop != nil {
		cl.stop()
	}
	if err != nil {
		err = c.invokeErr(cl.code, err)
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
	if c.sign != nil {
		c.sign(req)
	}
}

// register prepares req and records cl under its opaque. A call with a
// callback also watches ctx: it fails with the context's error when ctx is
// done first.
func (c *Conn) register(ctx context.Context, req *Command, cl *call) error {
	c.prepare(req, false)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.closeErr
	}
	for c.pending[req.Opaque] != nil { // NB: only after the counter wrapped
		req.Opaque = c.opaque.Add(1)
	}
	opaque := req.Opaque
	cl.pairs = pairsAnswer(req.Code)
	c.pending[opaque] = cl
	if !cl.idle {
		c.busy.Add(1)
	}
	if d := cl.deadline; d != 0 {
		lowerTo(&c.soonest, d)
		if c.due != nil {
			lowerTo(c.due, d) // NB: after soonest (see Client.expire)
		}
	}
	if cl.cb != nil && ctx.Done() != nil {
		// NB: set under mu, so finish (which runs after take) sees it.
		cl.stop = context.AfterFunc(ctx, func() {
			if cl := c.take(opaque); cl != nil {
				c.finish(cl, nil, ctxError(ctx))
			}
		})
	}
	return nil
}

func (c *Conn) invokeErr(code int16, err error) error {
	return fmt.Errorf("remoting: %s to %s: %w", protocol.CodeName(code), addrString(c.remote), err)
}

// CallOption changes how one Invoke runs: Deadline, Oneway, Async, Inline,
// NoDial. Options combine (Deadline(t), Inline(cb), NoDial()); a later
// callback replaces an earlier one.
type CallOption struct {
	deadline int64 // unix nanos; 0: none
	cb       func(*Command, error)
	flags    callFlags
}

type callFlags uint8

const (
	callOneway callFlags = 1 << iota
	callInline
	callNoDial
	callLongPoll
)

// Deadline bounds the wait for the response by t as well as by ctx (a zero
// t adds nothing). On a Client's connections the Client's sweeper enforces
// it, every 10 ms (a call times out at most that late), which is much
// cheaper than a timer per call when calls are many; on a Server's, a
// context deadline does.
func Deadline(t time.Time) CallOption {
	if t.IsZero() {
		return CallOption{}
	}
	return CallOption{deadline: t.UnixNano()}
}

// Oneway sends the request with the oneway flag and waits for no response
// (the peer sends none): Invoke returns (nil, nil) once the frame is
// written. It takes no callback.
func Oneway() CallOption { return CallOption{flags: callOneway} }

// Async makes the call asynchronous: Invoke returns (nil, nil) at once
// and cb gets the response or the error (as Invoke would return them)
// exactly once, on a goroutine of its own, which the owner's Close or
// Shutdown waits for. Client.Invoke also dials on that goroutine.
func Async(cb func(*Command, error)) CallOption { return CallOption{cb: cb} }

// Inline is Async with cb run where the call completes: the connection's
// reader (the response), the sweeper (the deadline), or the goroutine
// that failed it (a dial, a write, the close, ctx). cb must not block.
func Inline(cb func(*Command, error)) CallOption {
	return CallOption{cb: cb, flags: callInline}
}

// NoDial has Client.Invoke use only an open connection: with none to the
// address (none yet, still dialing, or closed) it returns an error
// wrapping ErrNotConnected at once, and no callback runs. Conn.Invoke
// ignores it.
func NoDial() CallOption { return CallOption{flags: callNoDial} }

// LongPoll marks a call whose answer the server may hold back for long (a
// pull that waits for messages): while it waits it is not counted as an
// exchange in progress on its connection, so that the connection's other
// frames, and its own request, go out at once when they are the only
// ones instead of waiting for the flusher goroutine (see flushSoon). A
// consumer keeps a pull waiting per queue: without it, every frame of a
// quiet consumer's connection took a goroutine switch more.
func LongPoll() CallOption { return CallOption{flags: callLongPoll} }

var errOnewayCallback = errors.New("remoting: a oneway call takes no callback (Async, Inline)")

// callOptions merges opts.
func callOptions(opts []CallOption) (CallOption, error) {
	var o CallOption
	for _, x := range opts {
		if x.deadline != 0 {
			o.deadline = x.deadline
		}
		if x.cb != nil {
			o.cb = x.cb
			o.flags &^= callInline
		}
		o.flags |= x.flags
	}
	if o.flags&callOneway != 0 && o.cb != nil {
		return o, errOnewayCallback
	}
	return o, nil
}

// Invoke sends req on c and, by default, waits for its response until ctx
// is done (then it returns an error wrapping ErrTimeout for an expired
// deadline, or the context's error) or the connection closes
// (ErrConnClosed); opts change that (Deadline, Oneway, Async, Inline).
// Invoke sets req's Opaque, SerializeType and Flag; req must not be reused
// until the call completes. A response that arrives after the caller gave
// up is dropped.
func (c *Conn) Invoke(ctx context.Context, req *Command, opts ...CallOption) (*Command, error) {
	o, err := callOptions(opts)
	if err != nil {
		return nil, c.invokeErr(req.Code, err)
	}
	return c.do(ctx, req, o)
}

// do runs one call with its merged options.
func (c *Conn) do(ctx context.Context, req *Command, o CallOption) (*Command, error) {
	if o.deadline != 0 && !c.ep.deadlines() {
		// NB: an owner without a sweeper (a Server): a context deadline.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Unix(0, o.deadline))
		o.deadline = 0
		if o.cb == nil {
			defer cancel()
		} else {
			cb := o.cb
			o.cb = func(cmd *Command, err error) { cancel(); cb(cmd, err) }
		}
	}
	switch {
	case o.flags&callOneway != 0:
		return nil, c.oneway(ctx, req)
	case o.cb != nil:
		c.launch(ctx, req, o)
		return nil, nil
	}
	return c.invoke(ctx, req, o)
}

// invoke sends req and waits for its response, bounded by ctx and by
// o's deadline (unix nanos, 0 for none) enforced by the owner's sweeper.
func (c *Conn) invoke(ctx context.Context, req *Command, o CallOption) (*Command, error) {
	if ctx.Err() != nil {
		return nil, c.invokeErr(req.Code, ctxError(ctx))
	}
	cl := &call{ch: make(chan result, 1), deadline: o.deadline, idle: o.flags&callLongPoll != 0}
	if err := c.register(ctx, req, cl); err != nil {
		return nil, c.invokeErr(req.Code, err)
	}
	opaque := req.Opaque
	if err := c.write(req); err != nil {
		c.take(opaque)
		return nil, c.invokeErr(req.Code, err)
	}
	select {
	case r := <-cl.ch:
		if r.err != nil {
			return nil, c.invokeErr(req.Code, r.err)
		}
		return r.cmd, nil
	case <-ctx.Done():
		if c.take(opaque) != nil {
			return nil, c.invokeErr(req.Code, ctxError(ctx))
		}
		r := <-cl.ch // completed while we were giving up
		if r.err != nil {
			return nil, c.invokeErr(req.Code, r.err)
		}
		return r.cmd, nil
	}
}

// expire fails the calls whose deadline is before now with ErrTimeout.
func (c *Conn) expire(now int64) {
	if e := c.soonest.Load(); e == 0 || now <= e {
		return
	}
	var late []*call
	var next int64
	c.mu.Lock()
	for opaque, cl := range c.pending {
		switch d := cl.deadline; {
		case d == 0:
		case d < now:
			c.unregisterLocked(opaque, cl)
			late = append(late, cl)
		case next == 0 || d < next:
			next = d
		}
	}
	c.soonest.Store(next)
	c.mu.Unlock()
	for _, cl := range late {
		c.finish(cl, nil, fmt.Errorf("%w: no response within the call's timeout: %w", ErrTimeout, context.DeadlineExceeded))
	}
}

// launch sends req and has o.cb called exactly once with the response or
// an error (as invoke's): on a goroutine of the owner's, or with Inline
// where the call completes.
func (c *Conn) launch(ctx context.Context, req *Command, o CallOption) {
	cl := &call{inline: o.flags&callInline != 0, deadline: o.deadline, cb: o.cb, code: req.Code, idle: o.flags&callLongPoll != 0}
	var err error
	if ctx.Err() != nil {
		err = ctxError(ctx)
	} else if err = c.register(ctx, req, cl); err == nil {
		opaque := req.Opaque
		if err = c.write(req); err == nil || c.take(opaque) == nil {
			return // under way, or completed already (closed, ctx done)
		}
	}
	c.finish(cl, nil, err)
}

// oneway sends req with the oneway flag and returns once it is written.
func (c *Conn) oneway(ctx context.Context, req *Command) error {
	if ctx.Err() != nil {
		return c.invokeErr(req.Code, ctxError(ctx))
	}
	c.prepare(req, true)
	if err := c.write(req); err != nil {
		return c.invokeErr(req.Code, err)
	}
	return nil
}
