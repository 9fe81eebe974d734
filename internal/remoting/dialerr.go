package remoting

import (
	"errors"
	"net"
	"time"

	"github.com/cloudwego/netpoll"
)

// refusedError returns what a failed netpoll dial of addr reports to
// callers: err, unless the connect was refused (or reset), which it says.
//
// NB: netpoll waits for a connecting socket to turn writable and reports a
// hang-up (how a refused connect shows in epoll) as ErrConnClosed,
// "connection has been closed by peer", before it reads SO_ERROR; the
// socket is gone by then. So Go's dialer is asked once more, and reads
// SO_ERROR: "dial tcp ADDR: connect: connection refused" (matching
// syscall.ECONNREFUSED). Should that second dial connect, err stands.
func refusedError(addr string, timeout time.Duration, err error) error {
	if !errors.Is(err, netpoll.ErrConnClosed) {
		return err
	}
	nc, derr := net.DialTimeout("tcp", addr, timeout)
	if derr != nil {
		return derr
	}
	_ = nc.Close()
	return err
}
