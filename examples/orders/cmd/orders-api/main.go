// Command orders-api takes orders over HTTP. POST /orders with
// {"customer": "c-17", "items": 2, "amount": 4990} records the order in its
// database and publishes it to the worker with RocketMQ's transactional
// message pattern:
//
//  1. the order goes to the broker as a half message, stored (fsynced, with
//     the broker's sync flush) and invisible to consumers;
//  2. the order row is inserted and committed in the API's database (the
//     local transaction);
//  3. the message is committed, or rolled back if the insert failed.
//
// If the API dies between 2 and 3, the broker asks it later (the check-back)
// and the answer comes from the database: committed if the row is there,
// rolled back if not. So the order is in the database if and only if its
// message reaches the worker. The answer is 201 with the order id once both
// the half message and the row are durable, 503 with Retry-After when the
// broker refuses the half message (disk full, no master, unreachable):
// never a 201 for an order that could be lost.
//
//	orders-api -n 127.0.0.1:9876 -listen 127.0.0.1:8090 -db orders-api.db
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/examples/orders"
)

func main() {
	ns := flag.String("n", "127.0.0.1:9876", "nameservers, ip:port;ip:port")
	listen := flag.String("listen", "127.0.0.1:8090", "HTTP address (port 0 picks one)")
	dsn := flag.String("db", "orders-api.db", "SQLite file, or a postgres:// URL")
	flag.Parse()
	if err := run(*ns, *listen, *dsn); err != nil {
		fmt.Fprintln(os.Stderr, "orders-api:", err)
		os.Exit(1)
	}
}

func run(ns, listen, dsn string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := orders.Open(ctx, dsn, orders.OrdersTable)
	if err != nil {
		return err
	}
	defer db.Close()
	a := &api{db: db, inserts: make(chan insert, 1024)}
	go a.insertLoop()
	// NB: every instance of the API is in one producer group with the same
	// listener: the broker's check-back goes to any of them.
	a.p, err = client.NewProducer(client.WithNameServers(strings.Split(ns, ";")...), client.WithGroup("orders-api"),
		client.WithTransactionListener(a), client.WithQueueSelector(client.HashSelector()))
	if err != nil {
		return err
	}
	if err := a.p.Start(); err != nil {
		return err
	}
	defer a.p.Close()

	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", a.postOrder)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	fmt.Printf("orders-api: serving on %s\n", l.Addr()) // NB: flashsale waits for this line
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type api struct {
	db      *sql.DB
	p       *client.Producer
	inserts chan insert
}

func (a *api) postOrder(w http.ResponseWriter, r *http.Request) {
	var in struct { // NB: the id is the API's to give
		Customer string `json:"customer"`
		Items    int    `json:"items"`
		Amount   int64  `json:"amount"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		http.Error(w, "bad order: "+err.Error(), http.StatusBadRequest)
		return
	}
	if in.Customer == "" || len(in.Customer) > 128 || in.Items <= 0 || in.Amount <= 0 {
		http.Error(w, "bad order: want a customer (1..128 bytes), items > 0 and amount > 0", http.StatusBadRequest)
		return
	}
	o := orders.Order{ID: rand.Text(), Customer: in.Customer, Items: in.Items, Amount: in.Amount}
	body, _ := json.Marshal(o)
	// The customer is the sharding key: one customer's orders go to one
	// queue, which the worker consumes in order.
	res, err := a.p.SendInTransaction(r.Context(), &client.Message{Topic: orders.Topic, Tags: "created",
		Keys: []string{o.ID}, ShardingKey: o.Customer, Body: body})
	switch {
	case err != nil || res.Status != client.SendOK: // refused, unreachable, or stored but not flushed
		slog.Warn("orders-api: broker refused the order", "err", err, "status", res.Status)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the broker cannot take orders now; retry", http.StatusServiceUnavailable)
	case res.State == client.TransactionCommit:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]string{"id": o.ID})
	case res.State == client.TransactionUnknown: // the commit's outcome is unknown: the check-back decides
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the order could not be confirmed; retry", http.StatusServiceUnavailable)
	default:
		http.Error(w, "the order could not be recorded", http.StatusInternalServerError)
	}
}

// ExecuteLocal is the local transaction: the order row, inserted and
// committed while the broker holds the half message.
func (a *api) ExecuteLocal(ctx context.Context, m *client.Message) client.TransactionState {
	var o orders.Order
	if err := json.Unmarshal(m.Body, &o); err != nil {
		return client.TransactionRollback
	}
	// NB: well within the broker's transaction timeout (6 s by default),
	// after which it may ask CheckLocal about the order.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ins := insert{order: o, done: make(chan error, 1)}
	select {
	case a.inserts <- ins:
	case <-ctx.Done():
		return client.TransactionRollback // not queued: never inserted
	}
	select {
	case err := <-ins.done:
		if err != nil {
			// NB: a failed commit may still have committed (the
			// connection broke on the way back): the check-back reads
			// what is there.
			slog.Warn("orders-api: insert", "order", o.ID, "err", err)
			return client.TransactionUnknown
		}
		return client.TransactionCommit
	case <-ctx.Done():
		return client.TransactionUnknown // queued: it may still commit
	}
}

type insert struct {
	order orders.Order
	done  chan error
}

// insertLoop commits the orders that wait together in one transaction,
// one fsync for all of them (a group commit): one transaction per order
// would cap the API at the disk's fsync rate.
func (a *api) insertLoop() {
	for ins := range a.inserts {
		batch := []insert{ins}
		for len(batch) < 256 && len(a.inserts) > 0 {
			batch = append(batch, <-a.inserts)
		}
		err := a.insertAll(batch)
		for _, ins := range batch {
			ins.done <- err
		}
	}
}

func (a *api) insertAll(batch []insert) error {
	tx, err := a.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, ins := range batch {
		o := ins.order
		if _, err := tx.Exec(`INSERT INTO orders (id, customer, items, amount) VALUES ($1, $2, $3, $4)`,
			o.ID, o.Customer, o.Items, o.Amount); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// CheckLocal answers the broker's check-back about an undecided order
// from the database: the row is the truth.
func (a *api) CheckLocal(ctx context.Context, m *client.Message) client.TransactionState {
	var o orders.Order
	if err := json.Unmarshal(m.Body, &o); err != nil {
		return client.TransactionRollback
	}
	var n int
	if err := a.db.QueryRowContext(ctx, `SELECT count(*) FROM orders WHERE id = $1`, o.ID).Scan(&n); err != nil {
		return client.TransactionUnknown // asked again later
	}
	if n == 0 {
		return client.TransactionRollback
	}
	return client.TransactionCommit
}
