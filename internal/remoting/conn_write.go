package remoting

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"

	"github.com/cloudwego/netpoll"
	"golang.org/x/sys/unix"
)

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
	// flushLater: by the flusher; the writer never waits for the network,
	// nor for a flush that does (see queueLater).
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
	if len(body) <= smallBody || mode == flushLater {
		// NB: a flushLater frame is always one buffer of its own: it never
		// waits for a flush that would let the caller reuse its body.
		buf = append(buf, body...)
		body = nil
	}
	if mode != flushLater {
		c.wmu.Lock()
	} else if !c.wmu.TryLock() {
		// NB: its holder may be a flush waiting for a peer that does not
		// read, up to the write timeout: the frame waits in the queue
		// instead of its writer (see queueLater).
		*bp = buf
		return c.queueLater(bp)
	}
	if c.wclosed {
		c.wmu.Unlock()
		*bp = buf[:0]
		framePrefixPool.Put(bp)
		return c.err()
	}
	// NB: whatever the mode becomes, a flushLater frame is never flushed
	// by its writer: it is written without waiting, or left to another
	// goroutine.
	later := mode == flushLater
	if c.inBatchEnd && mode != flushByReader {
		mode = flushByReader // the flush after the batch-end hooks takes it
	}
	err = c.drainLaterLocked()
	w := c.nc.Writer()
	out := buf // what netpoll is given of the frame
	if err == nil && later && c.fd >= 0 && !c.dirty && !c.inBatchEnd && c.busy.Load() <= 1 {
		// NB: a lone answer from a goroutine that answers many (the
		// store's notifier): written here, as a flushSoon frame would be,
		// without waking the flusher; what the socket does not take at
		// once is left to the flusher, so its writer never waits.
		var n int
		n, err = c.writeNoWait(buf)
		if err == nil && n == len(buf) {
			c.framesOut++
			c.flushes++
			c.noWaits++
			c.wmu.Unlock()
			*bp = buf[:0]
			framePrefixPool.Put(bp)
			return nil
		}
		out = buf[n:]
	}
	if err == nil {
		_, err = w.WriteBinary(out)
	}
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
	// copied frames wait for one flush shared with other frames. A
	// flushLater frame is never flushed by its writer (the flusher, or the
	// reader after its batch, does; a lone one went out above as far as the
	// socket took it); a large one is referenced until then, and its
	// buffer is left to the collector instead of the pool.
	referenced := false
	if err == nil {
		switch {
		case !later && (len(body) > 0 || len(buf) > netpoll.BinaryInplaceThreshold),
			mode == flushSoon && c.busy.Load() <= 1:
			err = w.Flush()
			c.dirty = false
			c.flushes++
		default:
			c.dirty = true
			referenced = len(out) > netpoll.BinaryInplaceThreshold
			if mode != flushByReader && !c.kicked {
				c.kicked = true
				c.kickFlusher()
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
		if gone && !c.dialed() {
			// The peer closed the connection, perhaps right after its last
			// requests (a Go client commits its offsets and closes). Stop
			// writing but leave closing to the reader: it still handles
			// the requests that arrived, and netpoll closes the connection
			// once the input is drained.
			return cause
		}
		c.closeWith(cause) // NB: see dialed
		return c.err()
	}
	if !referenced && cap(buf) <= 64<<10 {
		*bp = buf[:0]
		framePrefixPool.Put(bp)
	}
	return nil
}

// maxLater bounds the bytes of frames a connection's flushLater writers
// may queue behind a flush (queueLater): past it the peer, whose answers
// are not leaving, is closed.
const maxLater = 16 << 20

// queueLater queues the frame *bp, which the connection then owns, for
// the next holder of wmu to write ahead of its own (drainLaterLocked), and
// wakes the flusher. Its caller found wmu held: by another writer for a
// moment, or by a flush waiting for a peer that does not read. Over
// maxLater the connection is closed at once (abort), on a goroutine of its
// own.
func (c *Conn) queueLater(bp *[]byte) error {
	if c.ctx.Err() != nil {
		return c.err()
	}
	c.lmu.Lock()
	if c.laterBytes+len(*bp) > maxLater {
		c.lmu.Unlock()
		err := fmt.Errorf("%w: %s reads none of its answers (%d MiB of them wait)", ErrConnClosed, addrString(c.remote), maxLater>>20)
		go c.abort(err)
		return err
	}
	c.later = append(c.later, bp)
	c.laterBytes += len(*bp)
	c.laterN.Store(int32(len(c.later)))
	c.lmu.Unlock()
	c.kickFlusher()
	return nil
}

// drainLaterLocked writes the queued frames (queueLater) to netpoll, in
// the order they were queued, and leaves them for a flush. REQUIRES: c.wmu
// held.
func (c *Conn) drainLaterLocked() error {
	if c.laterN.Load() == 0 {
		return nil
	}
	// NB: the two slices take turns, so that a queue in use does not
	// grow a new one each time it is drained.
	c.lmu.Lock()
	q := c.later
	c.later, c.laterBytes = c.laterSpare, 0
	c.laterN.Store(0)
	c.lmu.Unlock()
	c.laterSpare = nil
	defer func() { clear(q); c.laterSpare = q[:0] }()
	w := c.nc.Writer()
	for _, bp := range q {
		if _, err := w.WriteBinary(*bp); err != nil {
			return err
		}
		c.framesOut++
		c.dirty = true
		// NB: netpoll copied a frame up to its in-place threshold; a
		// larger one it references until flushed, and it is left to the
		// collector.
		if len(*bp) <= netpoll.BinaryInplaceThreshold && cap(*bp) <= 64<<10 {
			*bp = (*bp)[:0]
			framePrefixPool.Put(bp)
		}
	}
	return nil
}

// abort closes the connection at once, with cause: netpoll's Close ends a
// flush that waits for the peer, which closeWith's own flush (of what is
// pending) would wait for first.
func (c *Conn) abort(cause error) {
	_ = c.nc.Close()
	c.closeWith(cause)
}

// writeNoWait writes as much of frame as the socket takes at once, with
// one system call that never waits, and returns how much that was (0 and
// no error when the socket takes none now). REQUIRES: c.wmu held, nothing
// unflushed in netpoll's buffer (not c.dirty): the frame then goes out in
// its place, after every frame written before it; and not c.wclosed.
// NB: c.fd is this connection's socket while wmu is held and wclosed is
// false: netpoll closes the descriptor (its finalizer, the first close
// callback registered, runs last) only after onNetpollClose has set
// wclosed under wmu, so the number cannot have been reused meanwhile.
func (c *Conn) writeNoWait(frame []byte) (int, error) {
	for {
		n, err := unix.SendmsgN(c.fd, frame, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return 0, nil
		}
		return 0, err
	}
}

// kickFlusher wakes the flusher, unless a wake is pending already.
func (c *Conn) kickFlusher() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
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

// flushLocked flushes if there is anything to flush, the queued frames
// first, and unlocks wmu.
func (c *Conn) flushLocked() {
	var err error
	if !c.wclosed {
		err = c.drainLaterLocked()
	}
	if err == nil && c.dirty && !c.wclosed {
		err = c.nc.Writer().Flush()
		c.dirty = false
		c.flushes++
	}
	gone := err != nil && peerGone(err)
	if gone {
		c.wclosed = true
	}
	c.wmu.Unlock()
	if err != nil && (!gone || c.dialed()) {
		c.closeWith(fmt.Errorf("%w: write to %s: %v", ErrConnClosed, addrString(c.remote), err))
	}
}

// dialed reports whether this side dialed the connection (a Client's). Such
// a connection is dead once a write finds its peer gone: no answer will
// come on it, so it closes at once (failing its pending calls; the Client
// dials anew) instead of waiting for the reader to see the hang-up.
// NB: netpoll has been seen to miss that hang-up: in CI a producer failed
// every send for 60 s on such a connection ("remoting: connection closed",
// written but never closed) to a broker killed and restarted on the same
// port (client TestProducer_KillsUnderLoad).
func (c *Conn) dialed() bool {
	_, ok := c.ep.(*Client)
	return ok
}

// peerGone reports whether a write failed because the peer has left:
// netpoll already saw the connection close, or the peer closed or reset it.
// (A write timeout on a live peer is not that.)
func peerGone(err error) bool {
	return errors.Is(err, netpoll.ErrConnClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}
