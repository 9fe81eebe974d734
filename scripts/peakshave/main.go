// Command peakshave is Sluice's peak-shaving demo: an order producer bursts at
// ten times the rate its downstream consumer can absorb, then idles; the
// broker holds the backlog and the capped consumer drains it. At the end it
// prints a summary (sent, consumed, lost, duplicates, peak backlog, drain
// time, producer errors) and writes a PNG chart of the produce and consume
// rates and, on its own axis below, the backlog over time.
//
//	go -C scripts/peakshave run .          # defaults: 5,000 msgs/s for 4 s, consumer capped at 500 msgs/s
//	go -C scripts/peakshave run . -burst 2s -rate 2000 -consume 200 -out /tmp/peak.png
//
// The chart goes to scripts/peakshave/peakshave.png (the README's), or to
// -out. The demo is its own module, so that the chart library stays out of
// the main module's dependencies. It builds and starts a standalone
// mqbroker (with its embedded nameserver) from this repository on free
// loopback ports with a temporary store, and stops it at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peakshave:", err)
		os.Exit(2)
	}
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

// parseConfig reads the demo's flags over DefaultConfig.
func parseConfig(args []string, stderr io.Writer) (Config, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("peakshave", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&cfg.Burst, "burst", cfg.Burst, "how long the producer bursts")
	fs.IntVar(&cfg.BurstRate, "rate", cfg.BurstRate, "producer rate during the burst, msgs/s")
	fs.IntVar(&cfg.ConsumeRate, "consume", cfg.ConsumeRate, "the consumer's capped rate, msgs/s")
	fs.StringVar(&cfg.Chart, "out", cfg.Chart, "PNG chart to write (empty: none)")
	fs.StringVar(&cfg.BrokerBin, "broker-bin", "", "mqbroker binary (default: go build ./cmd/mqbroker in this repository)")
	fs.DurationVar(&cfg.MaxDrain, "max-drain", cfg.MaxDrain, "give up waiting for the backlog to drain after this long")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return cfg, nil
}

// DefaultConfig is the demo's default scenario, its chart written next to
// this file, where the README shows it.
func DefaultConfig() Config {
	return Config{Burst: 4 * time.Second, BurstRate: 5000, ConsumeRate: 500, MaxDrain: 2 * time.Minute,
		Chart: filepath.Join(sourceDir(), "peakshave.png")}
}

// sourceDir is this demo's source directory, scripts/peakshave (the
// repository root is two levels up), or "" (the current directory) for a
// binary built with -trimpath.
func sourceDir() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Dir(file)
	}
	return ""
}

// mainModuleDir is the repository root, where the broker is built: two
// levels above sourceDir, or, built with -trimpath, the main module's
// directory as this module's go.mod replaces it (go list, run in the
// current directory, which must be inside this module).
func mainModuleDir(ctx context.Context) (string, error) {
	if dir := sourceDir(); dir != "" {
		return filepath.Join(dir, "..", ".."), nil
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/sluicemq/sluice").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return "", fmt.Errorf("cannot find the repository to build mqbroker in (run inside scripts/peakshave, or give -broker-bin): %v", err)
	}
	return dir, nil
}
