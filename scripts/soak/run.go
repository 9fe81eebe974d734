package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/servermetrics"
)

// Sample is the state at the end of one sampling period.
type Sample struct {
	At                     time.Duration // since sending started
	RSS, Heap              float64       // bytes
	Goroutines, FDs        float64
	Sent, Failed, Consumed int64   // totals so far
	P50, P99, P999, Max    float64 // send latency over the period, ms
}

var csvHeader = []string{"elapsed_s", "rss_bytes", "heap_inuse_bytes", "goroutines", "open_fds",
	"sent", "failed", "consumed", "p50_ms", "p99_ms", "p999_ms", "max_ms"}

func (s Sample) record() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return []string{f(s.At.Seconds()), f(s.RSS), f(s.Heap), f(s.Goroutines), f(s.FDs),
		strconv.FormatInt(s.Sent, 10), strconv.FormatInt(s.Failed, 10), strconv.FormatInt(s.Consumed, 10),
		f(s.P50), f(s.P99), f(s.P999), f(s.Max)}
}

// Result is what a run measured.
type Result struct {
	Sent, Failed, Consumed int64
	Samples                []Sample
	Trends                 []Trend
}

// Run starts a broker, sends at cfg.Rate for cfg.Duration while a consumer
// consumes, samples every cfg.Sample, and writes cfg.Out+".csv" (a line
// per sample, as it goes), cfg.Out+".png" and the broker's log,
// cfg.Out+".broker.log".
func Run(ctx context.Context, cfg Config, log io.Writer) (Result, error) {
	var res Result
	if err := os.MkdirAll(filepath.Dir(cfg.Out), 0o755); err != nil {
		return res, err
	}
	tmp, err := os.MkdirTemp("", "sluice-soak-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	bin := cfg.BrokerBin
	if bin == "" {
		bin = filepath.Join(tmp, "mqbroker")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/mqbroker")
		build.Dir = filepath.Join(sourceDir(), "..", "..")
		if out, err := build.CombinedOutput(); err != nil {
			return res, fmt.Errorf("build mqbroker (or give -broker-bin): %v: %s", err, out)
		}
	}
	blog, err := os.Create(cfg.Out + ".broker.log")
	if err != nil {
		return res, err
	}
	defer blog.Close()
	b, err := startBroker(bin, filepath.Join(tmp, "store"), blog)
	if err != nil {
		return res, err
	}
	defer b.stop()
	fmt.Fprintf(log, "broker %s, nameserver %s, metrics http://%s/metrics\n", b.addr, b.ns, b.metrics)

	const topic = "soak"
	p, err := client.NewProducer(client.WithNameServers(b.ns), client.WithGroup("soak-producer"), client.WithRetries(0))
	if err != nil {
		return res, err
	}
	if err := p.Start(); err != nil {
		return res, err
	}
	defer p.Close()
	if _, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte("warm-up")}); err != nil {
		return res, fmt.Errorf("warm-up send: %w", err)
	}
	total := int64(cfg.Duration.Seconds() * float64(cfg.Rate))
	seen := newBitset(total)
	c, err := client.NewPushConsumer("soak-consumer", client.WithNameServers(b.ns), client.WithConsumeFrom(client.ConsumeFromLast))
	if err != nil {
		return res, err
	}
	err = c.Subscribe(topic, "soak", func(_ context.Context, msgs []*client.Message) client.ConsumeResult {
		for _, m := range msgs {
			if i, err := strconv.ParseInt(m.Properties["seq"], 10, 64); err == nil {
				seen.set(i)
			}
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		return res, err
	}
	if err := c.Start(); err != nil {
		return res, err
	}
	defer c.Close()

	out, err := os.Create(cfg.Out + ".csv")
	if err != nil {
		return res, err
	}
	defer out.Close()
	w := csv.NewWriter(out)
	if err := w.Write(csvHeader); err != nil {
		return res, err
	}

	// The pacer hands out scheduled send times; senders send synchronously
	// and measure from the scheduled time.
	start := time.Now()
	due := make(chan time.Time, cfg.Rate)
	go func() {
		defer close(due)
		for i := range total {
			at := start.Add(time.Duration(i) * time.Second / time.Duration(cfg.Rate))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
			due <- at
		}
	}()
	var sent, failed, next atomic.Int64
	var latMu sync.Mutex
	var lat []time.Duration
	body := make([]byte, cfg.BodySize)
	var firstErr atomic.Value
	var senders sync.WaitGroup
	for range cfg.Senders {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for at := range due {
				seq := next.Add(1) - 1
				m := &client.Message{Topic: topic, Tags: "soak", Body: body,
					Properties: map[string]string{"seq": strconv.FormatInt(seq, 10)}}
				if _, err := p.Send(ctx, m); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				d := time.Since(at)
				sent.Add(1)
				latMu.Lock()
				lat = append(lat, d)
				latMu.Unlock()
			}
		}()
	}
	sample := func() error {
		v, err := servermetrics.Scrape(b.metrics)
		if err != nil {
			return err
		}
		latMu.Lock()
		period := lat
		lat = nil
		latMu.Unlock()
		s := Sample{At: time.Since(start), Sent: sent.Load(), Failed: failed.Load(), Consumed: seen.count()}
		for _, m := range []struct {
			name string
			to   *float64
		}{{"process_resident_memory_bytes", &s.RSS}, {"go_memstats_heap_inuse_bytes", &s.Heap},
			{"go_goroutines", &s.Goroutines}, {"process_open_fds", &s.FDs}} {
			x, ok := v.Lookup(m.name, nil)
			if !ok {
				return fmt.Errorf("the broker's /metrics has no %s", m.name)
			}
			*m.to = x
		}
		s.P50, s.P99, s.P999, s.Max = percentiles(period)
		res.Samples = append(res.Samples, s)
		fmt.Fprintf(log, "%6.0fs  rss %6.1f MiB  heap %6.1f MiB  %4.0f goroutines  %4.0f fds  sent %d failed %d consumed %d  p50 %.2f p99 %.2f p999 %.2f ms\n",
			s.At.Seconds(), s.RSS/(1<<20), s.Heap/(1<<20), s.Goroutines, s.FDs, s.Sent, s.Failed, s.Consumed, s.P50, s.P99, s.P999)
		if err := w.Write(s.record()); err != nil {
			return err
		}
		w.Flush()
		return w.Error()
	}
	tick := time.NewTicker(cfg.Sample)
	sendersDone := make(chan struct{})
	go func() { senders.Wait(); close(sendersDone) }()
sampling:
	for {
		select {
		case <-tick.C:
			if err := sample(); err != nil {
				tick.Stop()
				return res, err
			}
		case <-sendersDone:
			break sampling
		}
	}
	tick.Stop()
	if err := sample(); err != nil { // NB: the end of the run, whatever the phase of the ticker
		return res, err
	}
	res.Sent, res.Failed = sent.Load(), failed.Load()
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(log, "first send error: %v\n", e)
	}
	for deadline := time.Now().Add(2 * time.Minute); seen.count() < res.Sent && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // NB: a bounded wait for the consumer to catch up
	}
	res.Consumed = seen.count()
	if len(res.Samples) < 4 {
		return res, fmt.Errorf("only %d samples: run longer", len(res.Samples))
	}
	res.Trends = trends(res.Samples, cfg.Limits)
	if err := writeChart(cfg.Out+".png", res.Samples); err != nil {
		return res, fmt.Errorf("chart: %w", err)
	}
	return res, ctx.Err()
}

