//go:build linux && (amd64 || arm64)

package fsync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

func completed(t *testing.T) uint64 {
	t.Helper()
	if getEngine() == nil {
		t.Fatalf("no AIO on this Linux machine: %s", Mode())
	}
	return AIOCalls()
}

// waitReaperStopped fails unless the reaper stops once nothing waits.
func waitReaperStopped(t *testing.T) {
	t.Helper()
	e := getEngine()
	for deadline := time.Now().Add(5 * time.Second); ; {
		e.mu.Lock()
		reaping, waiting := e.reaping, len(e.waiting)
		e.mu.Unlock()
		if !reaping && waiting == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reaper still running 5 s after the last call (%d waiting)", waiting)
		}
		time.Sleep(time.Millisecond)
	}
}

// The structures the kernel reads and writes have its sizes (aio_abi.h).
func TestABISizes(t *testing.T) {
	if n := unsafe.Sizeof(iocb{}); n != 64 {
		t.Errorf("iocb is %d bytes, the kernel's 64", n)
	}
	if n := unsafe.Sizeof(ioEvent{}); n != 32 {
		t.Errorf("io_event is %d bytes, the kernel's 32", n)
	}
	if off := unsafe.Offsetof(iocb{}.fildes); off != 20 {
		t.Errorf("iocb.fildes at %d, the kernel's 20", off)
	}
	if off := unsafe.Offsetof(iocb{}.resfd); off != 60 {
		t.Errorf("iocb.resfd at %d, the kernel's 60", off)
	}
}

func TestMode(t *testing.T) {
	if m := Mode(); m != "aio" {
		t.Fatalf("Mode() = %q: this kernel should take fsyncs through AIO", m)
	}
}

// Every call on a regular file goes through AIO, from many goroutines at
// once, and each caller gets its own answer.
func TestConcurrentCallsUseAIO(t *testing.T) {
	dir := t.TempDir()
	const goroutines, calls = 32, 20
	before := completed(t)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for g := range goroutines {
		wg.Go(func() {
			f, err := os.Create(filepath.Join(dir, fmt.Sprint(g)))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for i := range calls {
				if _, err := f.Write([]byte("record")); err != nil {
					errs <- err
					return
				}
				sync := Datasync
				if i%2 == 1 {
					sync = Sync
				}
				if err := sync(f); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := completed(t) - before; got < goroutines*calls {
		t.Errorf("%d calls completed through AIO, want %d", got, goroutines*calls)
	}
	waitReaperStopped(t)
}

// A call that AIO refuses (a pipe has no fsync) leaves no reaper behind.
func TestRefusedCallStopsReaper(t *testing.T) {
	w := pipeWriter(t)
	before := completed(t)
	if err := Datasync(w); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("Datasync of a pipe: %v, want EINVAL", err)
	}
	if got := completed(t); got != before {
		t.Errorf("a refused call completed through AIO (%d -> %d)", before, got)
	}
	waitReaperStopped(t)
}

func TestResultErr(t *testing.T) {
	if err := resultErr("fdatasync", "seg", 0); err != nil {
		t.Errorf("res 0: %v", err)
	}
	err := resultErr("fdatasync", "seg", -int64(syscall.EIO))
	var pe *os.PathError
	if !errors.Is(err, syscall.EIO) || !errors.As(err, &pe) || pe.Op != "fdatasync" || pe.Path != "seg" {
		t.Errorf("res -EIO: %v, want fdatasync seg: EIO", err)
	}
}
