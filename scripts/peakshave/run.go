package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/client"
)

// Config is one demo run.
type Config struct {
	Burst       time.Duration // producer burst length
	BurstRate   int           // msgs/s during the burst
	ConsumeRate int           // consumer cap, msgs/s
	Chart       string        // PNG path, "" for none
	BrokerBin   string        // mqbroker binary; built when empty
	MaxDrain    time.Duration // safety bound on the drain
	Log         io.Writer     // progress lines; nil discards
}

// Sample is the state every sampling period.
type Sample struct {
	At       time.Duration // since the burst started
	Acked    int64         // sends acknowledged so far
	Consumed int64         // distinct messages consumed so far
}

// Summary is what the demo reports.
type Summary struct {
	Sent, Acked, Consumed int64
	Lost, Duplicates      int64
	ProducerErrors        int64 // failed sends, SYSTEM_BUSY included
	PeakBacklog           int64
	BurstEnd, DrainTime   time.Duration // drain time: from the end of the burst to an empty backlog
	Samples               []Sample
}

// Print writes the summary for people.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "sent %d, acknowledged %d, consumed %d, lost %d, duplicates %d\n", s.Sent, s.Acked, s.Consumed, s.Lost, s.Duplicates)
	fmt.Fprintf(w, "peak backlog %d messages; drained %.1fs after the burst ended; producer errors %d (busy included)\n",
		s.PeakBacklog, s.DrainTime.Seconds(), s.ProducerErrors)
}

const sampleEvery = 100 * time.Millisecond

// Run starts a broker, runs the burst and the capped consumer, and waits for
// the backlog to drain.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", a...)
		}
	}
	tmp, err := os.MkdirTemp("", "sluice-peakshave-")
	if err != nil {
		return Summary{}, err
	}
	defer os.RemoveAll(tmp)
	bin := cfg.BrokerBin
	if bin == "" {
		bin = filepath.Join(tmp, "mqbroker")
		// NB: built in the main module, whose go.sum covers the broker's
		// dependencies (this module's covers only the client's).
		root, err := mainModuleDir(ctx)
		if err != nil {
			return Summary{}, err
		}
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/mqbroker")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return Summary{}, fmt.Errorf("build mqbroker (or give -broker-bin): %v: %s", err, out)
		}
	}
	brokerAddr, nsAddr, stop, err := startBroker(bin, filepath.Join(tmp, "store"))
	if err != nil {
		return Summary{}, err
	}
	defer stop()
	logf("broker %s, nameserver %s", brokerAddr, nsAddr)

	const topic, group = "orders", "order-workers"
	p, err := client.NewProducer(client.WithNameServers(nsAddr), client.WithGroup("order-service"))
	if err != nil {
		return Summary{}, err
	}
	if err := p.Start(); err != nil {
		return Summary{}, err
	}
	defer p.Close()
	// Create the topic before the consumer subscribes.
	if _, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte("warm-up"), Tags: "warmup"}); err != nil {
		return Summary{}, fmt.Errorf("warm-up send: %w", err)
	}

	var mu sync.Mutex
	consumed := map[string]int{}
	var distinct atomic.Int64
	tick := time.NewTicker(time.Second / time.Duration(cfg.ConsumeRate))
	defer tick.Stop()
	c, err := client.NewPushConsumer(group, client.WithNameServers(nsAddr), client.WithConsumeFrom(client.ConsumeFromLast),
		client.WithConsumeGoroutines(1), client.WithConsumeBatchSize(1))
	if err != nil {
		return Summary{}, err
	}
	err = c.Subscribe(topic, "order", func(ctx context.Context, msgs []*client.Message) client.ConsumeResult {
		for _, m := range msgs {
			select {
			case <-tick.C: // the downstream's capacity
			case <-ctx.Done():
				return client.ConsumeRetryLater
			}
			mu.Lock()
			if consumed[m.MsgID]++; consumed[m.MsgID] == 1 {
				distinct.Add(1)
			}
			mu.Unlock()
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		return Summary{}, err
	}
	if err := c.Start(); err != nil {
		return Summary{}, err
	}
	defer c.Close()

	var sum Summary
	var acked, failed atomic.Int64
	var ackedMu sync.Mutex
	ackedIDs := map[string]bool{}
	total := int(cfg.Burst.Seconds() * float64(cfg.BurstRate))
	start := time.Now()
	samplerDone := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(samplerDone)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case now := <-t.C:
				s := Sample{At: now.Sub(start), Acked: acked.Load(), Consumed: distinct.Load()}
				sum.Samples = append(sum.Samples, s)
				sum.PeakBacklog = max(sum.PeakBacklog, s.Acked-s.Consumed)
			}
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < total && ctx.Err() == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(cfg.BurstRate))); d > 0 {
			time.Sleep(d)
		}
		m := &client.Message{Topic: topic, Tags: "order", Keys: []string{"order-" + strconv.Itoa(i)},
			Body: []byte(fmt.Sprintf(`{"order":%d,"amount":%d}`, i, 100+i%900))}
		wg.Add(1)
		p.SendAsync(ctx, m, func(r client.SendResult, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
				return
			}
			ackedMu.Lock()
			ackedIDs[r.MsgID] = true
			ackedMu.Unlock()
			acked.Add(1)
		})
	}
	sum.Sent = int64(total)
	wg.Wait()
	sum.BurstEnd = time.Since(start)
	logf("burst done: %d sent in %.1fs, %d acknowledged, %d failed; draining at %d msgs/s",
		total, sum.BurstEnd.Seconds(), acked.Load(), failed.Load(), cfg.ConsumeRate)
	deadline := time.Now().Add(cfg.MaxDrain)
	for distinct.Load() < acked.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	sum.DrainTime = time.Since(start) - sum.BurstEnd
	time.Sleep(2 * sampleEvery) // a flat tail on the chart
	close(stopSampling)
	<-samplerDone

	sum.Acked, sum.ProducerErrors = acked.Load(), failed.Load()
	mu.Lock()
	for id, n := range consumed {
		if ackedIDs[id] {
			sum.Consumed++
		}
		if n > 1 {
			sum.Duplicates += int64(n - 1)
		}
	}
	mu.Unlock()
	for id := range ackedIDs {
		if consumed[id] == 0 {
			sum.Lost++
		}
	}
	if cfg.Chart != "" {
		if err := writeChart(cfg.Chart, sum); err != nil {
			return sum, fmt.Errorf("chart: %w", err)
		}
		logf("chart written to %s", cfg.Chart)
	}
	return sum, ctx.Err()
}

var servingRE = regexp.MustCompile(`serving on (\S+) \(nameserver (\S+),`)

// startBroker runs mqbroker with an embedded nameserver on free ports.
func startBroker(bin, store string) (broker, ns string, stop func(), err error) {
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--store-dir", store)
	cmd.Env = append(os.Environ(), "SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", "", nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	m := servingRE.FindStringSubmatch(line)
	if err != nil || m == nil {
		stop()
		return "", "", nil, errors.Join(errors.New("mqbroker did not start"), err)
	}
	go io.Copy(io.Discard, out)
	return m[1], m[2], stop, nil
}
