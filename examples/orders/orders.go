// Package orders is what the order pipeline's programs share: the order as
// it travels in a message, the topic, and the databases (SQLite by default,
// PostgreSQL for a postgres:// URL).
//
//	orders-api     POST /orders → the order row and a transactional message, together
//	orders-worker  the messages → the fulfilments table, capped, once per order, in order per customer
//	flashsale      a burst of orders into the API, faults on request, then the reconciliation
package orders

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	_ "modernc.org/sqlite"             // driver "sqlite", pure Go
)

// Topic carries the orders from the API to the worker.
const Topic = "orders"

// Order is the body of an order message.
type Order struct {
	ID       string `json:"id,omitempty"`
	Customer string `json:"customer"`
	Items    int    `json:"items"`
	Amount   int64  `json:"amount"` // in cents
}

// The tables. %s is the dialect's auto-increment key: seq numbers the
// rows in the order they were committed.
const (
	OrdersTable = `CREATE TABLE IF NOT EXISTS orders (
		seq %s, id TEXT NOT NULL UNIQUE, customer TEXT NOT NULL,
		items INTEGER NOT NULL, amount BIGINT NOT NULL)`
	FulfilmentsTable = `CREATE TABLE IF NOT EXISTS fulfilments (
		seq %s, order_id TEXT NOT NULL UNIQUE, customer TEXT NOT NULL, amount BIGINT NOT NULL)`
)

// IsPostgres tells a PostgreSQL URL from a SQLite file name.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Open opens dsn, a postgres:// URL or a SQLite file, and creates the
// tables given that are missing.
func Open(ctx context.Context, dsn string, tables ...string) (*sql.DB, error) {
	driver, key := "pgx", "BIGSERIAL PRIMARY KEY"
	if !IsPostgres(dsn) {
		// NB: WAL lets the flash sale read while the program writes;
		// synchronous FULL makes a commit durable before it returns.
		driver, key = "sqlite", "INTEGER PRIMARY KEY AUTOINCREMENT"
		dsn = "file:" + dsn + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	if driver == "sqlite" {
		db.SetMaxOpenConns(1) // one writer at a time anyway; no busy waits between our own connections
	}
	for _, t := range tables {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(t, key)); err != nil {
			db.Close()
			return nil, fmt.Errorf("create table: %w", err)
		}
	}
	return db, nil
}
