// Command peakshave is Sluice's peak-shaving demo: an order producer bursts at
// ten times the rate its downstream consumer can absorb, then idles; the
// broker holds the backlog and the capped consumer drains it. At the end it
// prints a summary (sent, consumed, lost, duplicates, peak backlog, drain
// time, producer errors) and writes a PNG chart of the produce rate, the
// consume rate and the backlog over time.
//
//	go run ./scripts/peakshave                       # defaults: 5,000 msgs/s for 4 s, consumer capped at 500 msgs/s
//	go run ./scripts/peakshave -burst 2s -rate 2000 -consume 200 -chart /tmp/peak.png
//
// It builds and starts a standalone mqbroker (with its embedded nameserver)
// on free loopback ports with a temporary store, and stops it at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	cfg := DefaultConfig()
	flag.DurationVar(&cfg.Burst, "burst", cfg.Burst, "how long the producer bursts")
	flag.IntVar(&cfg.BurstRate, "rate", cfg.BurstRate, "producer rate during the burst, msgs/s")
	flag.IntVar(&cfg.ConsumeRate, "consume", cfg.ConsumeRate, "the consumer's capped rate, msgs/s")
	flag.StringVar(&cfg.Chart, "chart", cfg.Chart, "PNG chart to write (empty: none)")
	flag.StringVar(&cfg.BrokerBin, "broker-bin", "", "mqbroker binary (default: go build ./cmd/mqbroker)")
	flag.DurationVar(&cfg.MaxDrain, "max-drain", cfg.MaxDrain, "give up waiting for the backlog to drain after this long")
	flag.Parse()
	cfg.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sum, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peakshave:", err)
		os.Exit(1)
	}
	sum.Print(os.Stdout)
	if sum.Lost > 0 || sum.ProducerErrors > 0 {
		os.Exit(1)
	}
}

// DefaultConfig is the demo's default scenario.
func DefaultConfig() Config {
	return Config{Burst: 4 * time.Second, BurstRate: 5000, ConsumeRate: 500, Chart: "peakshave.png", MaxDrain: 2 * time.Minute}
}
