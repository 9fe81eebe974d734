//go:build linux && (amd64 || arm64)

package commitlog

import (
	"runtime"
	"syscall"
	"unsafe"
)

// adviceChunk is how much one POSIX_FADV_WILLNEED asks for: Linux reads at
// most max(read_ahead_kb, the device's largest request) for one call
// (force_page_cache_ra), 128 KiB on many disks.
const adviceChunk = 64 << 10

// willNeed asks the kernel to read [off, off+n) of f into the page cache
// in the background (posix_fadvise POSIX_FADV_WILLNEED, adviceChunk bytes
// a call), for a File backed by a descriptor; other Files are left alone.
func willNeed(f File, off, n int64) {
	sc, ok := f.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		const posixFadvWillNeed = 3
		for end := off + n; off < end; off += adviceChunk {
			_, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, fd, uintptr(off), uintptr(min(adviceChunk, end-off)), posixFadvWillNeed, 0, 0)
			if errno != 0 {
				return // NB: advice: nothing to do about it
			}
		}
	})
}

// sysPreadv2 is preadv2's system call number (the syscall package has none).
var sysPreadv2 = map[string]uintptr{"amd64": 327, "arm64": 286}[runtime.GOARCH]

// readCached reads into p from off of the file with descriptor fd from the
// page cache only (preadv2 with RWF_NOWAIT): n is what it read, less than
// len(p) when the rest is not in the cache (or at the file's end), and ok
// is false if the kernel cannot read so.
func readCached(fd uintptr, p []byte, off int64) (n int, ok bool) {
	if len(p) == 0 {
		return 0, true
	}
	const rwfNoWait = 8
	iov := syscall.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	for {
		r, _, errno := syscall.Syscall6(sysPreadv2, fd, uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, rwfNoWait)
		switch errno {
		case 0:
			return int(r), true
		case syscall.EAGAIN:
			return 0, true
		case syscall.EINTR:
			continue
		default: // ENOSYS, EOPNOTSUPP: an old kernel, a file system without it
			return 0, false
		}
	}
}
