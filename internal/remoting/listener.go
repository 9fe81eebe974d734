package remoting

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/cloudwego/netpoll"
)

// listener is the plaintext server's netpoll listener.
//
// NB: netpoll's own (CreateListener) closes its socket twice on Close: by
// number, then through the os.File the number came from; and again on
// every further Close (netpoll's server closes it, and so did Shutdown).
// A descriptor another goroutine opened in between took the freed number
// and was closed in its place: in a CI run a broker's store then failed
// to write a consume queue file (EBADF), and a file reopened on that
// number meanwhile would have taken the writes meant for the first. This
// one closes each descriptor once, through its owner.
type listener struct {
	tcp  *net.TCPListener
	file *os.File // a duplicate of tcp's socket, non-blocking: what the event loop polls and accepts on
	fd   int

	once sync.Once
	err  error
}

var _ netpoll.Listener = (*listener)(nil)

// listen listens on addr (TCP) for a netpoll event loop.
func listen(addr string) (*listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	tcp := ln.(*net.TCPListener)
	f, err := tcp.File()
	if err != nil {
		_ = tcp.Close()
		return nil, err
	}
	// NB: File's descriptor is the number the event loop uses; f keeps
	// owning it. Fd is called once: it puts the file into blocking mode,
	// undone here.
	fd := int(f.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = f.Close()
		_ = tcp.Close()
		return nil, err
	}
	return &listener{tcp: tcp, file: f, fd: fd}, nil
}

// Fd is the descriptor the event loop polls.
func (l *listener) Fd() int { return l.fd }

// Addr is the listening address.
func (l *listener) Addr() net.Addr { return l.tcp.Addr() }

// Accept takes a pending connection, or returns (nil, nil) when there is
// none (what netpoll's event loop expects).
func (l *listener) Accept() (net.Conn, error) {
	fd, sa, err := syscall.Accept4(l.fd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return nil, nil
	case err != nil:
		return nil, err
	}
	// NB: netpoll sets TCP_NODELAY only on the connections its own
	// listener accepts. Like netpoll, a failure (a peer already gone) is
	// left to the connection's first read or write.
	_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	return &acceptedConn{fd: fd, local: l.tcp.Addr(), remote: sockaddrAddr(sa)}, nil
}

// Close closes the socket, once; later calls return the first's result.
func (l *listener) Close() error {
	l.once.Do(func() { l.err = errors.Join(l.file.Close(), l.tcp.Close()) })
	return l.err
}

func sockaddrAddr(sa syscall.Sockaddr) net.Addr {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	}
	return &net.TCPAddr{}
}

// acceptedConn hands an accepted socket to netpoll, which reads only its
// descriptor and addresses and owns the descriptor from then on (its
// connection closes it); the rest of net.Conn is never called.
type acceptedConn struct {
	fd            int
	local, remote net.Addr
}

var _ netpoll.Conn = (*acceptedConn)(nil)

var errAcceptedConn = errors.New("remoting: an accepted socket is used through its netpoll connection")

func (c *acceptedConn) Fd() int                          { return c.fd }
func (c *acceptedConn) LocalAddr() net.Addr              { return c.local }
func (c *acceptedConn) RemoteAddr() net.Addr             { return c.remote }
func (c *acceptedConn) Read([]byte) (int, error)         { return 0, errAcceptedConn }
func (c *acceptedConn) Write([]byte) (int, error)        { return 0, errAcceptedConn }
func (c *acceptedConn) Close() error                     { return errAcceptedConn }
func (c *acceptedConn) SetDeadline(time.Time) error      { return errAcceptedConn }
func (c *acceptedConn) SetReadDeadline(time.Time) error  { return errAcceptedConn }
func (c *acceptedConn) SetWriteDeadline(time.Time) error { return errAcceptedConn }
