package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/servermetrics"
)

// scrape reads a /metrics endpoint with the Prometheus text parser and
// returns a lookup: a counter's or gauge's value, a histogram's sample
// count, for the series whose labels include those given; ok is false when
// there is none.
func scrape(t *testing.T, addr string) func(name string, labels map[string]string) (float64, bool) {
	t.Helper()
	v, err := servermetrics.Scrape(addr)
	require.NoError(t, err)
	return v.Lookup
}

// TestMetrics_Scrape: every series the README lists, with its value. A
// sync-mode broker stores three sends (put counts and bytes, send latency
// observations, fsync rounds, a durable log end); a pull returns them (get
// counts and bytes); a group held back at offset 1 lags 2 messages and
// more than 0 s, and 0 and 0 s once it commits the end; a pull parked on an
// empty queue shows until a send wakes it; disk use is what the store
// reports and the watermarks what is configured.
func TestMetrics_Scrape(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.Store.Flush = conf.FlushSync
	opts := Options{}
	opts.Store.DiskUsage = func(string) (float64, error) { return 0.42, nil }
	b := startBroker(t, cfg, opts)
	c := newClient(t, remoting.SerializeJSON)
	bodies := []string{"a", "bb", "ccc"}
	for _, body := range bodies {
		mustSend(t, c, b.Addr(), "orders", 0, body, nil)
	}
	waitIndexed(t, b)
	heartbeat(t, c, remoting.SerializeJSON, b.Addr(), "puller-1", "puller", map[string]string{"orders": "*"})
	resp := invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("puller", "orders", 0, 0, 0), nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	require.Len(t, decodeRecords(t, resp.Body), 3)
	commit := func(off int64) {
		invoke(t, c, b.Addr(), protocol.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{
			ConsumerGroup: "cg", Topic: "orders", QueueID: 0, CommitOffset: off}, nil)
	}
	commit(1)

	orders := map[string]string{"topic": "orders"}
	lagged := map[string]string{"group": "cg", "topic": "orders", "queue": "0"}
	var value func(string, map[string]string) (float64, bool)
	// NB: a send's latency is observed after its reply is written, and the
	// oldest waiting message's age is whole milliseconds: scrape again
	// until both have happened.
	require.Eventually(t, func() bool {
		value = scrape(t, b.MetricsAddr())
		sends, _ := value("sluice_send_latency_seconds", nil)
		age, _ := value("sluice_consumer_lag_seconds", lagged)
		return sends == 3 && age > 0
	}, 10*time.Second, 5*time.Millisecond, "three sends observed, the held-back group's lag aged")
	v := func(name string, labels map[string]string) float64 {
		t.Helper()
		x, ok := value(name, labels)
		require.True(t, ok, "series %s%v missing", name, labels)
		return x
	}
	logEnd := float64(b.Store().Log().Next())
	require.Equal(t, b.Store().OpenStages().Total.Seconds(), v("sluice_store_open_seconds", map[string]string{"stage": "total"}))
	require.Positive(t, v("sluice_store_open_seconds", map[string]string{"stage": "total"}))
	for _, w := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sluice_put_messages_total", orders, 3},
		{"sluice_put_bytes_total", orders, 6}, // bodies
		{"sluice_get_messages_total", orders, 3},
		{"sluice_get_bytes_total", orders, float64(len(resp.Body))}, // records
		{"sluice_send_latency_seconds", nil, 3},
		{"sluice_send_busy_total", nil, 0},
		{"sluice_subscriptions_refused_total", nil, 0},
		{"sluice_consumer_lag_messages", lagged, 2},
		{"sluice_commitlog_min_offset", nil, 0},
		{"sluice_commitlog_max_offset", nil, logEnd},
		{"sluice_commitlog_durable_offset", nil, logEnd}, // sync mode: everything acknowledged is fsynced
		{"sluice_dispatch_lag_bytes", nil, 0},
		{"sluice_dispatch_retries_total", nil, 0},
		{"sluice_commitlog_recovery_full_scans_total", nil, 0}, // a new store
		{"sluice_key_index_degraded", nil, 0},
		{"sluice_disk_used_ratio", nil, 0.42},
		{"sluice_disk_high_watermark_ratio", nil, cfg.Store.DiskHighWatermark},
		{"sluice_disk_full_watermark_ratio", nil, cfg.Store.DiskFullWatermark},
		{"sluice_connections", nil, 1},
		{"sluice_pull_parked", nil, 0},
	} {
		require.Equal(t, w.want, v(w.name, w.labels), w.name)
	}
	for _, name := range []string{"sluice_remoting_frame_timeouts_total", "sluice_remoting_connections_refused_total"} {
		require.Equal(t, 0.0, v(name, nil), name)
	}
	for _, reason := range remoting.BadFrameReasons {
		require.Equal(t, 0.0, v("sluice_remoting_bad_frames_total", map[string]string{"reason": reason}), reason)
	}
	// Go's runtime and process series.
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes",
		"process_open_fds", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		_, ok := value(name, nil)
		require.True(t, ok, "series %s missing", name)
	}
	require.Greater(t, v("go_goroutines", nil), 10.0)
	require.Greater(t, v("process_open_fds", nil), 5.0)
	require.Greater(t, v("process_resident_memory_bytes", nil), float64(1<<20))
	require.Greater(t, logEnd, 0.0)
	require.Less(t, v("sluice_consumer_lag_seconds", lagged), 60.0)
	fsyncs := v("sluice_flush_latency_seconds", nil)
	require.GreaterOrEqual(t, fsyncs, 1.0, "sync sends wait for fsync rounds")

	// The group catches up: no lag, in messages or seconds.
	commit(3)
	value = scrape(t, b.MetricsAddr())
	require.Equal(t, 0.0, v("sluice_consumer_lag_messages", lagged))
	require.Equal(t, 0.0, v("sluice_consumer_lag_seconds", lagged))

	// A pull parked on an empty queue shows until a send wakes it.
	parked := make(chan *remoting.Command, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		resp, err := c.Invoke(ctx, b.Addr(),
			remoting.NewRequest(protocol.PullMessage, protocol.Ext(pullHeader("puller", "orders", 1, 0, protocol.PullFlagSuspend)), nil))
		if err != nil {
			resp = &remoting.Command{Header: remoting.Header{Code: -1, Remark: err.Error()}}
		}
		parked <- resp
	}()
	require.Eventually(t, func() bool {
		value = scrape(t, b.MetricsAddr())
		n, _ := value("sluice_pull_parked", nil)
		return n == 1
	}, 10*time.Second, 5*time.Millisecond, "the pull parked")
	mustSend(t, c, b.Addr(), "orders", 1, "wake", nil)
	woken := <-parked
	require.Equal(t, protocol.Success, int(woken.Code), woken.Remark)
	value = scrape(t, b.MetricsAddr())
	require.Equal(t, 0.0, v("sluice_pull_parked", nil))
	require.Equal(t, 4.0, v("sluice_put_messages_total", orders))
	require.Greater(t, v("sluice_flush_latency_seconds", nil), fsyncs, "a sync send waits for one more fsync round")
}

// A start after a crash whose checkpoint is gone scans the whole log and
// says so: the counter is 1, and the stages of the open are exported.
func TestMetrics_RecoveryFullScan(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MetricsListen = "127.0.0.1:0"
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "orders", 0, "a", nil)
	require.NoError(t, b.Close())
	logDir := filepath.Join(cfg.Store.Dir, "commitlog")
	require.NoError(t, os.Remove(filepath.Join(logDir, "checkpoint")))
	require.NoError(t, os.WriteFile(filepath.Join(logDir, "abort"), nil, 0o644)) // as a kill -9 leaves it

	b = startBroker(t, cfg, Options{})
	ri := b.Store().Log().Recovery()
	require.False(t, ri.FromCheckpoint)
	require.Equal(t, "no checkpoint file", ri.CheckpointProblem)
	value := scrape(t, b.MetricsAddr())
	full, ok := value("sluice_commitlog_recovery_full_scans_total", nil)
	require.True(t, ok)
	require.Equal(t, 1.0, full)
	secs, ok := value("sluice_store_open_seconds", map[string]string{"stage": "commitlog"})
	require.True(t, ok)
	require.Equal(t, b.Store().OpenStages().Commitlog.Seconds(), secs)
}
