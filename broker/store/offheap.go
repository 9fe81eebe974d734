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
	b := mapBytes(sizeOf[T](n))
	if b == nil {
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
	size := sizeOf[T](n)
	b := mapBytes(size)
	if b == nil {
		return make([]T, n)
	}
	if size >= hugePage {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // NB: advice; THP may be off
	}
	// NB: touched, not MADV_POPULATE_WRITE: a fault takes only its
	// mapping's lock, where populating holds the process's mmap_lock, and
	// any mmap meanwhile (the Go runtime's heap growing, for one) waited
	// behind it: sends stalled by 2-14 ms.
	for i := 0; i < size; i += 4096 {
		b[i] = 0
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

const hugePage = 2 << 20

func sizeOf[T any](n int) int {
	var zero T
	return int(unsafe.Sizeof(zero)) * n
}

// mapBytes maps size zeroed bytes, or returns nil.
func mapBytes(size int) []byte {
	if size == 0 {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return b
}

// unmapSlice frees a slice mapSlice returned (one on the heap is left to
// the collector). REQUIRES: nothing uses s or a slice of it afterwards.
func unmapSlice[T any](s []T) {
	if cap(s) == 0 {
		return
	}
	var zero T
	s = s[:cap(s)]
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
	// NB: syscall.Munmap frees only a mapping syscall.Mmap made, found by
	// its first and last bytes; for a heap slice it returns EINVAL.
	_ = syscall.Munmap(b)
}
