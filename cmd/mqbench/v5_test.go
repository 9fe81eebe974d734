package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/nameserver"
)

// startV5Cluster starts a nameserver and a broker serving v5 clients and
// returns their addresses (the nameserver's, the broker's gRPC one).
func startV5Cluster(t *testing.T) (ns, grpcAddr string) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nc := conf.DefaultNameserver()
	nc.Listen = "127.0.0.1:0"
	n, err := nameserver.New(nc, quiet)
	require.NoError(t, err)
	require.NoError(t, n.Start())
	t.Cleanup(func() { n.Close() })
	bc := conf.DefaultBroker()
	bc.Listen = "127.0.0.1:0"
	bc.GRPC.Listen = "127.0.0.1:0"
	bc.NamesrvAddr = n.Addr()
	bc.Store.Dir = t.TempDir()
	bc.Store.SegmentSize = 64 << 20
	b, err := broker.New(bc, broker.Options{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })
	return n.Addr(), b.GRPCAddr()
}

// TestV5_ProduceConsume: --protocol v5 sends every message (single and
// batched) and a SimpleConsumer's receive and ack loop gets each once: no
// redelivery in a run without faults.
func TestV5_ProduceConsume(t *testing.T) {
	ns, g := startV5Cluster(t)
	p := runJSON(t, "produce", "--protocol", "v5", "--grpc", g, "-n", ns, "-t", "bench5", "--size", "128",
		"--count", "300", "--inflight", "16", "--duration", "60s", "--json")
	require.Equal(t, int64(300), p.Messages)
	require.Zero(t, p.Errors)
	require.Equal(t, map[string]int64{"SEND_OK": 300}, p.Statuses)
	require.Greater(t, p.LatencyP50, 0.0)
	b := runJSON(t, "produce", "--protocol", "v5", "--grpc", g, "-n", ns, "-t", "bench5", "--batch", "8",
		"--count", "101", "--duration", "60s", "--json")
	require.Equal(t, int64(101), b.Messages, "batches of 8, the last cut to the count")

	c := runJSON(t, "consume", "--protocol", "v5", "--grpc", g, "-n", ns, "-t", "bench5", "-g", "g5", "--consumers", "2",
		"--count", "401", "--duration", "60s", "--json")
	require.Equal(t, int64(401), c.Messages, "every message acked")
	require.Zero(t, c.Errors)
	require.NotNil(t, c.Redeliveries)
	require.Zero(t, *c.Redeliveries)
}

// TestV5_E2E: e2e --protocol v5 produces with the 4.x client at --rate
// and consumes by POP: every message counted once, with latencies and
// their break-down, and acked.
func TestV5_E2E(t *testing.T) {
	ns, g := startV5Cluster(t)
	e := runJSON(t, "e2e", "--protocol", "v5", "--grpc", g, "-n", ns, "-t", "e2e5", "-g", "g5", "--rate", "500",
		"--count", "200", "--duration", "60s", "--json")
	require.Equal(t, int64(200), e.Messages)
	require.Zero(t, e.Errors)
	require.Greater(t, e.LatencyP50, 0.0)
	require.GreaterOrEqual(t, e.LatencyP99, e.LatencyP50)
	require.NotNil(t, e.Stages, "e2e breaks its latency down")
	// Every message was acked: a consumer of the same group finds none.
	c := runJSON(t, "consume", "--protocol", "v5", "--grpc", g, "-n", ns, "-t", "e2e5", "-g", "g5", "--duration", "2s", "--json")
	require.Zero(t, c.Messages, "nothing left unacked")
}

// TestV5_Hold: consume --hold receives that many messages per consumer
// with auto_renew, holds them (none delivered twice meanwhile) and acks
// them at the end: a later consumer of the group gets only the rest.
func TestV5_Hold(t *testing.T) {
	ns, g := startV5Cluster(t)
	runJSON(t, "produce", "--protocol", "v5", "--grpc", g, "-n", ns, "-t", "hold5", "--size", "64", "--count", "300", "--duration", "60s", "--json")
	h := runJSON(t, "consume", "--protocol", "v5", "--grpc", g, "-n", ns, "-t", "hold5", "-g", "gh", "--consumers", "2",
		"--hold", "100", "--duration", "4s", "--json")
	require.Equal(t, int64(200), h.Messages, "each consumer holds 100")
	require.NotNil(t, h.Redeliveries)
	require.Zero(t, *h.Redeliveries)
	c := runJSON(t, "consume", "--protocol", "v5", "--grpc", g, "-n", ns, "-t", "hold5", "-g", "gh", "--count", "100",
		"--duration", "60s", "--json")
	require.Equal(t, int64(100), c.Messages, "the held messages were acked at the end")
	require.Zero(t, *c.Redeliveries)
}

func TestV5_BadOptions(t *testing.T) {
	for _, args := range [][]string{
		{"produce", "--protocol", "v6"},
		{"produce", "--protocol", "v5", "--rate", "10"},
		{"consume", "--protocol", "v5", "--sql", "a > 1"},
		{"e2e", "--protocol", "v5", "--sql", "a > 1"},
		{"consume", "--hold", "5"},
		{"consume", "--protocol", "v5", "--hold", "5", "--count", "3"},
		{"consume", "--protocol", "v5", "--hold", "-1"},
	} {
		var out, errb strings.Builder
		require.Equal(t, 2, run(args, &out, &errb), args)
		require.Contains(t, errb.String(), "mqbench: ", args)
	}
}

func TestV5ID_Format(t *testing.T) {
	want := fmt.Sprintf("MQBENCH%08X%012X", os.Getpid(), 0xABC123)
	require.Equal(t, want, v5ID(0xABC123))
}
