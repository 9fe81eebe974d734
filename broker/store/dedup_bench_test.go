package store

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/testutil"
)

// BenchmarkSubmitDedup: bursts of 32 1 KiB sends (the broker's inline
// path), each with its own UNIQ_KEY, with the duplicate window off, on (a
// master), and on with the dispatcher's feed too (a slave's cost, had it
// the put path's); indexed throughput (the dispatcher keeps up). The
// window is in its steady state: full (max_keys 50,000, filled before the
// timer), each key stored pushes the oldest out. Read the ratios to off,
// of cpu-ns/msg above all (the process's CPU time per message).
//
//	go test -run='^$' -bench=SubmitDedup -benchtime=200000x ./broker/store/
func BenchmarkSubmitDedup(b *testing.B) {
	for _, v := range []struct {
		name   string
		window time.Duration
		feed   bool
	}{{"off", 0, false}, {"on", 2 * time.Minute, false}, {"on+feed", 2 * time.Minute, true}} {
		b.Run(v.name, func(b *testing.B) {
			c := testConf(b.TempDir())
			c.SegmentSize = 1 << 30
			c.ConsumeQueueEntries = 300000
			o := benchConf(b)
			o.Dedup = DedupOptions{Window: v.window, MaxKeys: 50_000}
			s := mustOpen(b, c, o)
			defer s.Close()
			s.SetDedupFeed(v.feed)
			const burst = 32
			body := make([]byte, 1024-91-16-48)
			msgs := make([]message.Message, burst)
			reqs := make([]PutRequest, burst)
			done := func(r PutResult) {
				if r.Status != PutOK || r.Duplicates != 0 {
					b.Fatal(r.Status, r.Remark, r.Duplicates)
				}
			}
			id := message.NewUniqIDGenerator(netip.MustParseAddr("127.0.0.1"), 1)
			submit := func() {
				for k := range reqs {
					msgs[k] = message.Message{Topic: "bench", QueueID: int32(k % 8), BornHost: bornHost, Body: body,
						Properties: message.PropUniqKey + "\x01" + id.Next() + "\x02"}
					reqs[k] = PutRequest{Msg: &msgs[k], Dedup: true, Done: AnswerFunc(done)}
				}
				s.Submit(reqs)
			}
			for range 60_000 / burst {
				submit()
			}
			waitDispatched(b, s)
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			start, cpu0 := time.Now(), testutil.ProcessCPU()
			for i := 0; i < b.N; i += burst {
				submit()
			}
			waitDispatched(b, s)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "indexed-msgs/s")
			b.ReportMetric(float64(testutil.ProcessCPU()-cpu0)/float64(b.N), "cpu-ns/msg")
		})
	}
}

// BenchmarkDedupWindowMemory reports the memory the window holds per key it
// remembers (1,000,000 keys, live): its tables (off the heap) and what is
// left of it on the heap.
func BenchmarkDedupWindowMemory(b *testing.B) {
	const keys = 1_000_000
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := newDedupWindow(DedupOptions{Window: time.Hour, MaxKeys: keys}, time.Now)
		now := w.nowMs()
		w.mu.Lock()
		for i := range keys {
			w.insertLocked(dedupEntry{key: dedupKeyOf("topic", fmt.Sprint(i)), pos: int64(i), ts: now}, now)
		}
		tables := len(w.chunks)*dedupChunk*int(unsafe.Sizeof(dedupEntry{})) + len(w.slots)*8 + len(w.old)*8
		w.mu.Unlock()
		runtime.GC()
		runtime.ReadMemStats(&after)
		// NB: the tables are off the heap (offheap.go): heap-bytes/key is
		// what the collector still sees of the window.
		b.ReportMetric(float64(tables)/keys, "bytes/key")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/keys, "heap-bytes/key")
		runtime.KeepAlive(w)
		w.close()
	}
}

// BenchmarkDedupFill: the window filling from empty to max_keys (2M, the
// default), one insert per message under the window's lock, as the put
// path does. It reports the mean and the longest insert: a send waits for
// the longest, and the window fills after every start (and again whenever
// traffic rises), so a long one is a stall of every send of the broker.
//
//	go test -run='^$' -bench=DedupFill -benchtime=1x ./broker/store/
func BenchmarkDedupFill(b *testing.B) {
	const keys = 2_000_000
	for range b.N {
		now := time.UnixMilli(1_700_000_000_000)
		w := newDedupWindow(DedupOptions{Window: time.Hour, MaxKeys: keys}, func() time.Time { return now })
		var longest, total time.Duration
		for i := range keys {
			k := dedupKey{a: uint64(i) * 0x9E3779B97F4A7C15, b: uint64(i)}
			start := time.Now()
			w.mu.Lock()
			if _, ok := w.lookupLocked(k, now.UnixMilli()); !ok {
				w.insertLocked(dedupEntry{key: k, pos: int64(i), ts: now.UnixMilli()}, now.UnixMilli())
			}
			w.mu.Unlock()
			d := time.Since(start)
			total += d
			longest = max(longest, d)
		}
		b.ReportMetric(float64(total.Nanoseconds())/keys, "ns/insert")
		b.ReportMetric(float64(longest.Microseconds()), "longest-µs")
		w.close()
	}
}

