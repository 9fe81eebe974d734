package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/nameserver"
	"github.com/stretchr/testify/require"
)

func startCluster(t *testing.T) string { return startClusterRole(t, "") }

// startClusterRole starts a nameserver and a broker of role ("": the
// default, ASYNC_MASTER).
func startClusterRole(t *testing.T, role string) string {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nc := conf.DefaultNameserver()
	nc.Listen = "127.0.0.1:0"
	ns, err := nameserver.New(nc, quiet)
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })
	bc := conf.DefaultBroker()
	bc.Listen = "127.0.0.1:0"
	bc.NamesrvAddr = ns.Addr()
	bc.Store.Dir = t.TempDir()
	bc.Store.SegmentSize = 64 << 20
	if role != "" {
		bc.Role = role
	}
	b, err := broker.New(bc, broker.Options{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })
	return ns.Addr()
}

func runJSON(t *testing.T, args ...string) Report {
	t.Helper()
	var out, errb strings.Builder
	require.Equal(t, 0, run(args, &out, &errb), errb.String())
	var r Report
	require.NoError(t, json.Unmarshal([]byte(out.String()), &r), out.String())
	return r
}

func TestMQBench(t *testing.T) {
	ns := startCluster(t)
	// NB: every run is bounded by --count, not by time, so that a slow
	// machine makes it slower, not shorter; --duration is only a safety
	// bound.
	p := runJSON(t, "produce", "-n", ns, "-t", "bench", "--size", "256", "--count", "500", "--duration", "60s", "--json")
	require.Equal(t, int64(500), p.Messages)
	require.Zero(t, p.Errors)
	require.Equal(t, map[string]int64{"SEND_OK": 500}, p.Statuses)
	require.Greater(t, p.LatencyP50, 0.0)
	require.GreaterOrEqual(t, p.LatencyMax, p.LatencyP99)

	b := runJSON(t, "produce", "-n", ns, "-t", "bench", "--batch", "8", "--rate", "800", "--count", "203", "--duration", "60s", "--json")
	require.Equal(t, int64(203), b.Messages, "batches of 8, the last cut to the count")

	s := runJSON(t, "produce", "-n", ns, "-t", "bench", "--sync", "--senders", "4", "--count", "100", "--duration", "60s", "--json")
	require.Equal(t, int64(100), s.Messages)
	require.Zero(t, s.Errors)

	total := p.Messages + b.Messages + s.Messages
	c := runJSON(t, "consume", "-n", ns, "-t", "bench", "-g", "g1", "--pull-batch", "64", "--count", strconv.FormatInt(total, 10),
		"--duration", "60s", "--json")
	require.Equal(t, total, c.Messages, "a new group from the first offset reads everything produced")

	e := runJSON(t, "e2e", "-n", ns, "-t", "e2e", "-g", "g2", "--rate", "200", "--count", "100", "--duration", "60s", "--json")
	require.Greater(t, e.Messages, int64(0))
	require.Greater(t, e.LatencyP50, 0.0)
	require.NotNil(t, e.Stages, "e2e breaks its latency down")
	// NB: the store timestamp is in ms, so each part may exceed the whole by
	// up to 1 ms, no more.
	require.LessOrEqual(t, e.Stages.ToStoreMax, e.LatencyMax+1)
	require.LessOrEqual(t, e.Stages.FromStoreMax, e.LatencyMax+1)

	// Messages an earlier run left for the group (here produce's, whose
	// bodies carry no send time) are left out of the next e2e's figures.
	runJSON(t, "produce", "-n", ns, "-t", "e2e", "--size", "64", "--count", "50", "--duration", "60s", "--json")
	e = runJSON(t, "e2e", "-n", ns, "-t", "e2e", "-g", "g2", "--rate", "200", "--count", "100", "--duration", "60s", "--json")
	require.NotNil(t, e.Stages)
	require.GreaterOrEqual(t, e.Stages.Stale, int64(50), "the group resumes where it stopped: before produce's 50")
	require.Less(t, e.LatencyMax, 60_000.0, "a message of an earlier run counted")

	var out, errb strings.Builder
	require.Equal(t, 2, run([]string{"nope"}, &out, &errb))
	require.Equal(t, 2, run([]string{"produce", "--size", "1"}, &out, &errb))
	require.Equal(t, 2, run([]string{"produce", "--senders", "0"}, &out, &errb))
	require.Equal(t, 1, run([]string{"produce", "-n", "127.0.0.1:1", "--duration", "500ms"}, &out, &errb), "no nameserver: an error, not a hang")
	require.Contains(t, errb.String(), "dial tcp 127.0.0.1:1: connect: connection refused")
}

