package remoting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/cloudwego/netpoll"
)

// streamConn is a client's connection read by a goroutine of its own that
// waits in read(2) on Go's own network poller (Conn.readLoop), as the
// floor's client does, instead of netpoll's poller goroutine handing each
// arrival to a worker goroutine: one goroutine hand-off fewer between an
// answer's arrival and its caller. It implements netpoll.Connection for the
// Conn over a *net.TCPConn; the server side stays on netpoll.
type streamConn struct {
	tc *net.TCPConn
	in streamReader
	// out is the write buffer; Flush hands it to the kernel with writev.
	out streamWriter

	mu     sync.Mutex
	closed bool                    // guarded by mu
	cbs    []netpoll.CloseCallback // guarded by mu
}

func newStreamConn(tc *net.TCPConn) *streamConn {
	s := &streamConn{tc: tc}
	s.in = streamReader{s: s, buf: make([]byte, streamReadMin*2)}
	s.out = streamWriter{LinkBuffer: netpoll.NewLinkBuffer(), s: s}
	return s
}

// streamReadMin is the least free room a read(2) is given.
const streamReadMin = 32 << 10

func (s *streamConn) Reader() netpoll.Reader { return &s.in }
func (s *streamConn) Writer() netpoll.Writer { return &s.out }

func (s *streamConn) IsActive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed
}

// SetReadTimeout is not used: a Conn bounds a frame with frameTimeout.
func (s *streamConn) SetReadTimeout(time.Duration) error { return nil }

func (s *streamConn) SetWriteTimeout(d time.Duration) error {
	s.out.timeout = d
	return nil
}
func (s *streamConn) SetIdleTimeout(time.Duration) error { return nil }
func (s *streamConn) SetOnRequest(netpoll.OnRequest) error {
	return errors.New("remoting: streamConn has its own reader")
}
func (s *streamConn) Read(p []byte) (int, error)         { return s.tc.Read(p) }
func (s *streamConn) Write(p []byte) (int, error)        { return s.tc.Write(p) }
func (s *streamConn) LocalAddr() net.Addr                { return s.tc.LocalAddr() }
func (s *streamConn) RemoteAddr() net.Addr               { return s.tc.RemoteAddr() }
func (s *streamConn) SetDeadline(t time.Time) error      { return s.tc.SetDeadline(t) }
func (s *streamConn) SetWriteDeadline(t time.Time) error { return s.tc.SetWriteDeadline(t) }
func (s *streamConn) AddCloseCallback(cb netpoll.CloseCallback) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cbs = append(s.cbs, cb)
	return nil
}

// SetReadDeadline bounds the reads of the frame being read (a Conn's
// frameTimeout); the reader clears it before it waits for the next frame.
func (s *streamConn) SetReadDeadline(t time.Time) error {
	s.in.deadline = !t.IsZero()
	return s.tc.SetReadDeadline(t)
}

// Close closes the socket, which ends a read or write in progress, then
// runs the close callbacks, once.
func (s *streamConn) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cbs := s.cbs
	s.mu.Unlock()
	err := s.tc.Close()
	for _, cb := range cbs {
		_ = cb(s)
	}
	return err
}

// streamReader is netpoll.Reader over the socket: a buffer that read(2)
// fills, whose slices stay valid until Release. Only the connection's
// reader goroutine uses it.
type streamReader struct {
	s        *streamConn
	buf      []byte
	r, w     int  // unread bytes: buf[r:w]
	released int  // buf[:released] may be overwritten: no slice of it is out
	deadline bool // a read deadline is set (SetReadDeadline)
}

// waitFirst waits, without a deadline, for the first byte of a frame.
func (b *streamReader) waitFirst() error {
	if b.w > b.r {
		return nil
	}
	if b.deadline {
		_ = b.s.SetReadDeadline(time.Time{})
	}
	return b.wait(1)
}

// wait reads until n bytes are unread.
func (b *streamReader) wait(n int) error {
	for b.w-b.r < n {
		if err := b.room(n); err != nil {
			return err
		}
		m, err := b.s.tc.Read(b.buf[b.w:])
		b.w += m
		if err != nil && b.w-b.r < n {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				return fmt.Errorf("%w: %w", netpoll.ErrReadTimeout, err)
			case errors.Is(err, io.EOF):
				return fmt.Errorf("%w: %w", netpoll.ErrEOF, err)
			}
			return err
		}
	}
	return nil
}

