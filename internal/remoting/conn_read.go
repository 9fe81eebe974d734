package remoting

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/sluicemq/sluice/internal/protocol"
)

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
	if c.frameTimeout > 0 && !wholeFrameBuffered(r) {
		// NB: a deadline for the whole frame: netpoll's read timeout bounds
		// each wait (length, header word, header, body) on its own, so a
		// peer sending a byte now and then could hold the reader for ever.
		_ = nc.SetReadDeadline(time.Now().Add(c.frameTimeout))
	}
	cmd, size, err := readFrame(r, c.maxFrame, true)
	wide := asCodeRange(err)
	if err != nil && wide == nil {
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

// badFrameReason names why err ends a connection when the peer is to
// blame (garbage, or a frame not completed in time): a Reason* constant,
// or "" for a connection closed or broken while reading.
func badFrameReason(err error) string {
	switch {
	case errors.Is(err, ErrFrameTooLarge):
		return ReasonTooLarge
	case errors.Is(err, ErrBadFrame):
		return ReasonMalformed
	case errors.Is(err, ErrUnknownSerializeType):
		return ReasonSerializeType
	case errors.Is(err, ErrBadHeader):
		return ReasonBadHeader
	case errors.Is(err, netpoll.ErrReadTimeout):
		return ReasonFrameTimeout
	}
	return ""
}

func (c *Conn) readFailed(err error) {
	c.runBatchEnd() // NB: its answers will not get out; its work is finished
	if reason := badFrameReason(err); reason != "" {
		c.ep.badFrame(c, reason, err)
	} else {
		c.ep.logger().Debug("remoting: connection closed while reading",
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