// TestOptions_BadInput: a usage error names what is wrong: the mode, or
// the flag at fault with its value and what it takes.
func TestOptions_BadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "mqbench: no mode given"},
		{[]string{"prodce"}, `mqbench: unknown mode "prodce"`},
		{[]string{"--size", "8", "produce"}, "mqbench: the mode comes first, before --size"},
		{[]string{"produce", "--size", "1"}, "mqbench: --size 1: give 8 to 4194304 bytes"},
		{[]string{"produce", "--size", "100000000"}, "mqbench: --size 100000000: give 8 to 4194304 bytes"},
		{[]string{"produce", "--senders", "0"}, "mqbench: --senders 0: give at least 1"},
		{[]string{"consume", "--pull-batch", "-3"}, "mqbench: --pull-batch -3: give at least 1"},
		{[]string{"produce", "--auto-batch", "1"}, "mqbench: --auto-batch 1: give 0 (off) or at least 2"},
		{[]string{"e2e", "--rate", "-1"}, "mqbench: --rate -1: give 0 (flat out) or more"},
		{[]string{"produce", "--duration", "0s"}, "mqbench: --duration 0s: give more than 0"},
	} {
		var errb strings.Builder
		_, ok := parseOptions(tc.args, &errb)
		require.False(t, ok, "%v", tc.args)
		require.Contains(t, errb.String(), tc.want, "%v", tc.args)
	}
}

// TestFewErrors: a failed run's errors, each message once with its count,
// and no more than maxShown different ones.
func TestFewErrors(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	var errs []error
	for range 1000 {
		errs = append(errs, refused)
	}
	err := fewErrors(append(errs, errors.New("b"), errors.New("c"), errors.New("d"), errors.New("e")))
	require.ErrorIs(t, err, refused)
	require.Equal(t, "dial tcp 127.0.0.1:1: connect: connection refused (1000 times)\nb\nc\nand 2 more different errors", err.Error())
	require.Equal(t, "x", fewErrors([]error{errors.New("x")}).Error())
	require.NoError(t, fewErrors(nil))
}

// TestOptions_CountAndDuration: --count replaces the default duration, not
// one given, even when it equals the default.
func TestOptions_CountAndDuration(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"produce"}, 10 * time.Second},
		{[]string{"produce", "--count", "5"}, time.Hour},
		{[]string{"produce", "--count", "5", "--duration", "10s"}, 10 * time.Second},
		{[]string{"produce", "--duration", "10s", "--count", "5"}, 10 * time.Second},
		{[]string{"e2e", "--count", "5", "--duration", "3s"}, 3 * time.Second},
	} {
		var errb strings.Builder
		o, ok := parseOptions(tc.args, &errb)
		require.True(t, ok, errb.String())
		require.Equal(t, tc.want, o.duration, "%v", tc.args)
	}
}

// TestProbe: e2e's producers start only once the consumers get messages
// from every queue of the topic; without consumers, probing ends with an
// error that says how far it got, not a hang.
func TestProbe(t *testing.T) {
	ns := startCluster(t)
	o := options{mode: "e2e", namesrv: ns, topic: "probe-t", group: "probe-g", consumers: 1, pullBatch: 32}
	require.NoError(t, warmUp(t.Context(), o))

	var c counters
	// NB: the probe gives up after its wait, once a round of sends has
	// reached every queue, however long the sends take (a deadline on the
	// context could end the first send, before the route was known: "0 of
	// 0 queues" on a loaded machine).
	short := o
	short.probeWait = time.Second
	err := probe(t.Context(), short, &c)
	require.ErrorContains(t, err, "consumers ready on 0 of 4 queues: gave up after 1s")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c.done = cancel
	done := make(chan struct{})
	go func() { defer close(done); consume(ctx, o, 0, &c, func(err error) { t.Error(err) }) }()
	require.NoError(t, probe(ctx, o, &c))
	require.EqualValues(t, 4, c.probedQueues.Load(), "a probe from each of the topic's 4 queues (the client's default for a new topic)")
	require.Zero(t, c.msgs.Load(), "probes are not counted as messages")
	cancel()
	<-done
}

