package commitlog

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Benchmarks compare the log with a plain file doing the same I/O in the same
// run; read the ratios, not the absolute numbers (the machine is shared).
//
//	go test -run='^$' -bench=. -benchtime=2s ./commitlog/

var benchSizes = []struct {
	name string
	size int
}{{"128B", 128}, {"1KiB", 1024}, {"4KiB", 4096}}

// BenchmarkAppend: one writer, async mode, against sequential writes of the
// same records to a plain file.
func BenchmarkAppend(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run("size="+sz.name+"/impl=sluice", func(b *testing.B) { benchAppend(b, sz.size, false) })
		b.Run("size="+sz.name+"/impl=sluice-noprealloc", func(b *testing.B) { benchAppend(b, sz.size, true) })
		// The plain baselines: no fsync at all, and an fsync every 500 ms
		// from another goroutine (the log's async durability).
		b.Run("size="+sz.name+"/impl=plainfile", func(b *testing.B) { benchPlain(b, sz.size, 0) })
		b.Run("size="+sz.name+"/impl=plainfile-fsync500ms", func(b *testing.B) { benchPlain(b, sz.size, 500*time.Millisecond) })
	}
}

func benchPlain(b *testing.B, size int, syncEvery time.Duration) {
	f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
	require.NoError(b, err)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if syncEvery == 0 {
			return
		}
		t := time.NewTicker(syncEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				f.Sync()
			}
		}
	}()
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		putEnvelope(buf)
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	close(stop)
	<-done
	require.NoError(b, f.Close())
}

func benchAppend(b *testing.B, size int, noPrealloc bool) {
	{
		{
			opts := testOptions(256 << 20)
			opts.NoPreallocate = noPrealloc
			opts.Validate = nil
			l := mustOpen(b, b.TempDir(), opts)
			fill := func(at Offset, dst []byte) error {
				putEnvelope(dst)
				return nil
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Append(size, fill); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			require.NoError(b, l.Close())
		}
	}
}

func putEnvelope(dst []byte) {
	n := uint32(len(dst))
	dst[0], dst[1], dst[2], dst[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	dst[4], dst[5], dst[6], dst[7] = 0xDA, 0xA3, 0x20, 0xA7
}

// BenchmarkSyncAppend: sync mode (group commit) with concurrent appenders of
// 1 KiB records, each waiting for its own fsync, against a plain loop that
// fsyncs after every 1 KiB write. Reports records/s, fsyncs/s and records
// per fsync.
func BenchmarkSyncAppend(b *testing.B) {
	for _, n := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("appenders=%d/impl=sluice", n), func(b *testing.B) {
			fs := &faultFS{}
			opts := testOptions(256 << 20)
			opts.Validate = nil
			opts.SyncFlush = true
			opts.OpenFile = fs.open
			l := mustOpen(b, b.TempDir(), opts)
			fill := func(at Offset, dst []byte) error { putEnvelope(dst); return nil }
			var mu sync.Mutex
			var left atomic.Int64
			left.Store(int64(b.N))
			syncs0 := fs.syncCount()
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						mu.Lock()
						at, err := l.Append(1024, fill)
						mu.Unlock()
						if err != nil {
							b.Error(err)
							return
						}
						if err := l.WaitDurable(context.Background(), at+1024); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start).Seconds()
			b.StopTimer()
			syncs := fs.syncCount() - syncs0
			b.ReportMetric(float64(b.N)/el, "records/s")
			b.ReportMetric(float64(syncs)/el, "fsyncs/s")
			b.ReportMetric(float64(b.N)/float64(max(syncs, 1)), "records/fsync")
			require.NoError(b, l.Close())
		})
	}
	b.Run("impl=plain-fsync-per-record", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
		require.NoError(b, err)
		buf := make([]byte, 1024)
		b.SetBytes(1024)
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		el := time.Since(start).Seconds()
		b.ReportMetric(float64(b.N)/el, "records/s")
		b.ReportMetric(float64(b.N)/el, "fsyncs/s")
		require.NoError(b, f.Close())
	})
}

// BenchmarkRecovery: reopen after an unclean stop with 2 GiB (SLUICE_BENCH_GIB
// to change) in the log, from its checkpoint and by a full scan, against
// reading the same bytes sequentially from the files. Run with -benchtime=1x.
func BenchmarkRecovery(b *testing.B) {
	gib := int64(2)
	if v := os.Getenv("SLUICE_BENCH_GIB"); v != "" {
		fmt.Sscan(v, &gib)
	}
	dir := b.TempDir()
	opts := testOptions(1 << 30)
	l := mustOpen(b, dir, opts)
	const size = 4096
	for i := 0; int64(i)*size < gib<<30; i++ {
		if _, err := l.Append(size, fillTest(uint64(i))); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, l.Sync(context.Background()))
	time.Sleep(1100 * time.Millisecond) // let the flusher checkpoint, as a running broker would
	require.NoError(b, l.Sync(context.Background()))
	end := l.Next()
	l.closeUnclean()

	b.Run("open=checkpoint", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			l := mustOpen(b, dir, opts)
			b.ReportMetric(float64(l.Recovery().Scanned), "bytes-scanned")
			require.Equal(b, end, l.Next())
			l.closeUnclean()
		}
	})
	b.Run("open=fullscan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			require.NoError(b, os.Remove(filepath.Join(dir, checkpointName)))
			l := mustOpen(b, dir, opts)
			b.ReportMetric(float64(l.Recovery().Scanned), "bytes-scanned")
			require.Equal(b, end, l.Next())
			l.closeUnclean()
		}
	})
	b.Run("plain-sequential-read", func(b *testing.B) {
		buf := make([]byte, 1<<20)
		for i := 0; i < b.N; i++ {
			var total int64
			for base := Offset(0); base < end; base += 1 << 30 {
				f, err := os.Open(segmentPath(dir, base))
				require.NoError(b, err)
				for total < int64(end) {
					n, err := f.Read(buf)
					total += int64(n)
					if err == io.EOF || n == 0 || total >= int64(base)+1<<30 {
						break
					}
				}
				f.Close()
			}
			b.ReportMetric(float64(total), "bytes-read")
		}
	})
}
