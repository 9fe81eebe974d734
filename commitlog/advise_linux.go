//go:build linux && (amd64 || arm64)

package commitlog

import "syscall"

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
