package remoting

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"

	"github.com/cloudwego/netpoll"
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
