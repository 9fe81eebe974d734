package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// go test -run='^$' -bench=. -benchtime=100000x ./client/
// The client, the broker and the name server share the machine's cores in
// one process: read the figures side by side, as ratios.

func benchCluster(b *testing.B) *cluster {
	c := newCluster(b, 1)
	c.createTopic("bench", 8)
	return c
}

// BenchmarkProduce: 1 KiB messages sent async (256 in flight), sync one at
// a time, and in batches of 32, to one broker. allocs/op counts the
// client's and the broker's allocations per round trip (async: 19-20, of
// which 2 are this loop's Message and callback; batch32: 36 per batch).
func BenchmarkProduce(b *testing.B) {
	body := make([]byte, 1024)
	b.Run("async", func(b *testing.B) {
		b.ReportAllocs()
		p := benchCluster(b).producer(WithAsyncInflight(256))
		ctx := context.Background()
		var wg sync.WaitGroup
		var failed atomic.Int64
		b.SetBytes(int64(len(body)))
		b.ResetTimer()
		for range b.N {
			wg.Add(1)
			p.SendAsync(ctx, &Message{Topic: "bench", Body: body}, func(_ SendResult, err error) {
				if err != nil {
					failed.Add(1)
				}
				wg.Done()
			})
		}
		wg.Wait()
		b.StopTimer()
		if n := failed.Load(); n > 0 {
			b.Fatalf("%d sends failed", n)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("sync", func(b *testing.B) {
		p := benchCluster(b).producer()
		ctx := context.Background()
		b.SetBytes(int64(len(body)))
		b.ResetTimer()
		for range b.N {
			if _, err := p.Send(ctx, &Message{Topic: "bench", Body: body}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("batch32", func(b *testing.B) {
		b.ReportAllocs()
		p := benchCluster(b).producer()
		ctx := context.Background()
		msgs := make([]*Message, 32)
		for i := range msgs {
			msgs[i] = &Message{Topic: "bench", Body: body}
		}
		b.SetBytes(int64(len(body) * len(msgs)))
		b.ResetTimer()
		for range b.N {
			if _, err := p.SendBatch(ctx, msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
	})
}

// BenchmarkReplay: a push consumer reads back b.N stored 1 KiB messages
// from the first offset, with RocketMQ's default pull batch (32) and a
// larger one.
func BenchmarkReplay(b *testing.B) {
	for _, pull := range []int{32, 128} {
		b.Run(fmt.Sprintf("pull=%d", pull), func(b *testing.B) { benchReplay(b, pull) })
	}
}

func benchReplay(b *testing.B, pullBatch int) {
	c := benchCluster(b)
	p := c.producer()
	body := make([]byte, 1024)
	msgs := make([]*Message, 64)
	for i := range msgs {
		msgs[i] = &Message{Topic: "bench", Body: body}
	}
	ctx := context.Background()
	for sent := 0; sent < b.N; sent += len(msgs) {
		if _, err := p.SendBatch(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
	var got atomic.Int64
	done := make(chan struct{})
	cons, err := NewPushConsumer("replay", c.opts(WithConsumeFrom(ConsumeFromFirst),
		WithConsumeBatchSize(32), WithPullBatchSize(pullBatch))...)
	if err != nil {
		b.Fatal(err)
	}
	err = cons.Subscribe("bench", "*", func(_ context.Context, msgs []*Message) ConsumeResult {
		if n := got.Add(int64(len(msgs))); n >= int64(b.N) && n-int64(len(msgs)) < int64(b.N) {
			close(done)
		}
		return ConsumeSuccess
	})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	if err := cons.Start(); err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", got.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
