package store

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The duplicate window's tables live outside the Go heap, in anonymous
// mappings: at 64 bytes a key and up to MaxKeys (2M) keys they are up to
// 128 MiB, which on the heap the collector counted as live and let the
// heap grow past by gc_percent (400). See dedupWindow for figures.

// mapSlice returns a zeroed slice of n Ts in a mapping of its own, or on
// the heap if the mapping fails. Its pages are faulted in as they are
// first touched. Free it with unmapSlice.
// REQUIRES: T holds no pointers: the collector does not look into it.
func mapSlice[T any](n int) []T {
	var zero T
	size := int(unsafe.Sizeof(zero)) * n
	if size == 0 {
		return make([]T, n)
	}
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]T, n) // NB: as make would, short of memory
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// mapSliceReady is mapSlice with the pages faulted in now, in huge pages
// where the kernel has them (madvise MADV_HUGEPAGE): for the window's
// preparer, off the put path.
// NB: a page fault is dear on this project's VMs: 11 µs for a 4 KiB page
// of a fresh mapping, 0.25 µs for a 4 KiB share of a huge page. Filling
// the window to 2M keys faulted 40,800 times and cost 487-500 ns of CPU an
// insert on the put path; with the chunks and tables made here, 25,500
// faults (the chunks', off the put path) and 248-268 ns
// (BenchmarkDedupFill). Faulting huge pages on the put path instead
// stalled it by 12-16 ms.
func mapSliceReady[T any](n int) []T {
	s := mapSlice[T](n)
	b := bytesOf(s)
	if len(b) >= hugePage {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // NB: advice; THP may be off
	}
	// NB: touched, not MADV_POPULATE_WRITE: a fault takes only its
	// mapping's lock, where populating holds the process's mmap_lock, and
	// any mmap meanwhile (the Go runtime's heap growing, for one) waited
	// behind it: sends stalled by 2-14 ms.
	for i := 0; i < len(b); i += pageSize {
		b[i] = 0
	}
	return s
}

const hugePage = 2 << 20

var pageSize = syscall.Getpagesize()

// bytesOf is the memory of s up to its capacity, as bytes.
func bytesOf[T any](s []T) []byte {
	if cap(s) == 0 {
		return nil
	}
	var zero T
	s = s[:cap(s)]
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

// unmapSlice frees a slice mapSlice returned (one on the heap is left to
// the collector). REQUIRES: nothing uses s or a slice of it afterwards.
func unmapSlice[T any](s []T) {
	if b := bytesOf(s); b != nil {
		// NB: syscall.Munmap frees only a mapping syscall.Mmap made, found
		// by its first and last bytes; for a heap slice it returns EINVAL.
		_ = syscall.Munmap(b)
	}
}
