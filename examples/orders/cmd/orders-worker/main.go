// Command orders-worker fulfils orders: it consumes the orders topic at
// most at -rate orders a second (what its database takes), writing each
// order to its fulfilments table once.
//
//   - Exactly-once effect: the order id is the table's unique key, so a
//     message delivered again (after a crash, before its offset was
//     committed) changes nothing; and the handler acknowledges a batch only
//     after its database transaction committed, so the consumer offset, which
//     the client commits from acknowledged messages only, never passes an
//     order that is not in the table.
//
//   - In order per customer: the API shards by customer, and this consumer
//     is orderly (each queue locked on the broker and consumed by one
//     handler at a time), so one customer's orders are fulfilled in the order
//     they were placed.
//
// Usage:
//
//	orders-worker -n 127.0.0.1:9876 -db orders-worker.db -rate 200
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/examples/orders"
)

func main() {
	ns := flag.String("n", "127.0.0.1:9876", "nameservers, ip:port;ip:port")
	dsn := flag.String("db", "orders-worker.db", "SQLite file, or a postgres:// URL")
	rate := flag.Int("rate", 200, "orders fulfilled per second at most (the downstream's capacity)")
	// NB: the broker keeps a dead orderly consumer's queue locks for 60 s
	// unless the same client id comes back: a restarted worker takes its
	// queues at once only under the same name.
	name := flag.String("name", "worker-1", "this worker's name, unique in its group and stable across restarts")
	flag.Parse()
	if *rate <= 0 {
		fmt.Fprintln(os.Stderr, "orders-worker: -rate must be > 0")
		os.Exit(2)
	}
	if err := run(*ns, *dsn, *rate, *name); err != nil {
		fmt.Fprintln(os.Stderr, "orders-worker:", err)
		os.Exit(1)
	}
}

func run(ns, dsn string, rate int, name string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := orders.Open(ctx, dsn, orders.FulfilmentsTable)
	if err != nil {
		return err
	}
	defer db.Close()
	c, err := client.NewPushConsumer("orders-fulfilment", client.WithNameServers(strings.Split(ns, ";")...),
		client.WithOrderly(true), client.WithConsumeFrom(client.ConsumeFromFirst), client.WithInstanceName(name),
		client.WithConsumeBatchSize(16))
	if err != nil {
		return err
	}
	limit := &pacer{every: time.Second / time.Duration(rate)} // NB: shared by every queue
	err = c.Subscribe(orders.Topic, "*", func(ctx context.Context, msgs []*client.Message) client.ConsumeResult {
		if limit.wait(ctx, len(msgs)) != nil {
			return client.ConsumeRetryLater // closing
		}
		if err := fulfil(ctx, db, msgs); err != nil {
			slog.Warn("orders-worker: fulfil; retrying the batch", "err", err)
			return client.ConsumeRetryLater // NB: orderly: the queue waits and retries in place
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("orders-worker: consuming") // NB: flashsale waits for this line
	<-ctx.Done()
	return nil
}

// fulfil records the orders of msgs in one transaction; an order already
// there (a redelivery) is skipped by its unique key.
func fulfil(ctx context.Context, db *sql.DB, msgs []*client.Message) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, m := range msgs {
		var o orders.Order
		if err := json.Unmarshal(m.Body, &o); err != nil || o.ID == "" {
			slog.Error("orders-worker: not an order; skipped", "msg_id", m.MsgID, "err", err)
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO fulfilments (order_id, customer, amount) VALUES ($1, $2, $3)
			ON CONFLICT (order_id) DO NOTHING`, o.ID, o.Customer, o.Amount); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// pacer spaces the batches so that orders go at most one every "every".
type pacer struct {
	every time.Duration
	mu    sync.Mutex
	next  time.Time // the earliest start of the next batch
}

// wait waits for the turn of a batch of n orders.
func (p *pacer) wait(ctx context.Context, n int) error {
	p.mu.Lock()
	at := p.next
	if now := time.Now(); at.Before(now) {
		at = now // NB: time not used is lost: no burst after a slow spell
	}
	p.next = at.Add(time.Duration(n) * p.every)
	p.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
