package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/examples/orders"
	"github.com/sluicemq/sluice/internal/freeport"
)

// Config is one flash sale.
type Config struct {
	Orders     int    // orders posted
	Rate       int    // orders/s posted
	Customers  int    // one customer's orders are posted one after another
	WorkerRate int    // the worker's cap, orders/s
	DB         string // "": SQLite files; or a postgres:// URL both programs use
	KillWorker bool   // kill -9 the worker in the middle of the drain, and restart it
	KillBroker bool   // the same for the broker
	Namesrv    string // use this broker's nameserver instead of starting a broker
	Console    string // the started broker's console address ("": a free port, "off")
	BinDir     string // mqbroker, orders-api and orders-worker; built when empty
	MaxDrain   time.Duration
	Log        io.Writer // progress lines; nil discards
}

// Result is the reconciliation of the API's database (and its answers)
// against the worker's.
type Result struct {
	Posted, Accepted, Refused, Failed int // answers: 201, 503, anything else
	Recorded                          int // rows in the API's database
	Fulfilled, Missing, Duplicated    int
	Unknown                           int // fulfilments of orders the API never recorded
	OutOfOrder, PeakBacklog           int
	KilledAt                          int           // fulfilments when the faults struck; -1: none
	Drain                             time.Duration // from the end of the burst to an empty backlog
}

// String is the reconciliation line, the last the flash sale prints.
func (r Result) String() string {
	return fmt.Sprintf("orders: accepted %d, fulfilled %d, missing %d, duplicated %d, out of order %d, peak backlog %d, drained in %.1f s",
		r.Accepted, r.Fulfilled, r.Missing, r.Duplicated, r.OutOfOrder, r.PeakBacklog, r.Drain.Seconds())
}

// OK reports a reconciliation with nothing lost, doubled or reordered.
func (r Result) OK() bool {
	return r.Missing == 0 && r.Duplicated == 0 && r.Unknown == 0 && r.OutOfOrder == 0 && r.Failed == 0 && r.Accepted > 0
}

// Run starts the pipeline (a broker unless cfg.Namesrv, the API, the
// worker), posts the orders, injects the faults asked for, waits for the
// backlog to drain and reconciles.
func Run(ctx context.Context, cfg Config) (Result, error) {
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "flashsale: "+format+"\n", a...)
		}
	}
	if cfg.KillBroker && cfg.Namesrv != "" {
		return Result{}, errors.New("--kill-broker needs the broker flashsale starts (not -n)")
	}
	dir, err := os.MkdirTemp("", "sluice-flashsale-")
	if err != nil {
		return Result{}, err
	}
	keep := true // NB: the logs stay for a failed sale
	defer func() {
		if keep {
			logf("logs kept in %s", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	bin := cfg.BinDir
	if bin == "" {
		bin = dir
		logf("building mqbroker, orders-api and orders-worker")
		if err := build(ctx, dir); err != nil {
			return Result{}, err
		}
	}
	ns := cfg.Namesrv
	var broker *proc
	if ns == "" {
		console := cfg.Console
		if console == "" {
			addrs, err := freeport.Addrs("127.0.0.1", 1)
			if err != nil {
				return Result{}, err
			}
			console = addrs[0]
		}
		if broker, err = newBroker(filepath.Join(bin, "mqbroker"), dir, console); err != nil {
			return Result{}, err
		}
		if err := broker.start(ctx); err != nil {
			return Result{}, err
		}
		defer broker.stop()
		ns = broker.Match[2]
		logf("broker %s (sync flush), nameserver %s", broker.Match[1], ns)
		if console != "off" {
			logf("console: http://%s/#/live (Live peak shaving: the backlog rising and draining)", console)
		}
	}
	if err := createTopic(ctx, ns); err != nil {
		return Result{}, err
	}
	apiDSN, workerDSN := filepath.Join(dir, "orders-api.db"), filepath.Join(dir, "orders-worker.db")
	if cfg.DB != "" {
		apiDSN, workerDSN = cfg.DB, cfg.DB
		if err := dropTables(ctx, cfg.DB); err != nil {
			return Result{}, err
		}
	}
	api := newAPI(bin, dir, ns, apiDSN)
	if err := api.start(ctx); err != nil {
		return Result{}, err
	}
	defer api.stop()
	worker := newWorker(bin, dir, ns, workerDSN, cfg.WorkerRate)
	if err := worker.start(ctx); err != nil {
		return Result{}, err
	}
	defer func() { worker.stop() }()
	apiDB, err := orders.Open(ctx, apiDSN, orders.OrdersTable)
	if err != nil {
		return Result{}, err
	}
	defer apiDB.Close()
	workerDB, err := orders.Open(ctx, workerDSN, orders.FulfilmentsTable)
	if err != nil {
		return Result{}, err
	}
	defer workerDB.Close()
	count := func(db *sql.DB, table string) (n int) {
		db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n)
		return n
	}

	res := Result{KilledAt: -1}
	var peak atomic.Int64
	l := &load{url: "http://" + api.Match[1] + "/orders", ids: map[string]bool{}}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the backlog: orders accepted and not yet fulfilled
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				peak.Store(max(peak.Load(), l.accepted.Load()-int64(count(workerDB, "fulfilments"))))
			}
		}
	}()
	logf("posting %d orders at %d/s from %d customers into a worker capped at %d/s", cfg.Orders, cfg.Rate, cfg.Customers, cfg.WorkerRate)
	start := time.Now()
	l.run(ctx, cfg)
	burstEnd := time.Now()
	res.Posted, res.Accepted, res.Refused, res.Failed = cfg.Orders, int(l.accepted.Load()), int(l.refused.Load()), int(l.failed.Load())
	res.Recorded = count(apiDB, "orders")
	logf("burst done in %.1f s: %d accepted, %d refused (503), %d failed; draining", burstEnd.Sub(start).Seconds(),
		res.Accepted, res.Refused, res.Failed)
	if l.firstFailure != nil {
		logf("first failure: %v", l.firstFailure)
	}

	if cfg.KillWorker || cfg.KillBroker {
		// NB: in the middle of the drain: half the backlog left.
		left := res.Recorded - count(workerDB, "fulfilments")
		for ctx.Err() == nil && res.Recorded-count(workerDB, "fulfilments") > left/2 {
			time.Sleep(20 * time.Millisecond)
		}
		res.KilledAt = count(workerDB, "fulfilments")
		if cfg.KillWorker {
			worker.kill()
			logf("worker killed (-9) at %d fulfilled", count(workerDB, "fulfilments"))
		}
		if cfg.KillBroker {
			broker.kill()
			logf("broker killed (-9) at %d fulfilled", count(workerDB, "fulfilments"))
			if err := broker.start(ctx); err != nil {
				return res, err
			}
			logf("broker restarted")
		}
		if cfg.KillWorker {
			if err := worker.start(ctx); err != nil {
				return res, err
			}
			logf("worker restarted")
		}
	}
	deadline := time.Now().Add(cfg.MaxDrain)
	for count(workerDB, "fulfilments") < res.Recorded && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	res.Drain = time.Since(burstEnd)
	close(stopSampling)
	<-sampled
	res.PeakBacklog = int(peak.Load())
	if err := reconcile(ctx, apiDB, workerDB, l.ids, &res); err != nil {
		return res, err
	}
	keep = !res.OK()
	return res, ctx.Err()
}