// percentiles returns the 50th, 99th and 99.9th percentiles and the
// maximum of ds, in milliseconds.
func percentiles(ds []time.Duration) (p50, p99, p999, maxMS float64) {
	if len(ds) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / 1e6 }
	return at(0.5), at(0.99), at(0.999), at(1)
}

// bitset records which sequence numbers were consumed (8 MiB for 67M).
type bitset struct {
	mu    sync.Mutex
	words []uint64
	n     int64
}

func newBitset(size int64) *bitset { return &bitset{words: make([]uint64, size/64+1)} }

func (b *bitset) set(i int64) {
	if i < 0 || i/64 >= int64(len(b.words)) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, bit := &b.words[i/64], uint64(1)<<(i%64); *w&bit == 0 {
		*w |= bit
		b.n++
	}
}

func (b *bitset) count() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// broker is a running mqbroker.
type broker struct {
	addr, ns, metrics string
	stop              func()
}

var servingRE = regexp.MustCompile(`serving on (\S+) \(nameserver (\S+),`)

// startBroker runs mqbroker with an embedded nameserver and its metrics
// endpoint on free loopback ports.
func startBroker(bin, store string, stderr io.Writer) (*broker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	metrics := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--store-dir", store, "--metrics-listen", metrics)
	cmd.Env = append(os.Environ(), "SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0")
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	b := &broker{metrics: metrics, stop: func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := servingRE.FindStringSubmatch(line)
	if err != nil || m == nil {
		b.stop()
		return nil, errors.Join(fmt.Errorf("mqbroker did not start: %q", line), err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	b.addr, b.ns = m[1], m[2]
	return b, nil
}

// sourceDir is the directory of this file, whatever the current directory.
func sourceDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}
