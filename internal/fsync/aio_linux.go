//go:build linux && (amd64 || arm64)

package fsync

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's AIO ABI (include/uapi/linux/aio_abi.h), little-endian.
const (
	iocbCmdFsync  = 2
	iocbCmdFdsync = 3
	iocbFlagResfd = 1 << 0
	aioQueueDepth = 256 // calls in flight before the direct path takes over
)

type iocb struct {
	data      uint64 // returned in ioEvent.data: the call's id
	key       uint32
	rwFlags   uint32
	opcode    uint16
	reqprio   int16
	fildes    uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

type ioEvent struct {
	data uint64
	obj  uint64
	res  int64 // 0 or -errno
	res2 int64
}

// engine is the process's AIO context and the calls waiting on it. The
// eventfd counts completions; a reaper goroutine, running only while calls
// wait, reads it (parked in the netpoller) and hands each result to its
// caller.
type engine struct {
	ctx   uintptr  // aio_context_t
	efd   *os.File // nonblocking eventfd, so reads park in the netpoller
	efdNo uint32   // its descriptor; NB: efd.Fd() would make it blocking

	mu        sync.Mutex
	next      uint64
	waiting   map[uint64]chan int64
	reaping   bool   // a reaper runs; it stops once nothing waits
	completed uint64 // calls completed through AIO
}

var (
	engineOnce sync.Once
	theEngine  *engine
	engineErr  error
)

func getEngine() *engine {
	engineOnce.Do(func() {
		var ctx uintptr
		if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, aioQueueDepth, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
			engineErr = fmt.Errorf("io_setup: %w", e)
			return
		}
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
			engineErr = fmt.Errorf("eventfd: %w", err)
			return
		}
		theEngine = &engine{ctx: ctx, efd: os.NewFile(uintptr(fd), "fsync-eventfd"), efdNo: uint32(fd), waiting: make(map[uint64]chan int64)}
	})
	return theEngine
}

// Mode says how this process fsyncs: through AIO, or by system call and why.
func Mode() string {
	if getEngine() == nil {
		return "system call (" + engineErr.Error() + ")"
	}
	return "aio"
}

// AIOCalls returns how many calls have completed through AIO.
func AIOCalls() uint64 {
	e := getEngine()
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.completed
}

var chans = sync.Pool{New: func() any { return make(chan int64, 1) }}

// aioSync runs the call through AIO; handled is false when AIO did not
// take it, and the caller then makes the system call itself.
func aioSync(f File, data bool) (handled bool, err error) {
	e := getEngine()
	if e == nil {
		return false, nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return true, &os.PathError{Op: opName(data), Path: f.Name(), Err: err}
	}
	ch := chans.Get().(chan int64)
	e.mu.Lock()
	e.next++
	id := e.next
	e.waiting[id] = ch
	e.mu.Unlock()
	cb := iocb{data: id, opcode: iocbCmdFsync, flags: iocbFlagResfd, resfd: e.efdNo}
	if data {
		cb.opcode = iocbCmdFdsync
	}
	var errno syscall.Errno
	cerr := rc.Control(func(fd uintptr) {
		cb.fildes = uint32(fd)
		p := &cb
		for {
			// NB: once submitted, the kernel holds its own reference to the
			// file: a Close from here on does not cut the fsync short.
			_, _, errno = unix.Syscall(unix.SYS_IO_SUBMIT, e.ctx, 1, uintptr(unsafe.Pointer(&p)))
			if errno != syscall.EINTR {
				return
			}
		}
	})
	runtime.KeepAlive(&cb)
	if cerr != nil || errno != 0 {
		e.forget(id)
		select {
		case <-ch: // NB: failAll may have answered it meanwhile
		default:
		}
		chans.Put(ch)
		if cerr != nil {
			return true, closedErr(f, data) // NB: Control fails only on a closed file
		}
		return false, nil // NB: EINVAL (no fsync for this file), EAGAIN (queue full): direct
	}
	e.mu.Lock()
	if !e.reaping {
		e.reaping = true
		go e.reap()
	}
	e.mu.Unlock()
	res := <-ch
	chans.Put(ch)
	return true, resultErr(opName(data), f.Name(), res)
}

// resultErr is the error of a completed call: res is 0 or -errno.
func resultErr(op, path string, res int64) error {
	if res < 0 {
		return &os.PathError{Op: op, Path: path, Err: syscall.Errno(-res)}
	}
	return nil
}

// forget drops a call that was never submitted; a reaper left with nothing
// to wait for is woken so that it stops.
func (e *engine) forget(id uint64) {
	e.mu.Lock()
	delete(e.waiting, id)
	wake := e.reaping && len(e.waiting) == 0
	e.mu.Unlock()
	if wake {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = e.efd.Write(one[:])
	}
}

// reap hands completions to their callers until none waits.
func (e *engine) reap() {
	var count [8]byte
	events := make([]ioEvent, 32)
	zero := unix.Timespec{}
	for {
		e.mu.Lock()
		if len(e.waiting) == 0 {
			e.reaping = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		if _, err := e.efd.Read(count[:]); err != nil {
			e.failAll(err)
			continue
		}
		for {
			n, _, errno := unix.Syscall6(unix.SYS_IO_GETEVENTS, e.ctx, 0, uintptr(len(events)),
				uintptr(unsafe.Pointer(&events[0])), uintptr(unsafe.Pointer(&zero)), 0)
			if errno == syscall.EINTR {
				continue
			}
			if errno != 0 {
				e.failAll(errno)
				break
			}
			e.mu.Lock()
			e.completed += uint64(n)
			for _, ev := range events[:n] {
				if ch, ok := e.waiting[ev.data]; ok {
					delete(e.waiting, ev.data)
					ch <- ev.res
				}
			}
			e.mu.Unlock()
			if int(n) < len(events) {
				break
			}
		}
	}
}

// failAll answers every waiting call with err: the completion channel
// itself broke, which never happens short of a kernel bug. The callers do
// not know whether their fsync ran, so they get an error, as from a failed
// fsync.
func (e *engine) failAll(err error) {
	errno, ok := err.(syscall.Errno)
	if !ok {
		errno = syscall.EIO
	}
	e.mu.Lock()
	for id, ch := range e.waiting {
		delete(e.waiting, id)
		ch <- -int64(errno)
	}
	e.mu.Unlock()
}
