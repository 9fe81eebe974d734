//go:build linux && (amd64 || arm64)

package commitlog

import (
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SyscallConn lets the warmer give its advice through a recorded file too.
func (f *warmFile) SyscallConn() (syscall.RawConn, error) {
	return f.File.(interface {
		SyscallConn() (syscall.RawConn, error)
	}).SyscallConn()
}

// resident reports how many of the pages of [off, off+n) of the file at
// path are in the page cache (mincore on a mapping of the file).
func resident(t *testing.T, path string, off, n int64) int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), off, int(n), syscall.PROT_READ, syscall.MAP_SHARED)
	require.NoError(t, err)
	defer syscall.Munmap(m)
	vec := make([]byte, (n+4095)/4096)
	_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(n), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno)
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return in
}

// firstMissing returns the first page of [off, off+n) of the file at path
// that is not in the page cache, -1 if none.
func firstMissing(t *testing.T, path string, off, n int64) int64 {
	t.Helper()
	for p := off; p < off+n; p += 4096 {
		if resident(t, path, p, 4096) == 0 {
			return p
		}
	}
	return -1
}

// evict drops the file's clean pages from the page cache (POSIX_FADV_DONTNEED).
func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	const posixFadvDontNeed = 4
	_, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, posixFadvDontNeed, 0, 0)
	require.Zero(t, errno)
}

// diskDir returns a directory for the test's segments on a file system
// whose clean pages POSIX_FADV_DONTNEED evicts: t.TempDir(), or, where that
// is a tmpfs (whose pages are the files themselves), a directory under the
// package's own.
func diskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	const tmpfsMagic = 0x01021994
	if st.Type != tmpfsMagic {
		return dir
	}
	dir, err := os.MkdirTemp(".", "warm-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestWarm_ReadsBackEvictedPages: warm pages the kernel evicted are read
// back ahead of the appends, not one page at a time by the appends that
// write into them (see readAhead): at the start of a segment, and in its
// last pieces, where the warmer has nothing left to warm.
func TestWarm_ReadsBackEvictedPages(t *testing.T) {
	const seg, ahead = 16 << 20, 6 << 20
	dir := diskDir(t)
	l, fs := openWarm(t, dir, seg, ahead)
	defer l.Close()
	path := segmentPath(dir, 0)
	var ws []want
	for _, from := range []int64{100_000, seg - 4<<20} {
		for int64(l.Next()) < from {
			ws = append(ws, appendOne(t, l, 25000, uint64(len(ws))))
		}
		end := int64(l.Next())
		require.Eventually(t, func() bool {
			return fs.covered(path, (end+4095)&^4095, min(seg, end+ahead-warmPiece))
		}, 10*time.Second, 5*time.Millisecond, "the warmer did not cover [end, end+ahead-1MiB)")
		require.NoError(t, l.WaitDurable(t.Context(), l.Next()))

		// The warm pages go, as under memory pressure. NB: evicted again
		// while a wake from the appends above reads some back.
		gone := (end + warmPiece) &^ 4095
		require.Eventually(t, func() bool {
			evict(t, path)
			return resident(t, path, gone, readAheadSize) == 0
		}, 10*time.Second, 10*time.Millisecond, "precondition: the warm pages are evicted")

		// A piece of appends wakes the warmer, which asks for the pages ahead.
		// NB: its last wake saw the log end at most a piece before the final
		// one (else the appends would have woken it again), so its advice
		// covers the piece past the final end, whichever wake it was.
		for int64(l.Next()) < end+warmPiece+4096 {
			ws = append(ws, appendOne(t, l, 32<<10, uint64(len(ws))))
		}
		next := (int64(l.Next()) + 4095) &^ 4095
		require.LessOrEqual(t, next+warmPiece, gone+readAheadSize, "the pages checked were evicted")
		if !assert.Eventually(t, func() bool {
			return resident(t, path, next, warmPiece-4096) == warmPiece/4096-1
		}, 10*time.Second, 5*time.Millisecond) {
			t.Fatalf("the warm pages ahead of the appends were not read back: %d of %d resident, the first missing at %d; log end %d, the warmer's next wake at %d",
				resident(t, path, next, warmPiece-4096), warmPiece/4096-1, firstMissing(t, path, next, warmPiece-4096), l.Next(), l.warm.wakeAt.Load())
		}
	}
	requireRecords(t, l, ws)
}
