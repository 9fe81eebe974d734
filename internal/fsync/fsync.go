// Package fsync makes files durable without keeping a scheduler slot.
//
// fsync(2) and fdatasync(2) block their thread until the disk answers,
// often milliseconds. Go counts a goroutine in such a system call as still
// holding its P (its share of GOMAXPROCS) until sysmon, which checks every
// 20 µs to 10 ms, hands the P to another thread: on a two-core machine the
// other goroutines of that P wait meanwhile, and each hand-over wakes threads.
// Measured in the broker at 10,000 msgs/s (mqbench e2e): the periodic
// fsyncs of the log and the checkpoints put 1-7 ms stalls into the tail.
//
// On Linux (amd64, arm64) Datasync and Sync submit the call to the kernel's
// AIO (io_submit with IOCB_CMD_FDSYNC or IOCB_CMD_FSYNC, Linux 4.18 and
// later): a kernel worker runs the very same fsync, and the goroutine waits
// on an eventfd in the runtime's netpoller, holding no P. Where AIO cannot
// take the call (no AIO, a file type without fsync, a full queue) it runs
// the system call directly; the result is the same either way.
package fsync

import (
	"os"
	"syscall"
)

// File is what a call needs of a file; *os.File has it, and so does any
// type that embeds one.
type File interface {
	SyscallConn() (syscall.RawConn, error)
	Name() string
}

// Datasync makes f's data durable, and its size when it changed:
// fdatasync(2).
func Datasync(f File) error { return run(f, true) }

// Sync makes f durable, metadata included: fsync(2). It works on
// directories too (entries created, renamed or removed in them).
func Sync(f File) error { return run(f, false) }

// SyncDir fsyncs the directory at path, so that the entries created,
// renamed or removed in it are durable.
func SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = Sync(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func run(f File, data bool) error {
	if handled, err := aioSync(f, data); handled {
		return err
	}
	return direct(f, data)
}

// direct is the plain system call.
func direct(f File, data bool) error {
	call := syscall.Fsync
	if data {
		call = syscall.Fdatasync
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return &os.PathError{Op: opName(data), Path: f.Name(), Err: err}
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = call(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return closedErr(f, data) // NB: Control fails only on a closed file
	}
	if serr != nil {
		return &os.PathError{Op: opName(data), Path: f.Name(), Err: serr}
	}
	return nil
}

// closedErr is the error of a call on a closed file, as os.File's own.
func closedErr(f File, data bool) error {
	return &os.PathError{Op: opName(data), Path: f.Name(), Err: os.ErrClosed}
}

func opName(data bool) string {
	if data {
		return "fdatasync"
	}
	return "fsync"
}
