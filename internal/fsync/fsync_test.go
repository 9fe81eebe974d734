package fsync

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestDatasyncAndSync(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	if err := Datasync(f); err != nil {
		t.Fatalf("Datasync: %v", err)
	}
	if err := Sync(f); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SyncDir of a missing directory: %v, want ErrNotExist", err)
	}
}

func TestClosedFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for name, fn := range map[string]func(File) error{"Datasync": Datasync, "Sync": Sync} {
		if err := fn(f); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s of a closed file: %v, want os.ErrClosed", name, err)
		}
	}
}

// pipeWriter returns the write end of a pipe, a file without fsync.
func pipeWriter(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return w
}

// A pipe has no fsync: AIO refuses it at submission and the system call
// gives the error, EINVAL, as it would without AIO.
func TestNoFsync(t *testing.T) {
	w := pipeWriter(t)
	if err := Datasync(w); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Datasync of a pipe: %v, want EINVAL", err)
	}
	var pe *os.PathError
	if err := Sync(w); !errors.Is(err, syscall.EINVAL) || !errors.As(err, &pe) || pe.Op != "fsync" {
		t.Errorf("Sync of a pipe: %v, want an fsync PathError with EINVAL", err)
	}
}
