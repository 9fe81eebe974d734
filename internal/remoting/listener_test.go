package remoting

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/stretchr/testify/require"
)

// TestListener_ClosesItsOwnDescriptorsOnce: a file opened after the
// listener closed, on a number the listener freed, survives the listener's
// later Close calls (netpoll's listener closed its number again on every
// Close, and twice in the first).
func TestListener_ClosesItsOwnDescriptorsOnce(t *testing.T) {
	ln, err := listen("127.0.0.1:0")
	require.NoError(t, err)
	testClosesOnce(t, ln)
}

func testClosesOnce(t *testing.T, ln netpoll.Listener) {
	polled := ln.Fd()
	require.NoError(t, ln.Close())
	// NB: open takes the lowest free number: among the first files is one
	// on the number the event loop polled, unless something else in the
	// process opened descriptors meanwhile.
	var files []*os.File
	for i := 0; i < 8 && (len(files) == 0 || int(files[len(files)-1].Fd()) != polled); i++ {
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		require.NoError(t, err)
		defer f.Close()
		files = append(files, f)
	}
	require.Equal(t, polled, int(files[len(files)-1].Fd()), "a file on the listener's number")
	_ = ln.Close()
	for _, f := range files {
		_, err := f.Write([]byte("still mine"))
		require.NoError(t, err, "file on %d", f.Fd())
	}
}

// TestListener_AcceptsWithNoDelay: an accepted socket is non-blocking,
// close-on-exec and has Nagle off, as netpoll's own listener made them.
func TestListener_AcceptsWithNoDelay(t *testing.T) {
	ln, err := listen("127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := ln.Accept()
	require.NoError(t, err)
	require.Nil(t, c, "nothing pending: (nil, nil)")
	d, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer d.Close()
	require.Eventually(t, func() bool { c, err = ln.Accept(); return c != nil || err != nil }, 5*time.Second, time.Millisecond)
	require.NoError(t, err)
	fd := c.(*acceptedConn).Fd()
	defer syscall.Close(fd)
	nodelay, err := syscall.GetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
	require.NoError(t, err)
	require.Equal(t, 1, nodelay)
	flags, err := fcntl(fd, syscall.F_GETFL)
	require.NoError(t, err)
	require.NotZero(t, flags&syscall.O_NONBLOCK)
	fdflags, err := fcntl(fd, syscall.F_GETFD)
	require.NoError(t, err)
	require.NotZero(t, fdflags&syscall.FD_CLOEXEC)
	require.Equal(t, d.LocalAddr().String(), c.RemoteAddr().String())
	require.Equal(t, ln.Addr().String(), c.LocalAddr().String())
}

func fcntl(fd, cmd int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