// load posts the orders: order i at start + i/rate, by customer i %
// customers, each customer waiting for its previous order's answer.
type load struct {
	url                       string
	accepted, refused, failed atomic.Int64
	mu                        sync.Mutex
	ids                       map[string]bool // the ids of the 201s
	firstFailure              error
}

func (l *load) run(ctx context.Context, cfg Config) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Customers}}
	defer hc.CloseIdleConnections()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range min(cfg.Customers, cfg.Orders) {
		wg.Go(func() {
			for i := c; i < cfg.Orders && ctx.Err() == nil; i += cfg.Customers {
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(cfg.Rate))))
				l.post(ctx, hc, orders.Order{Customer: fmt.Sprintf("c-%d", c), Items: 1 + i%3, Amount: int64(100 + i%900*10)})
			}
		})
	}
	wg.Wait()
}

func (l *load) post(ctx context.Context, hc *http.Client, o orders.Order) {
	body, _ := json.Marshal(o)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		l.fail(err)
		return
	}
	defer resp.Body.Close()
	var created struct{ ID string }
	switch {
	case resp.StatusCode == http.StatusCreated && json.NewDecoder(resp.Body).Decode(&created) == nil:
		l.mu.Lock()
		l.ids[created.ID] = true
		l.mu.Unlock()
		l.accepted.Add(1)
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		l.refused.Add(1)
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		l.fail(fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b)))
	}
}

func (l *load) fail(err error) {
	l.failed.Add(1)
	l.mu.Lock()
	l.firstFailure = cmp.Or(l.firstFailure, err)
	l.mu.Unlock()
}

// reconcile compares the API's orders (and its 201s) with the worker's
// fulfilments.
func reconcile(ctx context.Context, apiDB, workerDB *sql.DB, accepted map[string]bool, res *Result) error {
	placed := map[string]int64{} // order id → its seq in the API's database
	rows, err := apiDB.QueryContext(ctx, "SELECT seq, id FROM orders")
	if err != nil {
		return err
	}
	for rows.Next() {
		var seq int64
		var id string
		if err := rows.Scan(&seq, &id); err != nil {
			return err
		}
		placed[id] = seq
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	res.Recorded = len(placed)
	rows, err = workerDB.QueryContext(ctx, "SELECT order_id, customer FROM fulfilments ORDER BY seq")
	if err != nil {
		return err
	}
	done := map[string]int{}
	last := map[string]int64{} // customer → the highest seq fulfilled so far
	for rows.Next() {
		var id, customer string
		if err := rows.Scan(&id, &customer); err != nil {
			return err
		}
		if done[id]++; done[id] > 1 {
			res.Duplicated++
			continue
		}
		seq, ok := placed[id]
		if !ok {
			res.Unknown++
			continue
		}
		res.Fulfilled++
		if seq < last[customer] {
			res.OutOfOrder++
		}
		last[customer] = max(last[customer], seq)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for id := range placed {
		if done[id] == 0 {
			res.Missing++
		}
	}
	for id := range accepted {
		if _, ok := placed[id]; !ok {
			res.Missing++ // a 201 for an order the API did not record
		}
	}
	return nil
}

// createTopic creates the orders topic, ordered, with 8 queues (the API
// shards customers over them), before the worker subscribes.
func createTopic(ctx context.Context, ns string) error {
	a, err := client.NewAdmin(client.WithNameServers(strings.Split(ns, ";")...))
	if err != nil {
		return err
	}
	defer a.Close()
	var errs error
	for range 50 { // NB: a broker just started may not have registered yet
		if errs = a.CreateTopic(ctx, client.TopicSpec{Topic: orders.Topic, ReadQueues: 8, WriteQueues: 8, Order: true}); errs == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("create topic %s: %w", orders.Topic, errs)
}

// dropTables empties a PostgreSQL database of the example's tables.
func dropTables(ctx context.Context, dsn string) error {
	db, err := orders.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "DROP TABLE IF EXISTS orders, fulfilments")
	return err
}