// room makes sure buf has room for the n unread bytes a frame needs and
// streamReadMin free. Bytes handed out and not released are never moved
// nor overwritten: a new buffer takes the unread ones instead.
func (b *streamReader) room(n int) error {
	if len(b.buf)-b.w >= streamReadMin && len(b.buf)-b.r >= n {
		return nil
	}
	unread := b.w - b.r
	size := len(b.buf)
	for size-unread < max(n-unread, 0)+streamReadMin {
		size *= 2
	}
	if b.released < b.r || size > len(b.buf) {
		nb := make([]byte, size)
		copy(nb, b.buf[b.r:b.w])
		b.buf = nb
	} else {
		copy(b.buf, b.buf[b.r:b.w])
	}
	b.r, b.w, b.released = 0, unread, 0
	return nil
}

func (b *streamReader) Next(n int) ([]byte, error) {
	if err := b.wait(n); err != nil {
		return nil, err
	}
	p := b.buf[b.r : b.r+n : b.r+n]
	b.r += n
	return p, nil
}

func (b *streamReader) Peek(n int) ([]byte, error) {
	if err := b.wait(n); err != nil {
		return nil, err
	}
	return b.buf[b.r : b.r+n : b.r+n], nil
}

func (b *streamReader) Skip(n int) error {
	if err := b.wait(n); err != nil {
		return err
	}
	b.r += n
	return nil
}

func (b *streamReader) Until(delim byte) ([]byte, error) {
	for {
		if i := bytes.IndexByte(b.buf[b.r:b.w], delim); i >= 0 {
			return b.Next(i + 1)
		}
		if err := b.wait(b.w - b.r + 1); err != nil {
			return nil, err
		}
	}
}

func (b *streamReader) ReadString(n int) (string, error) {
	p, err := b.Next(n)
	return string(p), err
}

func (b *streamReader) ReadBinary(n int) ([]byte, error) {
	p, err := b.Next(n)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), p...), nil
}

func (b *streamReader) ReadByte() (byte, error) {
	p, err := b.Next(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

func (b *streamReader) Slice(n int) (netpoll.Reader, error) {
	p, err := b.ReadBinary(n)
	if err != nil {
		return nil, err
	}
	lb := netpoll.NewLinkBuffer()
	_, _ = lb.WriteBinary(p)
	_ = lb.Flush()
	return lb, nil
}

// Release lets the bytes read so far be overwritten.
func (b *streamReader) Release() error {
	if b.r == b.w {
		b.r, b.w = 0, 0
	}
	b.released = b.r
	return nil
}

func (b *streamReader) Len() int { return b.w - b.r }

// streamWriter is netpoll.Writer over the socket: the frames gather in a
// LinkBuffer (small ones copied, large ones referenced) and Flush writes
// them with writev, bounded by the write timeout.
type streamWriter struct {
	*netpoll.LinkBuffer
	s       *streamConn
	timeout time.Duration
	vec     [][]byte
}

func (w *streamWriter) Flush() error {
	if err := w.LinkBuffer.Flush(); err != nil {
		return err
	}
	if w.Len() == 0 {
		return nil
	}
	if w.timeout > 0 {
		_ = w.s.tc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	for w.Len() > 0 {
		// NB: GetBytes gives as many of the buffer's pieces as vec holds,
		// all of them (in a new slice) when it holds none.
		w.vec = w.GetBytes(w.vec[:cap(w.vec)])
		bufs := net.Buffers(w.vec)
		written, err := bufs.WriteTo(w.s.tc)
		clear(w.vec)
		_ = w.Skip(int(written))
		_ = w.LinkBuffer.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// readLoop is a streamConn's reader goroutine: it serves the frames as
// they arrive (onRequest, one frame a call) until the connection closes.
func (c *Conn) readLoop(s *streamConn) {
	for {
		if err := s.in.waitFirst(); err != nil {
			c.readFailed(err)
			return
		}
		_ = c.onRequest(c.ctx, s)
		if c.ctx.Err() != nil {
			return
		}
	}
}

// dialStream connects to addr within timeout (0: none) or ctx.
func dialStream(ctx context.Context, addr string, timeout time.Duration) (*streamConn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("%w: %w", ErrTimeout, err)
		}
		return nil, err
	}
	return newStreamConn(nc.(*net.TCPConn)), nil
}