// BenchmarkDedupCheck: the put path's lookups under putMu, bursts of 32
// new keys against a full window of 2,000,000 (the default max_keys), so
// that each lookup and each key pushed out reads a slot of a 32 MiB table:
// the cache misses the broker's profile shows. ns/op is per key.
//
//	go test -run='^$' -bench=DedupCheck ./broker/store/
func BenchmarkDedupCheck(b *testing.B) {
	const keys, burst = 2_000_000, 32
	now := time.UnixMilli(1_700_000_000_000)
	w := newDedupWindow(DedupOptions{Window: time.Hour, MaxKeys: keys}, func() time.Time { return now })
	defer w.close()
	ms := now.UnixMilli()
	w.mu.Lock()
	for i := range keys {
		w.insertLocked(dedupEntry{key: dedupKey{a: uint64(i) * 0x9E3779B97F4A7C15, b: uint64(i)}, pos: int64(i), ts: ms}, ms)
	}
	w.mu.Unlock()
	s := &Store{dedup: w}
	reqs := make([]PutRequest, burst)
	sizes := make([]sized, burst)
	next := uint64(keys)
	b.ResetTimer()
	for i := 0; i < b.N; i += burst {
		for k := range sizes {
			sizes[k] = sized{n: 1, dd: dedupState{kind: ddKey, key: dedupKey{a: next * 0x9E3779B97F4A7C15, b: next}}}
			next++
		}
		s.dedupCheck(reqs, sizes)
		w.mu.Lock()
		for k := range sizes {
			w.fillLocked(sizes[k].dd.seq, int64(k), 0, ms, 1, 0)
		}
		w.mu.Unlock()
	}
}

// uniqKeys writes UNIQ_KEYs as one RocketMQ producer makes them (the
// client's address, pid and class-loader hash, then the milliseconds of
// the month and a sequence per millisecond, upper-case hex), perMs of them
// per millisecond.
type uniqKeys struct {
	buf   [message.UniqIDLen]byte
	n     uint64
	perMs uint64
}

func newUniqKeys(perMs uint64) *uniqKeys {
	u := &uniqKeys{perMs: perMs}
	copy(u.buf[:], "7F00000104D200000000")
	return u
}

// next returns the next key; it stays valid until the next call.
func (u *uniqKeys) next() []byte {
	const hex = "0123456789ABCDEF"
	ms, seq := 86_400_000+u.n/u.perMs, u.n%u.perMs
	u.n++
	for i := range 8 {
		u.buf[20+i] = hex[(ms>>(28-4*i))&0xF]
	}
	for i := range 4 {
		u.buf[28+i] = hex[(seq>>(12-4*i))&0xF]
	}
	return u.buf[:]
}

// BenchmarkDedupCheckUniqKeys is BenchmarkDedupCheck with the keys a
// producer sends (150 a millisecond, as at 150,000 msgs/s), hashed as
// the put path hashes them: where a key's slot lies, and so how many of
// the lookups and evictions miss the cache, depends on how the keys are
// hashed. ns/op is per key, hashing included.
//
//	go test -run='^$' -bench=DedupCheckUniqKeys ./broker/store/
func BenchmarkDedupCheckUniqKeys(b *testing.B) {
	const keys, burst = 2_000_000, 32
	now := time.UnixMilli(1_700_000_000_000)
	w := newDedupWindow(DedupOptions{Window: time.Hour, MaxKeys: keys}, func() time.Time { return now })
	defer w.close()
	ms := now.UnixMilli()
	topic := []byte("orders")
	gen := newUniqKeys(150)
	w.mu.Lock()
	for i := range keys {
		w.insertLocked(dedupEntry{key: dedupKeyOfBytes(topic, gen.next()), pos: int64(i), ts: ms}, ms)
	}
	w.mu.Unlock()
	s := &Store{dedup: w}
	reqs := make([]PutRequest, burst)
	sizes := make([]sized, burst)
	b.ResetTimer()
	for i := 0; i < b.N; i += burst {
		for k := range sizes {
			sizes[k] = sized{n: 1, dd: dedupState{kind: ddKey, key: dedupKeyOfBytes(topic, gen.next())}}
		}
		if s.dedupCheck(reqs, sizes); sizes[0].dd.kind != ddPending {
			b.Fatalf("a new key met the window: %v", sizes[0].dd.kind)
		}
		w.mu.Lock()
		for k := range sizes {
			w.fillLocked(sizes[k].dd.seq, int64(k), 0, ms, 1, 0)
		}
		w.mu.Unlock()
	}
}
