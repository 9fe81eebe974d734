//go:build linux && (amd64 || arm64)

package commitlog

import "syscall"

// willNeed asks the kernel to read [off, off+n) of f into the page cache
// in the background (posix_fadvise POSIX_FADV_WILLNEED), for a File backed
// by a descriptor. It reports whether the advice was given.
func willNeed(f File, off, n int64) bool {
	sc, ok := f.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		const posixFadvWillNeed = 3
		_, _, errno = syscall.Syscall6(syscall.SYS_FADVISE64, fd, uintptr(off), uintptr(n), posixFadvWillNeed, 0, 0)
	})
	return err == nil && errno == 0
}
