package keyindex

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

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
