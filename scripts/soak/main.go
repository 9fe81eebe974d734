// Command soak runs a broker at a fixed send rate for a given duration and
// watches it for leaks: every sampling period it reads the broker's
// resident memory, heap, goroutines and open descriptors from its /metrics
// (process_resident_memory_bytes, go_memstats_heap_inuse_bytes,
// go_goroutines, process_open_fds) and the send latency percentiles of the
// period, writes them to a CSV file and at the end draws them in a PNG
// chart. It fails (exit 1) when a send failed, a message was not consumed,
// or a series grows without bound: the slope of a least-squares line
// through the second half of its samples is above the series' limit per
// hour and would add more than its noise floor over that half.
//
//	scripts/soak.sh -duration 2h                 # 2,000 msgs/s, a sample every 30 s
//	scripts/soak.sh -duration 3m -sample 10s -rate 1000 -out /tmp/soak
//
// It builds and starts mqbroker from this repository (with its embedded
// nameserver) on free loopback ports with a temporary store, sends 1 KiB
// messages with synchronous sends from -senders goroutines paced to -rate
// (latency is measured from each send's scheduled time, so a stall is
// not hidden by the senders falling behind), and consumes them with a push
// consumer. Not run in CI: it is meant for hours. It is its own module, so
// that the chart library stays out of the main module's dependencies.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	fmt.Printf("sent %d, failed %d, consumed %d; %s and %s written\n", res.Sent, res.Failed, res.Consumed,
		cfg.Out+".csv", cfg.Out+".png")
	failed := res.Failed > 0 || res.Consumed < res.Sent
	for _, tr := range res.Trends {
		fmt.Println(tr)
		failed = failed || tr.Grows
	}
	if failed {
		fmt.Println("FAIL")
		os.Exit(1)
	}
	fmt.Println("PASS")
}

// Config is one soak run.
type Config struct {
	Duration  time.Duration
	Sample    time.Duration
	Rate      int // msgs/s
	Senders   int
	BodySize  int
	Out       string // path prefix of the .csv and .png files
	BrokerBin string // mqbroker binary; built when empty
	Limits    []Limit
}

func parseConfig(args []string, stderr io.Writer) (Config, error) {
	cfg := Config{Duration: time.Hour, Sample: 30 * time.Second, Rate: 2000, Senders: 32, BodySize: 1024,
		Out: "soak", Limits: DefaultLimits()}
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to send")
	fs.DurationVar(&cfg.Sample, "sample", cfg.Sample, "sampling period")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "sends per second")
	fs.IntVar(&cfg.Senders, "senders", cfg.Senders, "goroutines sending synchronously")
	fs.IntVar(&cfg.BodySize, "body", cfg.BodySize, "message body bytes")
	fs.StringVar(&cfg.Out, "out", cfg.Out, "path prefix of the CSV and PNG files (PREFIX.csv, PREFIX.png)")
	fs.StringVar(&cfg.BrokerBin, "broker-bin", "", "mqbroker binary (default: go build ./cmd/mqbroker in this repository)")
	for i := range cfg.Limits {
		l := &cfg.Limits[i]
		fs.Float64Var(&l.PerHour, "max-"+l.Flag+"-per-hour", l.PerHour, "growth limit of "+l.Name+" ("+l.Unit+" per hour)")
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case cfg.Sample <= 0 || cfg.Duration < 4*cfg.Sample:
		return cfg, fmt.Errorf("-duration (%v) must be at least 4 -sample periods (%v), and -sample > 0", cfg.Duration, cfg.Sample)
	case cfg.Rate <= 0 || cfg.Senders <= 0 || cfg.BodySize <= 0:
		return cfg, errors.New("-rate, -senders and -body must be > 0")
	}
	return cfg, nil
}
