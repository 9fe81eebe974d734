package broker

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/servermetrics"
)

// metrics exports the broker's state in the Prometheus text format at
// metrics_listen (off unless set), with Go's runtime and process series
// and the remoting server's counters (servermetrics). Counters and gauges
// are read from the broker at scrape time; the send and flush latency
// histograms are observed as they happen.
type metrics struct {
	reg   *prometheus.Registry
	send  prometheus.Histogram
	flush prometheus.Histogram
	// syncWait: SYNC_MASTER sends' wait for a slave.
	syncWait prometheus.Histogram
	srv      *http.Server
	addr     string
	done     chan struct{} // closed when the server's goroutine returns
}

func newMetrics() *metrics {
	m := &metrics{reg: servermetrics.NewRegistry(),
		send: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_send_latency_seconds",
			Help:    "Time from a send request's arrival to its response, including the store's fsync in sync mode.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}),
		flush: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_flush_latency_seconds",
			Help:    "Duration of each commitlog fsync round.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16)}),
		syncWait: newSyncWaitHistogram(),
	}
	m.reg.MustRegister(m.send, m.flush, m.syncWait)
	return m
}

// serve starts the HTTP endpoint; the broker collector must be registered.
func (m *metrics) serve(listen string, pprof bool, w *acl.Watcher) error {
	ln, err := servermetrics.Listen(listen)
	if err != nil {
		return err
	}
	m.addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	if pprof {
		servermetrics.HandlePprof(mux)
	}
	m.srv = &http.Server{Handler: acl.HTTPAuth(w, mux), ReadHeaderTimeout: 10 * time.Second}
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener was closed under it; Close reports nothing more useful
		}
	}()
	return nil
}

// close stops the metrics server and waits for its goroutine.
func (m *metrics) close() {
	if m.srv != nil {
		m.srv.Close()
		<-m.done
	}
}

// MetricsAddr returns the address of the metrics endpoint ("" when off).
func (b *Broker) MetricsAddr() string { return b.metrics.addr }

var (
	descPutMsgs    = prometheus.NewDesc("sluice_put_messages_total", "Messages stored, by topic.", []string{"topic"}, nil)
	descPutBytes   = prometheus.NewDesc("sluice_put_bytes_total", "Message body bytes stored, by topic.", []string{"topic"}, nil)
	descGetMsgs    = prometheus.NewDesc("sluice_get_messages_total", "Messages returned to pulls, by topic.", []string{"topic"}, nil)
	descGetBytes   = prometheus.NewDesc("sluice_get_bytes_total", "Record bytes returned to pulls, by topic.", []string{"topic"}, nil)
	descBusy       = prometheus.NewDesc("sluice_send_busy_total", "Sends refused with SYSTEM_BUSY (send_queue_size exceeded).", nil, nil)
	descSubsRef    = prometheus.NewDesc("sluice_subscriptions_refused_total", "Subscriptions heartbeats carried that were refused (SUBSCRIPTION_PARSE_FAILED).", nil, nil)
	descLogMin     = prometheus.NewDesc("sluice_commitlog_min_offset", "First commitlog offset still stored.", nil, nil)
	descLogNext    = prometheus.NewDesc("sluice_commitlog_max_offset", "End of the commitlog.", nil, nil)
	descLogDurable = prometheus.NewDesc("sluice_commitlog_durable_offset", "Commitlog offset below which everything is fsynced.", nil, nil)
	descDispatch   = prometheus.NewDesc("sluice_dispatch_lag_bytes", "Commitlog bytes not yet indexed into consume queues.", nil, nil)
	descRetries    = prometheus.NewDesc("sluice_dispatch_retries_total", "Dispatch attempts that failed (a write error) and were retried on the same record.", nil, nil)
	descIndexDeg   = prometheus.NewDesc("sluice_key_index_degraded", "1 while the key index cannot write and lags behind the consume queues (it catches up by itself).", nil, nil)
	descDisk       = prometheus.NewDesc("sluice_disk_used_ratio", "Share of the store's disk in use.", nil, nil)
	descDiskHigh   = prometheus.NewDesc("sluice_disk_high_watermark_ratio", "Disk use above which the broker warns (refuse) or deletes the oldest segments early (delete_oldest).", nil, nil)
	descDiskFull   = prometheus.NewDesc("sluice_disk_full_watermark_ratio", "Disk use above which sends are refused.", nil, nil)
	descLag        = prometheus.NewDesc("sluice_consumer_lag_messages", "Messages a consumer group has not consumed, by queue.", []string{"group", "topic", "queue"}, nil)
	descLagSec     = prometheus.NewDesc("sluice_consumer_lag_seconds", "Age of the oldest message a group has not consumed, by queue (0 when caught up).", []string{"group", "topic", "queue"}, nil)
	descConns      = prometheus.NewDesc("sluice_connections", "Open client connections.", nil, nil)
	descParked     = prometheus.NewDesc("sluice_pull_parked", "Pull requests parked by long polling.", nil, nil)
	descFullScans  = prometheus.NewDesc("sluice_commitlog_recovery_full_scans_total", "Starts after a crash whose recovery scanned the whole commitlog because its checkpoint was missing or unusable (the log line 'commitlog: recovered' says why): 0 or 1 per process.", nil, nil)
	descOpenSecs   = prometheus.NewDesc("sluice_store_open_seconds", "Time each stage of the store's open took at this start (commitlog recovery, consume queues, key index, truncate, dispatch catch-up, dedup window, total).", []string{"stage"}, nil)
)

