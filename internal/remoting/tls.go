package remoting

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/cloudwego/netpoll"
	"golang.org/x/sys/unix"

	"github.com/sluicemq/sluice/internal/protocol"
)

// TLS on netpoll. netpoll reads and writes file descriptors itself, so it
// cannot carry crypto/tls. A TLS connection is served on a path of its
// own that ends in the same request core: crypto/tls terminates the
// connection on two goroutines (a pump each way) that copy the plaintext
// to one end of a socketpair; the other end is a netpoll connection that
// the server adopts like an accepted one (with the TLS peer's address), so
// framing, dispatch, ACL and ordering are the same code.
//
//	peer ──TLS── tls.Conn ⇄ pumps ⇄ socketpair ⇄ netpoll Conn (request core)
//
// With TLS the server accepts on a Go listener and reads the first byte
// of each connection without consuming it (MSG_PEEK): 0x16 starts a TLS
// handshake; anything else is plaintext, refused in enforcing mode and, in
// permissive mode, handed to netpoll as it is (the socket itself, no
// copies). The client side dials with crypto/tls and uses the same pumps.

// TLS modes of a Server (RocketMQ's; disabled is a nil ServerOptions.TLS).
const (
	TLSPermissive = "permissive" // TLS and plaintext on one port
	TLSEnforcing  = "enforcing"  // TLS only
)

// ReasonPlaintextRefused is the peer-log reason of a plaintext connection
// an enforcing server closed.
const ReasonPlaintextRefused = "plaintext_refused"

// tlsHandshakeByte starts every TLS connection (a handshake record).
const tlsHandshakeByte = 0x16

// ServerTLS configures a Server's TLS.
type ServerTLS struct {
	Mode   string      // TLSPermissive or TLSEnforcing
	Config *tls.Config // certificates; ClientAuth for client certificates
}

// startTLS listens on a Go listener and starts acceptLoop.
// REQUIRES: s.mu held, state serverNew.
func (s *Server) startTLS() error {
	if s.opts.TLS.Mode != TLSPermissive && s.opts.TLS.Mode != TLSEnforcing {
		return fmt.Errorf("remoting: TLS mode %q: want %s or %s", s.opts.TLS.Mode, TLSPermissive, TLSEnforcing)
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("remoting: listen on %s: %w", s.addr, err)
	}
	s.tln, s.state = ln, serverRunning
	s.pending = make(map[net.Conn]struct{})
	go s.acceptLoop()
	return nil
}

// acceptLoop accepts until the listener closes; each connection is
// classified (and its handshake run) on a goroutine of its own.
func (s *Server) acceptLoop() {
	defer close(s.served)
	for {
		conn, err := s.tln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.opts.Logger.Warn("remoting: accept failed; no more connections on this port", "addr", s.addr, "err", err)
			}
			return
		}
		if !s.trackPending(conn, true) || !s.bg.goFunc(func() { s.classify(conn) }) {
			s.trackPending(conn, false)
			_ = conn.Close()
		}
	}
}

// trackPending adds or removes a connection not yet handed to netpoll
// (Shutdown closes those); adding fails once the server stops.
func (s *Server) trackPending(conn net.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.pending, conn)
		return true
	}
	if s.state != serverRunning {
		return false
	}
	s.pending[conn] = struct{}{}
	return true
}

