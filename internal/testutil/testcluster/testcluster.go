// Package testcluster starts an in-process nameserver and a broker
// registered with it, for the tests of the packages built on both (mqadmin,
// the console). It is apart from testutil, which the broker's own tests
// import.
package testcluster

import (
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/nameserver"
	"github.com/stretchr/testify/require"
)

// Start starts a nameserver and a broker registering with it every 100 ms,
// both on loopback ports picked at run time, the broker's store in a
// folder of the test with segments of segmentSize bytes, and closes both
// when the test ends.
func Start(t testing.TB, segmentSize int64) (*nameserver.Server, *broker.Broker) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	ncfg := conf.DefaultNameserver()
	ncfg.Listen = "127.0.0.1:0"
	ns, err := nameserver.New(ncfg, quiet)
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })

	bcfg := conf.DefaultBroker()
	bcfg.Listen = "127.0.0.1:0"
	bcfg.Store.Dir = t.TempDir()
	bcfg.Store.SegmentSize = segmentSize
	bcfg.Store.ConsumeQueueEntries = 1000
	bcfg.NamesrvAddr = ns.Addr()
	bcfg.RegisterInterval = 100 * time.Millisecond
	b, err := broker.New(bcfg, broker.Options{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })
	return ns, b
}
