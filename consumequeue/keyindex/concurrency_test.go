package keyindex

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIndex_ConcurrentQuery runs queries, Sync and retention while the
// dispatcher puts and rolls files (meant for -race). Every position a
// query returns must have been put under that key.
func TestIndex_ConcurrentQuery(t *testing.T) {
	const n, keys = 3000, 5
	x := openIdx(t, t.TempDir(), 7, 64)
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for r := range 3 {
		wg.Go(func() {
			for i := 0; !done.Load(); i++ {
				k := (r + i) % keys
				got, err := x.Query(Key("T", fmt.Sprintf("K%d", k)), 0, 1<<62, 50)
				if err != nil {
					errc <- err
					return
				}
				for j, p := range got {
					if p%100 != 0 || int(p/100)%keys != k || (j > 0 && p >= got[j-1]) {
						errc <- fmt.Errorf("K%d: bad result %v", k, got)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; !done.Load(); i++ {
			if err := x.Sync(); err != nil {
				errc <- err
				return
			}
			if err := x.DeleteBelowPos(x.MaxPos() - 1000); err != nil {
				errc <- err
				return
			}
		}
	})
	for i := range n {
		if err := x.Put(Key("T", fmt.Sprintf("K%d", i%keys)), int64(i)*100, t0+int64(i)); err != nil {
			errc <- err
			break
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	got, err := x.Query(Key("T", "K4"), 0, 1<<62, 3)
	require.NoError(t, err)
	require.Equal(t, []int64{(n - 1) * 100, (n - 6) * 100, (n - 11) * 100}, got)
}

// TestIndex_SyncLeavesPutsAlone: while Sync's fsync runs, Puts and Queries
// go on. Only a Put that seals the file waits for it (the two fsyncs share
// a descriptor), and the seal's closing the handle does not fail Sync.
func TestIndex_SyncLeavesPutsAlone(t *testing.T) {
	x := openIdx(t, t.TempDir(), 7, 4) // 3 entries per file
	require.NoError(t, x.Put("k0", 0, t0))
	entered, release := make(chan struct{}), make(chan struct{})
	x.syncFile = func(f File) error {
		close(entered)
		<-release
		return f.Sync()
	}
	synced := make(chan error, 1)
	go func() { synced <- x.Sync() }()
	<-entered

	put := make(chan error, 1)
	go func() { put <- x.Put("k1", 100, t0) }()
	select {
	case err := <-put:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("Put waited for Sync's fsync")
	}
	require.Equal(t, []int64{100}, queryAll(t, x, "k1"))

	go func() { put <- x.Put("k2", 200, t0) }() // the third entry: seals the file
	select {
	case err := <-put:
		t.Fatalf("the seal's fsync ran beside Sync's (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-put)
	require.NoError(t, <-synced)
	require.Nil(t, x.files[0].f, "sealed and closed")
	require.NoError(t, x.Put("k3", 300, t0), "the index did not fail")
	require.Equal(t, []int64{300}, queryAll(t, x, "k3"))
	require.NoError(t, x.Close())
}

// TestIndex_SyncErrorIsSticky: an fsync error Sync sees fails the index, so
// no later seal or Close treats the file as durable.
func TestIndex_SyncErrorIsSticky(t *testing.T) {
	x := openIdx(t, t.TempDir(), 7, 4)
	require.NoError(t, x.Put("k0", 0, t0))
	eio := &os.PathError{Op: "fsync", Path: "index", Err: syscall.EIO}
	x.syncFile = func(File) error { return eio }
	require.ErrorIs(t, x.Sync(), syscall.EIO)
	require.ErrorIs(t, x.Put("k1", 100, t0), syscall.EIO, "sticky")
	require.ErrorIs(t, x.Close(), syscall.EIO)

	// A handle closed (by a Close whose fsync failed) while Sync waits to
	// fsync it: Sync leaves the closed handle alone (an fsync of it raced
	// with the close on the descriptor) and reports the failure.
	x = openIdx(t, t.TempDir(), 7, 4)
	require.NoError(t, x.Put("k0", 0, t0))
	x.syncFile = func(File) error {
		t.Error("Sync fsynced a closed handle")
		return nil
	}
	x.fsyncMu.Lock()
	synced := make(chan error, 1)
	go func() { synced <- x.Sync() }()
	x.mu.Lock() // NB: Sync holds neither lock while it waits for fsyncMu
	x.werr = eio
	a := x.active
	require.NoError(t, a.f.Close())
	a.fclosed = true
	x.mu.Unlock()
	x.fsyncMu.Unlock()
	require.ErrorIs(t, <-synced, syscall.EIO)
}