// classify reads the connection's first byte and serves it as TLS or as
// plaintext, or refuses it.
func (s *Server) classify(conn net.Conn) {
	defer s.trackPending(conn, false)
	remote := conn.RemoteAddr()
	ip := addrPort(remote).Addr()
	if s.opts.FrameTimeout > 0 {
		_ = conn.SetDeadline(time.Now().Add(s.opts.FrameTimeout))
	}
	first, err := peekByte(conn)
	if err != nil {
		_ = conn.Close()
		return
	}
	if first != tlsHandshakeByte {
		if s.opts.TLS.Mode == TLSEnforcing {
			s.plaintextRefused.Add(1)
			s.peers.event(time.Now(), slog.LevelWarn, ip, ReasonPlaintextRefused,
				"remoting: plaintext connection refused: this port enforces TLS (tls.mode enforcing); the client must use TLS",
				"remote", addrString(remote))
			answerPlaintext(conn, s.opts.MaxFrameSize)
			_ = conn.Close()
			return
		}
		fd, err := detachFD(conn)
		_ = conn.Close()
		if err != nil {
			s.opts.Logger.Warn("remoting: cannot hand a plaintext connection to the event loop", "remote", addrString(remote), "err", err)
			return
		}
		s.adoptFD(fd, remote)
		return
	}
	tc := tls.Server(conn, s.opts.TLS.Config)
	if err := tc.HandshakeContext(s.baseCtx); err != nil {
		s.handshakeFailures.Add(1)
		s.peers.event(time.Now(), slog.LevelWarn, ip, ReasonTLSHandshake, "remoting: TLS handshake failed",
			"remote", addrString(remote), "err", err)
		_ = conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	fd, err := s.bg.pump(tc)
	if err != nil {
		s.opts.Logger.Warn("remoting: cannot serve a TLS connection", "remote", addrString(remote), "err", err)
		_ = tc.Close()
		return
	}
	s.adoptFD(fd, remote)
}

// PlaintextRefusedRemark is the answer to a plaintext request on a port
// that enforces TLS.
const PlaintextRefusedRemark = "this port enforces TLS (tls.mode enforcing) and the request came in plaintext: " +
	"connect with TLS (Sluice's tools: --tls, and --tls-ca FILE or --tls-insecure for a self-signed certificate; " +
	"Sluice's client: client.WithTLS; the official clients: WithTls(true) / setUseTLS(true))"

// answerPlaintext answers the plaintext request that opens conn, on a port
// that enforces TLS, with SYSTEM_ERROR and PlaintextRefusedRemark, so that
// the client reports why, not "connection closed". Only the frame's header
// is read (within the connection's deadline); anything that is no
// RocketMQ request (a oneway one, garbage, another protocol) gets nothing.
func answerPlaintext(conn net.Conn, maxFrame int) {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrameSize
	}
	var pre [framePrefixLen]byte
	if _, err := io.ReadFull(conn, pre[:]); err != nil {
		return
	}
	length := int32(binary.BigEndian.Uint32(pre[:4]))
	if checkLength(length, maxFrame) != nil {
		return
	}
	st, codec, hl, err := checkHeaderWord(binary.BigEndian.Uint32(pre[4:]), length)
	if err != nil {
		return
	}
	hdr := make([]byte, hl)
	if _, err := io.ReadFull(conn, hdr); err != nil {
		return
	}
	req := &Command{SerializeType: st}
	if err := codec.DecodeHeader(hdr, &req.Header); err != nil || req.Flag&(FlagResponse|FlagOneway) != 0 {
		return
	}
	frame, err := EncodeFrame(NewResponse(req, protocol.SystemError, PlaintextRefusedRemark))
	if err != nil {
		return
	}
	_, _ = conn.Write(frame)
}

// ReasonTLSHandshake is the peer-log reason of a failed TLS handshake.
const ReasonTLSHandshake = "tls_handshake"

// adoptFD serves fd as a connection from remote: what onPrepare,
// onConnect and the event loop's OnRequest do for an accepted one.
func (s *Server) adoptFD(fd int, remote net.Addr) {
	nc, err := netpoll.NewFDConnection(fd)
	if err != nil {
		_ = syscall.Close(fd)
		s.opts.Logger.Warn("remoting: cannot register a connection", "remote", addrString(remote), "err", err)
		return
	}
	ctx := s.prepare(nc, remote)
	ctx = s.onConnect(ctx, nc)
	if connFrom(ctx) == nil {
		return
	}
	if s.opts.WriteTimeout > 0 {
		_ = nc.SetWriteTimeout(s.opts.WriteTimeout)
	}
	_ = nc.SetOnRequest(func(_ context.Context, nc netpoll.Connection) error { return s.onRequest(ctx, nc) })
}

// peekByte waits for the connection's first byte and returns it without
// consuming it.
func peekByte(conn net.Conn) (byte, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0, errors.New("remoting: not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var b [1]byte
	var n int
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return b[0], nil
}

// detachFD returns a descriptor of conn's socket of its own (close-on-exec);
// conn can then be closed.
func detachFD(conn net.Conn) (int, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1, errors.New("remoting: not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return fd, derr
}

// pump connects a TLS connection to a new socketpair and returns the
// pair's other end for netpoll; two member goroutines of g copy each way
// until either side closes, then close both.
func (g *group) pump(tc *tls.Conn) (int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socketpair: %w", err)
	}
	f := os.NewFile(uintptr(fds[1]), "tls-pump")
	pc, err := net.FileConn(f) // NB: a duplicate descriptor; f is closed below
	_ = f.Close()
	if err != nil {
		_ = unix.Close(fds[0])
		return -1, err
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = tc.Close()
			_ = pc.Close()
		})
	}
	copyOne := func(dst io.Writer, src io.Reader) func() {
		return func() {
			_, _ = io.Copy(dst, src)
			stop()
		}
	}
	if !g.goFunc(copyOne(pc, tc)) {
		stop()
		_ = unix.Close(fds[0])
		return -1, ErrClosed
	}
	if !g.goFunc(copyOne(tc, pc)) {
		stop()
		_ = unix.Close(fds[0])
		return -1, ErrClosed
	}
	return fds[0], nil
}

// closePending closes the connections not yet handed to netpoll (during
// Shutdown: a handshake in progress must not hold it).
func (s *Server) closePending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.pending {
		_ = c.Close()
	}
}

// dialTLS dials addr with crypto/tls and returns the netpoll connection
// of its plaintext side.
func (c *Client) dialTLS(ctx context.Context, addr string, timeout time.Duration) (netpoll.Connection, net.Addr, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: c.opts.TLS}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	tc := conn.(*tls.Conn)
	fd, err := c.bg.pump(tc)
	if err != nil {
		_ = tc.Close()
		return nil, nil, err
	}
	nc, err := netpoll.NewFDConnection(fd)
	if err != nil {
		_ = unix.Close(fd)
		return nil, nil, err
	}
	return nc, tc.RemoteAddr(), nil
}
