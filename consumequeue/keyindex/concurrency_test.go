package keyindex

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
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
// go on; a Put that seals the file meanwhile (closing the handle Sync is
// fsyncing) does not fail Sync or the index.
func TestIndex_SyncLeavesPutsAlone(t *testing.T) {
	x := openIdx(t, t.TempDir(), 7, 4) // 3 entries per file
	require.NoError(t, x.Put("k0", 0, t0))
	entered, release := make(chan struct{}), make(chan struct{})
	x.syncFile = func(f *os.File) error {
		close(entered)
		<-release
		return f.Sync()
	}
	synced := make(chan error, 1)
	go func() { synced <- x.Sync() }()
	<-entered

	put := make(chan error, 1)
	go func() {
		err := x.Put("k1", 100, t0)
		if err == nil {
			err = x.Put("k2", 200, t0) // the third entry: seals the file
		}
		put <- err
	}()
	select {
	case err := <-put:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("Put waited for Sync's fsync")
	}
	require.Equal(t, []int64{200}, queryAll(t, x, "k2"))
	require.Nil(t, x.files[0].f, "sealed and closed while Sync held it")
	close(release)
	require.NoError(t, <-synced, "the handle was closed after its own fsync")
	require.NoError(t, x.Put("k3", 300, t0), "the index did not fail")
	require.Equal(t, []int64{300}, queryAll(t, x, "k3"))
	require.NoError(t, x.Close())
}
