package broker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
)

// go test -run='^$' -bench=. -benchtime=20000x ./broker/
// Client and broker share the machine's cores: read the ratios.

func benchBroker(b *testing.B) *Broker { return benchBrokerWith(b, func(*conf.Broker) {}) }

// benchBrokerWith is benchBroker with edit applied to its configuration.
func benchBrokerWith(b *testing.B, edit func(*conf.Broker)) *Broker {
	cfg := testConfig(b.TempDir())
	cfg.Store.SegmentSize = 1 << 30
	cfg.Store.SendQueueSize = 100000
	// NB: the sends below repeat one UNIQ_KEY: with the duplicate window
	// on, all but the first would be answered from it. Its cost is
	// measured by store's BenchmarkSubmitDedup and scripts/bench-ab.sh
	// (A_ENV=SLUICE_DEDUP_WINDOW=0s).
	cfg.Dedup.Window = 0
	edit(&cfg)
	br, err := New(cfg, Options{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	return br
}

// BenchmarkSendRoundTrip: 1 KiB sends (async flush) over one connection and
// over 16, with JSON and msgpack headers side by side.
func BenchmarkSendRoundTrip(b *testing.B) {
	body := make([]byte, 1024)
	for _, st := range []remoting.SerializeType{remoting.SerializeJSON, remoting.SerializeMsgpack} {
		for _, conns := range []int{1, 16} {
			b.Run(fmt.Sprintf("codec=%s/conns=%d", st, conns), func(b *testing.B) {
				br := benchBroker(b)
				clients := make([]*remoting.Client, conns)
				for i := range clients {
					clients[i] = remoting.NewClient(remoting.ClientOptions{SerializeType: st, Logger: quiet()})
					defer clients[i].Close()
				}
				h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "bench", DefaultTopic: "TBW102",
					DefaultTopicQueueNums: 8, QueueID: -1, Properties: "TAGS\x01T\x02KEYS\x01k\x02UNIQ_KEY\x017F0000010001000000000000000A0001\x02"}
				sendLoop(b, br.Addr(), clients, protocol.Ext(h), body)
			})
		}
	}
	// NB: what Sluice's producer sends: SEND_MESSAGE_V2 with a msgpack
	// header written from the struct. allocs/op pins the broker's and
	// this remoting client's allocations per send (21 on 2026-12-01,
	// one synchronous Invoke at a time).
	b.Run("codec=MSGPACK/v2/conns=1", func(b *testing.B) {
		br := benchBroker(b)
		c := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeMsgpack, Logger: quiet()})
		defer c.Close()
		h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "bench", DefaultTopic: "TBW102", DefaultTopicQueueNums: 8,
			QueueID: -1, Properties: "TAGS\x01T\x02UNIQ_KEY\x017F0000010001000000000000000A0001\x02"}
		v2 := h.V2()
		sendLoopWith(b, br.Addr(), []*remoting.Client{c}, len(body), func() *remoting.Command {
			req := remoting.NewRequest(protocol.SendMessageV2, nil, body)
			req.ExtWriter = &v2
			return req
		})
	})
}

// sendLoop warms up, then sends b.N messages spread over clients and
// reports sends/s.
func sendLoop(b *testing.B, addr string, clients []*remoting.Client, ext map[string]string, body []byte) {
	sendLoopWith(b, addr, clients, len(body), func() *remoting.Command { return remoting.NewRequest(protocol.SendMessage, ext, body) })
}

// sendLoopWith is sendLoop of the requests newReq makes (bodies of size
// bytes).
func sendLoopWith(b *testing.B, addr string, clients []*remoting.Client, size int, newReq func() *remoting.Command) {
	warm, err := clients[0].Invoke(context.Background(), addr, newReq())
	if err != nil || warm.Code != 0 {
		b.Fatal(err, warm)
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				resp, err := c.Invoke(context.Background(), addr, newReq())
				if err != nil || resp.Code != protocol.Success {
					b.Error(err, resp)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sends/s")
}

// BenchmarkLongPollWakeup: a pull is parked, then a message is sent; the
// latency is from the send's start to the pull's answer.
func BenchmarkLongPollWakeup(b *testing.B) {
	br := benchBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeMsgpack, Logger: quiet()})
	defer c.Close()
	send := func() {
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "lp", DefaultTopic: "TBW102", DefaultTopicQueueNums: 1, QueueID: 0}
		resp, err := c.Invoke(context.Background(), br.Addr(), remoting.NewRequest(protocol.SendMessage, protocol.Ext(h), []byte("x")))
		if err != nil || resp.Code != 0 {
			b.Fatal(err, resp)
		}
	}
	send()
	for br.Store().DispatchLag() != 0 {
		time.Sleep(time.Millisecond)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := br.Store().MaxOffset("lp", 0)
		got := make(chan time.Time, 1)
		h := pullHeader("g", "lp", 0, off, pullSuspend|pullSubscription)
		c.Invoke(context.Background(), br.Addr(), remoting.NewRequest(protocol.PullMessage, protocol.Ext(h), nil),
			remoting.Async(func(r *remoting.Command, err error) {
				if err != nil || r.Code != protocol.Success {
					b.Error(err, r)
				}
				got <- time.Now()
			}))
		for br.hold.Parked() == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		t0 := time.Now()
		send()
		lat = append(lat, (<-got).Sub(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkSendDedup: 1 KiB sends with distinct UNIQ_KEYs (msgpack, 16
// connections), the duplicate window off and on, side by side; the
// process's CPU per send beside the rate.
//
//	go test -run='^$' -bench=SendDedup -benchtime=100000x ./broker/
func BenchmarkSendDedup(b *testing.B) {
	body := make([]byte, 1024)
	for _, window := range []time.Duration{0, 2 * time.Minute} {
		b.Run("window="+window.String(), func(b *testing.B) {
			cfg := testConfig(b.TempDir())
			cfg.Store.SegmentSize = 1 << 30
			cfg.Store.SendQueueSize = 100000
			cfg.Dedup.Window = window
			br, err := New(cfg, Options{Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			if err := br.Start(); err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			const conns = 16
			ids := message.NewUniqIDGenerator(netip.MustParseAddr("127.0.0.1"), 1)
			ext := func() map[string]string {
				return protocol.Ext(&protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "bench", DefaultTopic: "TBW102",
					DefaultTopicQueueNums: 8, QueueID: -1, Properties: "TAGS\x01T\x02UNIQ_KEY\x01" + ids.Next() + "\x02"})
			}
			clients := make([]*remoting.Client, conns)
			for i := range clients {
				clients[i] = remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeMsgpack, Logger: quiet()})
				defer clients[i].Close()
			}
			if warm, err := clients[0].Invoke(context.Background(), br.Addr(), remoting.NewRequest(protocol.SendMessage, ext(), body)); err != nil || warm.Code != 0 {
				b.Fatal(err, warm)
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			start, cpu0 := time.Now(), testutil.ProcessCPU()
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						resp, err := c.Invoke(context.Background(), br.Addr(), remoting.NewRequest(protocol.SendMessage, ext(), body))
						if err != nil || resp.Code != protocol.Success {
							b.Error(err, resp)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sends/s")
			b.ReportMetric(float64(testutil.ProcessCPU()-cpu0)/float64(b.N), "cpu-ns/send")
		})
	}
}
