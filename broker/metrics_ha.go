package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/broker/store"
)

// Replication series: a master's per slave, a slave's own, and the
// SYNC_MASTER gate's waits.
var (
	descHASlaveLag    = prometheus.NewDesc("sluice_ha_slave_lag_bytes", "Master: commitlog bytes a connected slave has not acknowledged.", []string{"slave"}, nil)
	descHASlaveLagSec = prometheus.NewDesc("sluice_ha_slave_lag_seconds", "Master: age of the oldest byte a connected slave has not acknowledged.", []string{"slave"}, nil)
	descHAChunks      = prometheus.NewDesc("sluice_ha_chunks_sent_total", "Master: replication chunks sent to slaves.", nil, nil)
	descHABytes       = prometheus.NewDesc("sluice_ha_bytes_sent_total", "Master: commitlog bytes sent to slaves.", nil, nil)
	descHASyncTO      = prometheus.NewDesc("sluice_ha_flush_slave_timeout_total", "SYNC_MASTER: sends answered FLUSH_SLAVE_TIMEOUT.", nil, nil)
	descHANoSlave     = prometheus.NewDesc("sluice_ha_slave_not_available_total", "SYNC_MASTER: sends answered SLAVE_NOT_AVAILABLE.", nil, nil)
	descHALag         = prometheus.NewDesc("sluice_ha_lag_bytes", "Slave: bytes between its log's end and its master's end as last seen.", nil, nil)
	descHAApplied     = prometheus.NewDesc("sluice_ha_bytes_applied_total", "Slave: master bytes written to its log.", nil, nil)
	descHAConnected   = prometheus.NewDesc("sluice_ha_connected", "Slave: 1 while connected to its master.", nil, nil)
	descHAStopped     = prometheus.NewDesc("sluice_ha_stopped", "Slave: 1 once replication stopped for good (log ahead of the master, or behind its retention): see mqadmin brokerStatus.", nil, nil)
	haDescs           = []*prometheus.Desc{descHASlaveLag, descHASlaveLagSec, descHAChunks, descHABytes, descHASyncTO, descHANoSlave,
		descHALag, descHAApplied, descHAConnected, descHAStopped}
)

// newSyncWaitHistogram is the SYNC_MASTER gate's wait histogram.
func newSyncWaitHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_ha_sync_wait_seconds",
		Help:    "SYNC_MASTER: time a stored send waited for a slave's acknowledgement.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)})
}

// observeSyncWait records one held send.
func (m *metrics) observeSyncWait(d time.Duration, _ store.PutStatus) {
	m.syncWait.Observe(d.Seconds())
}

func (b *Broker) collectHA(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	if m := b.repl.master.Load(); m != nil {
		st := m.Status()
		for _, s := range st.Slaves {
			gauge(descHASlaveLag, float64(s.LagBytes), s.Addr)
			gauge(descHASlaveLagSec, s.LagSeconds, s.Addr)
		}
		counter(descHAChunks, st.ChunksSent)
		counter(descHABytes, st.BytesSent)
		counter(descHASyncTO, st.SyncTimeouts)
		counter(descHANoSlave, st.SyncNoSlave)
	}
	if s := b.repl.slave.Load(); s != nil {
		st := s.Status()
		gauge(descHALag, float64(max(st.MasterEnd-st.Offset, 0)))
		counter(descHAApplied, st.BytesApplied)
		gauge(descHAConnected, map[bool]float64{true: 1}[st.Connected])
		gauge(descHAStopped, map[bool]float64{true: 1}[st.Stopped != ""])
	}
}
