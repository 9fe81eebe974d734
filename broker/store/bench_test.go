package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

// go test -run='^$' -bench=. -benchtime=200000x ./broker/store/

func benchConf(b *testing.B) Options {
	o := testOpts()
	o.KeyIndex.SlotsPerFile = 0 // defaults
	o.KeyIndex.EntriesPerFile = 0
	if v := os.Getenv("SLUICE_BENCH_CHECKPOINT"); v != "" {
		o.CheckpointInterval, _ = time.ParseDuration(v)
	}
	return o
}

// openBench opens a store for a benchmark: 1 GiB segments, consume queue
// files of 300,000 entries. NB: the caller closes it (a deferred Close runs
// while the timer does, as the benchmarks always measured).
func openBench(b *testing.B) *Store {
	c := testConf(b.TempDir())
	c.SegmentSize = 1 << 30
	c.ConsumeQueueEntries = 300000
	return mustOpen(b, c, benchConf(b))
}

// BenchmarkPut: 1 KiB messages spread over 1, 100 and 10,000 queues, async
// flush, one producer goroutine (the dispatcher runs beside it).
func BenchmarkPut(b *testing.B) {
	for _, queues := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("queues=%d", queues), func(b *testing.B) {
			s := openBench(b)
			defer s.Close()
			topics := make([]string, (queues+99)/100)
			for i := range topics {
				topics[i] = fmt.Sprint("topic-", i)
			}
			m := msg("x", 0, string(make([]byte, 1024-91-16)))
			put := func(i int) {
				q := i % queues
				m.Topic, m.QueueID = topics[q/100], int32(q%100)
				if r := s.Put(context.Background(), m); r.Status != PutOK {
					b.Fatal(r.Remark)
				}
			}
			// Warm up: every queue exists (its files created) before timing.
			for i := range queues {
				put(i)
			}
			waitDispatched(b, s)
			b.SetBytes(int64(m.EncodedSize()))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				put(i)
			}
			putDone := time.Since(start)
			waitDispatched(b, s) // indexed throughput: the dispatcher keeps up
			b.ReportMetric(float64(b.N)/putDone.Seconds(), "put-msgs/s")
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "indexed-msgs/s")
		})
	}
}

// BenchmarkDispatch: the dispatcher alone, over b.N messages with 128 B
// bodies (and a UNIQ_KEY, tags and a key, as the Go clients send: records
// of about 300 B) put while it was held: ns/op is its time per record, in
// the page cache.
func BenchmarkDispatch(b *testing.B) {
	s := openBench(b)
	defer s.Close()
	m := msg("dispatch", 0, string(make([]byte, 128)))
	s.dispMu.Lock()
	for i := 0; i < b.N; i++ {
		m.QueueID = int32(i % 8)
		m.Properties = fmt.Sprintf("UNIQ_KEY\x017F0000010000%020X\x02TAGS\x01TagA\x02KEYS\x01order-%d", i, i)
		if r := s.Put(context.Background(), m); r.Status != PutOK {
			b.Fatal(r.Remark)
		}
	}
	b.ResetTimer()
	s.dispMu.Unlock()
	waitDispatched(b, s)
}

// BenchmarkDispatchLag puts 1 KiB messages at a fixed rate (100,000 msgs/s
// by default, SLUICE_BENCH_RATE to change) and measures how long after its
// Put returned each message was indexed and announced, and how many bytes
// the index trailed the log by.
func BenchmarkDispatchLag(b *testing.B) {
	rate := 100000
	if v := os.Getenv("SLUICE_BENCH_RATE"); v != "" {
		fmt.Sscan(v, &rate)
	}
	s := openBench(b)
	defer s.Close()
	const queues = 8
	n := b.N
	putAt := make([]atomic.Int64, n)
	lat := make([]time.Duration, 0, n)
	latCh := make(chan time.Duration, 1<<16)
	s.Subscribe(func(topic string, qid int32, next, _ int64, _ []byte) {
		i := (next-1)*queues + int64(qid)
		if i < int64(n) {
			if t0 := putAt[i].Load(); t0 != 0 {
				select {
				case latCh <- time.Duration(time.Now().UnixNano() - t0):
				default:
				}
			}
		}
	})
	done := make(chan struct{})
	go func() {
		for d := range latCh {
			lat = append(lat, d)
		}
		close(done)
	}()
	var maxLagBytes int64
	m := msg("lag", 0, string(make([]byte, 1024-91-12)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < n; i++ {
		if due := start.Add(time.Duration(i) * time.Second / time.Duration(rate)); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		m.QueueID = int32(i % queues)
		putAt[i].Store(time.Now().UnixNano())
		if r := s.Put(context.Background(), m); r.Status != PutOK {
			b.Fatal(r.Remark)
		}
		if i%64 == 0 {
			maxLagBytes = max(maxLagBytes, s.DispatchLag())
		}
	}
	el := time.Since(start)
	waitDispatched(b, s)
	b.StopTimer()
	close(latCh)
	<-done
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
		b.ReportMetric(float64(maxLagBytes), "max-lag-bytes")
	}
}

// BenchmarkGet reads 32 messages from a random queue offset of one of 100
// queues, with the data in the page cache.
func BenchmarkGet(b *testing.B) {
	s := openBench(b)
	defer s.Close()
	const queues, per = 100, 2000
	m := msg("get", 0, string(make([]byte, 1024-91-12)))
	for i := range queues * per {
		m.QueueID = int32(i % queues)
		if r := s.Put(context.Background(), m); r.Status != PutOK {
			b.Fatal(r.Remark)
		}
	}
	waitDispatched(b, s)
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 0, 64<<10)
	msgs := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res, err := s.Get(context.Background(), GetRequest{Topic: "get", QueueID: int32(r.IntN(queues)),
			Offset: int64(r.IntN(per - 32)), MaxMsgs: 32, Buf: buf})
		if err != nil || res.Status != GetFound {
			b.Fatal(err, res.Status)
		}
		msgs += res.Count
		buf = res.Body
	}
	b.ReportMetric(float64(msgs)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkRebuild indexes a commitlog from scratch (consume queues and key
// index deleted): MB/s of log dispatched.
func BenchmarkRebuild(b *testing.B) {
	c := testConf(b.TempDir())
	c.SegmentSize = 1 << 30
	c.ConsumeQueueEntries = 300000
	o := benchConf(b)
	s := mustOpen(b, c, o)
	m := msg("rebuild", 0, string(make([]byte, 1024-91-20)), message.PropKeys, "k")
	for i := range 256 << 10 { // 256 MiB
		m.QueueID = int32(i % 64)
		if r := s.Put(context.Background(), m); r.Status != PutOK {
			b.Fatal(r.Remark)
		}
	}
	size := int64(s.log.Next())
	require.NoError(b, s.Close())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		require.NoError(b, os.RemoveAll(filepath.Join(c.Dir, "consumequeue")))
		require.NoError(b, os.RemoveAll(filepath.Join(c.Dir, "index")))
		b.StartTimer()
		start := time.Now()
		s := mustOpen(b, c, o)
		b.ReportMetric(float64(size)/1e6/time.Since(start).Seconds(), "MB/s")
		b.StopTimer()
		require.Equal(b, int64(size), s.Dispatched())
		require.NoError(b, s.Close())
		b.StartTimer()
	}
}
