package commitlog

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
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

// BenchmarkSegmentWrite decides how segments are made (Options.NoPreallocate,
// WarmAhead): it writes a 64 MiB segment in records of each size, with an
// fdatasync every 4 MiB (the async flush), into a file that is
// preallocated (fallocate: unwritten extents), sparse and growing (what
// NoPreallocate does), or warmed (zeros written and synced first: what
// WarmAhead does, its cost counted). Modes alternate over rounds on fresh
// files; each gives the median CPU time of the writing thread (user +
// system, RUSAGE_THREAD: the kernel's share of a write is the point) and
// wall time per byte. CPU time is what two shared cores run out of.
//
//	go test -run='^$' -bench=SegmentWrite -benchtime=1x ./commitlog/
func BenchmarkSegmentWrite(b *testing.B) {
	const segSize, syncEvery, rounds = 64 << 20, 4 << 20, 5
	modes := []string{"prealloc", "sparse", "warmed"}
	for _, sz := range benchSizes {
		b.Run("size="+sz.name, func(b *testing.B) {
			cpu := make(map[string][]float64)
			wall := make(map[string][]float64)
			dir := b.TempDir()
			for range b.N * rounds {
				for _, mode := range modes {
					c, w := segmentWrite(b, filepath.Join(dir, mode), mode, segSize, sz.size, syncEvery)
					cpu[mode] = append(cpu[mode], float64(c)/segSize)
					wall[mode] = append(wall[mode], float64(w)/segSize)
				}
			}
			for _, mode := range modes {
				b.ReportMetric(median(cpu[mode]), mode+"-cpu-ns/B")
				b.ReportMetric(median(wall[mode]), mode+"-wall-ns/B")
			}
		})
	}
}

// segmentWrite writes one segment as BenchmarkSegmentWrite describes and
// returns the thread's CPU time and the wall time it took, in ns.
func segmentWrite(b *testing.B, path, mode string, segSize, recSize, syncEvery int) (cpu, wall int64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(b, err)
	defer os.Remove(path)
	defer f.Close()
	start, c0 := time.Now(), threadCPU(b)
	switch mode {
	case "prealloc":
		require.NoError(b, syscall.Fallocate(int(f.Fd()), 0, 0, int64(segSize)))
	case "warmed":
		zeros := make([]byte, 1<<20)
		for off := 0; off < segSize; off += len(zeros) {
			_, err := f.WriteAt(zeros, int64(off))
			require.NoError(b, err)
		}
		require.NoError(b, syscall.Fdatasync(int(f.Fd())))
	}
	rec := make([]byte, recSize)
	putEnvelope(rec)
	for off := 0; off+recSize <= segSize; off += recSize {
		if _, err := f.WriteAt(rec, int64(off)); err != nil {
			b.Fatal(err)
		}
		if (off+recSize)%syncEvery < recSize {
			require.NoError(b, syscall.Fdatasync(int(f.Fd())))
		}
	}
	require.NoError(b, syscall.Fdatasync(int(f.Fd())))
	return threadCPU(b) - c0, time.Since(start).Nanoseconds()
}

// threadCPU is the calling thread's CPU time (user + system) in ns.
func threadCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru))
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkAppendVsPlain: the log's async appends (one writer, fsync every
// 500 ms by its flusher) against plain sequential writes of the same
// records to a file fsynced every 500 ms by another goroutine, alternated
// over rounds, each writing 128 MiB into fresh files that are removed
// after (so no run pays for a page cache the one before it filled). Each
// gives the median throughput and process CPU time (user + system,
// RUSAGE_SELF: the flushers' fsyncs included) per byte, and log/plain.
//
//	go test -run='^$' -bench=AppendVsPlain -benchtime=1x ./commitlog/
func BenchmarkAppendVsPlain(b *testing.B) {
	const total, rounds = 128 << 20, 5
	impls := []string{"log", "log-noprealloc", "plain"}
	for _, sz := range benchSizes {
		b.Run("size="+sz.name, func(b *testing.B) {
			mbps := make(map[string][]float64)
			cpu := make(map[string][]float64)
			for range b.N * rounds {
				for _, impl := range impls {
					dir := b.TempDir()
					start, c0 := time.Now(), processCPU(b)
					if impl == "plain" {
						plainWrite(b, filepath.Join(dir, "plain"), sz.size, total)
					} else {
						logWrite(b, dir, impl == "log-noprealloc", sz.size, total)
					}
					c, w := processCPU(b)-c0, time.Since(start)
					mbps[impl] = append(mbps[impl], float64(total)/w.Seconds()/1e6)
					cpu[impl] = append(cpu[impl], float64(c)/total)
					require.NoError(b, os.RemoveAll(dir))
				}
			}
			for _, impl := range impls {
				b.ReportMetric(median(mbps[impl]), impl+"-MB/s")
				b.ReportMetric(median(cpu[impl]), impl+"-cpu-ns/B")
			}
			b.ReportMetric(median(mbps["log"])/median(mbps["plain"]), "log/plain")
			b.ReportMetric(median(mbps["log-noprealloc"])/median(mbps["plain"]), "log-noprealloc/plain")
		})
	}
}

func logWrite(b *testing.B, dir string, noPrealloc bool, size, total int) {
	opts := testOptions(64 << 20)
	opts.NoPreallocate = noPrealloc
	opts.Validate = nil
	l := mustOpen(b, dir, opts)
	fill := func(at Offset, dst []byte) error {
		putEnvelope(dst)
		return nil
	}
	for n := 0; n+size <= total; n += size {
		if _, err := l.Append(size, fill); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, l.Close())
}

func plainWrite(b *testing.B, path string, size, total int) {
	f, err := os.Create(path)
	require.NoError(b, err)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = f.Sync()
			}
		}
	}()
	buf := make([]byte, size)
	putEnvelope(buf)
	for n := 0; n+size <= total; n += size {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	close(stop)
	<-done
	require.NoError(b, f.Sync())
	require.NoError(b, f.Close())
}

// processCPU is the process's CPU time (user + system, all threads) in ns.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return ru.Utime.Nano() + ru.Stime.Nano()
}
