// Command flashsale runs the order pipeline through a flash sale: it starts
// a broker (sync flush; or uses -n), orders-api and orders-worker, posts
// -orders orders at -rate a second, far above the worker's -worker-rate,
// optionally kills the worker and the broker with SIGKILL in the middle of
// the drain and restarts them, waits for the backlog to drain and
// reconciles the API's database against the worker's. Its last line:
//
//	orders: accepted A, fulfilled F, missing M, duplicated D, out of order O, peak backlog B, drained in S s
//
// It exits 1 unless every order was fulfilled once and in order.
//
//	go -C examples/orders run ./cmd/flashsale
//	go -C examples/orders run ./cmd/flashsale -kill-worker -kill-broker -db postgres://user@host/db
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

	"github.com/sluicemq/sluice/examples/orders"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(2)
	}
	cfg.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
	fmt.Printf("api: posted %d, 201 %d, 503 %d, failed %d; orders recorded %d, fulfilments of unknown orders %d\n",
		res.Posted, res.Accepted, res.Refused, res.Failed, res.Recorded, res.Unknown)
	fmt.Println(res)
	if !res.OK() {
		os.Exit(1)
	}
}

func parseConfig(args []string, stderr io.Writer) (Config, error) {
	cfg := Config{Orders: 20000, Rate: 2000, Customers: 500, WorkerRate: 200, MaxDrain: 10 * time.Minute}
	fs := flag.NewFlagSet("flashsale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Orders, "orders", cfg.Orders, "orders to post")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "orders posted per second")
	fs.IntVar(&cfg.Customers, "customers", cfg.Customers, "customers; each one's orders are posted one after another")
	fs.IntVar(&cfg.WorkerRate, "worker-rate", cfg.WorkerRate, "the worker's cap, orders/s")
	fs.StringVar(&cfg.DB, "db", "", "postgres:// URL for both programs (its tables orders and fulfilments are dropped first); default SQLite files")
	fs.BoolVar(&cfg.KillWorker, "kill-worker", false, "kill -9 the worker in the middle of the drain, then restart it")
	fs.BoolVar(&cfg.KillBroker, "kill-broker", false, "kill -9 the broker in the middle of the drain, then restart it")
	fs.StringVar(&cfg.Namesrv, "n", "", "use the broker of this nameserver instead of starting one")
	fs.StringVar(&cfg.Console, "console", "", `the started broker's console address, or "off" (default: a free port)`)
	fs.StringVar(&cfg.BinDir, "bin", "", "directory of mqbroker, orders-api and orders-worker (default: built)")
	fs.DurationVar(&cfg.MaxDrain, "max-drain", cfg.MaxDrain, "give up waiting for the backlog after this long")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case cfg.Orders <= 0 || cfg.Rate <= 0 || cfg.Customers <= 0 || cfg.WorkerRate <= 0:
		return cfg, errors.New("-orders, -rate, -customers and -worker-rate must be > 0")
	case cfg.DB != "" && !orders.IsPostgres(cfg.DB):
		return cfg, fmt.Errorf("-db %q: want a postgres:// URL (SQLite is the default)", cfg.DB)
	}
	return cfg, nil
}
