package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// LoopFS makes a new ext4 file system of size bytes in a file under a temp
// dir, mounts it on a loop device and returns the mount point: a real disk
// that fills up (ENOSPC, statfs) in tests. No blocks are reserved for root,
// so statfs's available space is what a write can use. It unmounts in
// Cleanup, also when the test failed. Where mounting is impossible (not
// root, no loop device, no mkfs.ext4, mount refused) it skips the test and
// says why; CI runs as root, where it works.
func LoopFS(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop file system: mounting needs root (CI runs the test as root)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("loop file system: no loop device: %v", err)
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skipf("loop file system: %v", err)
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("loop file system: image: %v", err)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("loop file system: mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("loop file system: mount refused here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// NB: a file a failed test left open keeps the mount busy: it is
		// then detached lazily (it goes when the file closes), so that the
		// temp dir can go.
		if syscall.Unmount(mnt, 0) == nil {
			return
		}
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("loop file system: unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// FreeBytes returns the bytes available to writes on the file system
// holding path.
func FreeBytes(t testing.TB, path string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// FillTo allocates a file at path so that about free bytes stay available
// on its file system (fallocate: real blocks, written as zeros if needed).
func FillTo(t testing.TB, path string, free int64) {
	t.Helper()
	n := FreeBytes(t, filepath.Dir(path)) - free
	if n <= 0 {
		t.Fatalf("fill %s: only %d bytes free, want %d left", path, n+free, free)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		t.Fatalf("fill %s with %d bytes: %v", path, n, err)
	}
}