// TestConsume_SQL: consume --sql counts only the messages whose properties
// match (messages lacking the property do not): asked for one more than
// match, it runs to its --duration with exactly the matching ones.
func TestConsume_SQL(t *testing.T) {
	ns := startCluster(t)
	p, err := client.NewProducer(client.WithNameServers(ns), client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 60 {
		m := &client.Message{Topic: "sqlbench", Body: make([]byte, 16), Tags: "bench",
			Properties: map[string]string{"n": strconv.Itoa(i)}}
		if i%3 == 2 {
			m.Properties = nil
		}
		_, err := p.Send(ctx, m)
		require.NoError(t, err)
	}
	// n < 30 and present: 0, 1, 3, 4, ..., 27, 28: 20 messages.
	c := runJSON(t, "consume", "-n", ns, "-t", "sqlbench", "-g", "gsql", "--sql", "n < 30", "--count", "21", "--duration", "8s", "--json")
	require.Equal(t, int64(20), c.Messages)

	var out, errb strings.Builder
	require.Equal(t, 2, run([]string{"consume", "--sql", "n <"}, &out, &errb))
	require.Contains(t, errb.String(), `mqbench: --sql "n <": filter: column 4`)
	require.Equal(t, 2, run([]string{"e2e", "--sql", "n < 30"}, &out, &errb))
	require.Contains(t, errb.String(), "--sql is for consume")
}

// TestOptions_Credentials: --access-key/--secret-key, else the
// environment; one without the other is a usage error.
func TestOptions_Credentials(t *testing.T) {
	var errb strings.Builder
	o, ok := parseOptions([]string{"produce", "--access-key", "alice1", "--secret-key", "s3cret-1"}, &errb)
	require.True(t, ok, errb.String())
	require.Equal(t, "alice1", o.creds.AccessKey)
	require.Equal(t, "s3cret-1", o.creds.SecretKey)

	t.Setenv("SLUICE_ACCESS_KEY", "bobbob")
	t.Setenv("SLUICE_SECRET_KEY", "s3cret-2")
	o, ok = parseOptions([]string{"consume"}, &errb)
	require.True(t, ok, errb.String())
	require.Equal(t, "bobbob", o.creds.AccessKey)
	require.Equal(t, "s3cret-2", o.creds.SecretKey)

	t.Setenv("SLUICE_SECRET_KEY", "")
	_, ok = parseOptions([]string{"produce"}, &errb)
	require.False(t, ok)
	require.Contains(t, errb.String(), "give --access-key and --secret-key together")
}

// TestProfiles: --cpuprofile and --memprofile write profiles of the run;
// the allocation profile names the allocations of the send loop.
func TestProfiles(t *testing.T) {
	ns := startCluster(t)
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	r := runJSON(t, "produce", "-n", ns, "-t", "prof", "--size", "256", "--count", "2000", "--duration", "60s", "--json",
		"--cpuprofile", cpu, "--memprofile", mem)
	require.Equal(t, int64(2000), r.Messages)
	for _, f := range []string{cpu, mem} {
		st, err := os.Stat(f)
		require.NoError(t, err)
		require.Positive(t, st.Size(), f)
	}
	f, err := os.Open(mem)
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err, "a profile is gzipped protobuf")
	raw, err := io.ReadAll(z)
	require.NoError(t, err)
	require.Contains(t, string(raw), "alloc_space", "an allocation profile")
	require.Contains(t, string(raw), "sendLoop", "the run's allocations, not an empty profile")

	var out, errb strings.Builder
	require.Equal(t, 1, run([]string{"produce", "--memprofile", filepath.Join(dir, "no", "such", "dir", "m.prof")}, &out, &errb))
	require.Contains(t, errb.String(), "mqbench: --memprofile:")
}

// TestProduce_CountsSendStatuses: a SYNC_MASTER with no slave stores every
// send but answers SEND_SLAVE_NOT_AVAILABLE: mqbench counts them as such
// and says so, where it reported "0 errors" and nothing else.
func TestProduce_CountsSendStatuses(t *testing.T) {
	ns := startClusterRole(t, conf.RoleSyncMaster)
	r := runJSON(t, "produce", "-n", ns, "-t", "bench", "--size", "64", "--count", "50", "--duration", "60s", "--json")
	require.Equal(t, int64(50), r.Messages)
	require.Equal(t, map[string]int64{"SEND_OK": 0, "SEND_SLAVE_NOT_AVAILABLE": 50}, r.Statuses)

	var out, errb strings.Builder
	require.Equal(t, 0, run([]string{"produce", "-n", ns, "-t", "bench", "--size", "64", "--count", "20", "--duration", "60s"}, &out, &errb), errb.String())
	require.Contains(t, out.String(), "warning: stored but not flushed or replicated as configured (not SEND_OK): 20 SEND_SLAVE_NOT_AVAILABLE")
}