// brokerCollector reads the broker's state at scrape time.
type brokerCollector struct{ b *Broker }

func (c brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPutMsgs, descPutBytes, descGetMsgs, descGetBytes, descBusy, descSubsRef, descLogMin,
		descLogNext, descLogDurable, descDispatch, descRetries, descIndexDeg, descLag, descLagSec, descConns, descParked,
		descFullScans, descOpenSecs, descClients} {
		ch <- d
	}
	for _, d := range diskDescs {
		ch <- d
	}
	for _, d := range haDescs {
		ch <- d
	}
	for _, d := range dedupDescs {
		ch <- d
	}
	describePop(ch)
	servermetrics.Remoting{}.Describe(ch)
}

func (c brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	b.stats.mu.Lock()
	for t, v := range b.stats.put {
		ch <- prometheus.MustNewConstMetric(descPutMsgs, prometheus.CounterValue, float64(v.msgs), t)
		ch <- prometheus.MustNewConstMetric(descPutBytes, prometheus.CounterValue, float64(v.bytes), t)
	}
	for t, v := range b.stats.get {
		ch <- prometheus.MustNewConstMetric(descGetMsgs, prometheus.CounterValue, float64(v.msgs), t)
		ch <- prometheus.MustNewConstMetric(descGetBytes, prometheus.CounterValue, float64(v.bytes), t)
	}
	b.stats.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	ch <- prometheus.MustNewConstMetric(descBusy, prometheus.CounterValue, float64(b.stats.busy.Load()))
	ch <- prometheus.MustNewConstMetric(descSubsRef, prometheus.CounterValue, float64(b.stats.subsRefused.Load()))
	l := b.store.Log()
	gauge(descLogMin, float64(l.Min()))
	gauge(descLogNext, float64(l.Next()))
	gauge(descLogDurable, float64(l.Durable()))
	gauge(descDispatch, float64(b.store.DispatchLag()))
	ch <- prometheus.MustNewConstMetric(descRetries, prometheus.CounterValue, float64(b.store.DispatchRetries()))
	gauge(descIndexDeg, map[bool]float64{true: 1}[b.store.KeyIndexDegraded()])
	ri := l.Recovery()
	fullScan := !ri.Clean && !ri.FromCheckpoint && ri.Scanned > 0
	ch <- prometheus.MustNewConstMetric(descFullScans, prometheus.CounterValue, map[bool]float64{true: 1}[fullScan])
	st := b.store.OpenStages()
	for _, s := range []struct {
		stage string
		d     time.Duration
	}{{"commitlog", st.Commitlog}, {"consumequeues", st.ConsumeQueues}, {"keyindex", st.KeyIndex}, {"truncate", st.Truncate},
		{"dispatch", st.Dispatch}, {"dedup", st.Dedup}, {"total", st.Total}} {
		ch <- prometheus.MustNewConstMetric(descOpenSecs, prometheus.GaugeValue, s.d.Seconds(), s.stage)
	}
	b.collectDisk(ch)
	b.collectHA(ch)
	b.collectDedup(ch)
	b.connMu.RLock()
	gauge(descConns, float64(len(b.conns)))
	b.connMu.RUnlock()
	gauge(descParked, float64(b.hold.Parked()))
	b.collectClients(ch)
	b.collectPop(ch)
	servermetrics.Remoting{Stats: b.server.Stats}.Collect(ch)
	now := time.Now().UnixMilli()
	for _, k := range b.offsets.Keys() {
		for q, off := range b.offsets.Queues(k.Group, k.Topic) {
			maxOff := b.store.MaxOffset(k.Topic, q)
			lag := maxOff - off
			secs := 0.0
			if lag > 0 {
				if ts, err := b.store.StoreTimeAt(k.Topic, q, off); err == nil {
					secs = float64(now-ts) / 1000
				}
			}
			qs := strconv.Itoa(int(q))
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(max(lag, 0)), k.Group, k.Topic, qs)
			ch <- prometheus.MustNewConstMetric(descLagSec, prometheus.GaugeValue, secs, k.Group, k.Topic, qs)
		}
	}
}
