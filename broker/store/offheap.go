package store

import (
	"syscall"
	"unsafe"
)

// The duplicate window's tables live outside the Go heap, in anonymous
// mappings: at 64 bytes a key and up to MaxKeys (2M) keys they are up to
// 128 MiB, which on the heap the collector counted as live and let the
// heap grow past by gc_percent (400). See dedupWindow for figures.

// mapSlice returns a zeroed slice of n Ts in a mapping of its own, or on
// the heap if the mapping fails. Free it with unmapSlice.
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
