package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/freeport"
	"github.com/stretchr/testify/require"
)

// binDir holds mqbroker, orders-api and orders-worker, built once.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flashsale-bin-")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err = build(ctx, dir)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flashsale test:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sale runs a flash sale at the tests' scale: 600 orders at 1,000/s into a
// worker capped at 300/s, so a backlog builds and drains in a few seconds.
func sale(t *testing.T, dsn string, killWorker, killBroker bool) Result {
	t.Helper()
	cfg := Config{Orders: 600, Rate: 1000, Customers: 50, WorkerRate: 300, DB: dsn, KillWorker: killWorker,
		KillBroker: killBroker, Console: "off", BinDir: binDir, MaxDrain: time.Minute}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	require.NoError(t, err)
	t.Log(res)
	require.Regexp(t, `^orders: accepted \d+, fulfilled \d+, missing \d+, duplicated \d+, out of order \d+, peak backlog \d+, drained in \d+\.\d s$`, res.String())
	require.Equal(t, 600, res.Accepted, "every order accepted: %+v", res)
	require.Equal(t, 600, res.Recorded)
	require.Equal(t, 600, res.Fulfilled)
	require.Zero(t, res.Missing)
	require.Zero(t, res.Duplicated)
	require.Zero(t, res.Unknown)
	require.Zero(t, res.OutOfOrder)
	require.Greater(t, res.PeakBacklog, 100, "the sale outran the worker")
	if killWorker || killBroker {
		require.Greater(t, res.KilledAt, 0)
		require.Less(t, res.KilledAt, 600, "the faults struck in the middle of the drain")
	}
	return res
}

// scenarios are the reconciliations the example promises: whatever is
// killed, every accepted order is fulfilled once, in order per customer.
var scenarios = []struct {
	name                   string
	killWorker, killBroker bool
}{{"no faults", false, false}, {"kill worker", true, false}, {"kill broker", false, true}, {"kill both", true, true}}

// TestFlashSale_SQLite: the four reconciliations on the default SQLite
// databases.
func TestFlashSale_SQLite(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sale(t, "", sc.killWorker, sc.killBroker) })
	}
}

// TestFlashSale_Postgres: the same on PostgreSQL, both programs in one
// database that a test cluster serves (Debian's package, initdb'd in a
// temporary directory).
func TestFlashSale_Postgres(t *testing.T) {
	dsn := startPostgres(t)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sale(t, dsn, sc.killWorker, sc.killBroker) })
	}
}

// TestParseConfig: the defaults are the flash sale, and bad flags
// are refused with a reason.
func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 20000, cfg.Orders)
	require.Equal(t, 2000, cfg.Rate)
	require.Equal(t, 200, cfg.WorkerRate)
	for _, args := range [][]string{{"-orders", "0"}, {"-db", "orders.db"}, {"extra"}, {"-kill-worker=maybe"}} {
		_, err := parseConfig(args, io.Discard)
		require.Error(t, err, "%q", args)
	}
	_, err = Run(context.Background(), Config{KillBroker: true, Namesrv: "127.0.0.1:9876"})
	require.ErrorContains(t, err, "--kill-broker needs the broker flashsale starts")
}

// startPostgres initdb's a PostgreSQL cluster in a temporary directory and
// starts it on a free port (its socket in that directory too), as a
// non-root user when the test runs as root; it is stopped at the end.
// Without PostgreSQL the test is skipped, or fails under CI=true.
func startPostgres(t *testing.T) string {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("PostgreSQL is not installed (apt-get install postgresql): the example's PostgreSQL tests need its initdb in /usr/lib/postgresql/*/bin")
		}
		t.Skip("PostgreSQL is not installed (apt-get install postgresql)")
	}
	pgbin := filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "flashsale-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	var as []string // the command prefix that runs as the cluster's owner
	if os.Geteuid() == 0 {
		// NB: PostgreSQL refuses to run as root.
		u, err := user.Lookup("nobody")
		require.NoError(t, err)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(t, os.Chmod(dir, 0o755))
		require.NoError(t, os.Chown(dir, uid, gid))
		as = []string{"runuser", "-u", "nobody", "--"}
	}
	run := func(name string, args ...string) {
		argv := append(append(as[:len(as):len(as)], filepath.Join(pgbin, name)), args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
	}
	data := filepath.Join(dir, "data")
	run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync")
	ports, err := freeport.Ports("127.0.0.1", 1, false)
	require.NoError(t, err)
	port := ports[0]
	run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60", "start",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", port, dir))
	t.Cleanup(func() { run("pg_ctl", "-D", data, "-m", "fast", "-w", "stop") })
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}
