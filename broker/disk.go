package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicemq/sluice/broker/store"
)

// Disk pressure as the broker shows it (brokerStatus, metrics), and the
// consumer offsets the store needs to tell what a deletion under disk
// pressure took from whom (see store/disk.go).

var (
	descDiskAboveHigh = prometheus.NewDesc("sluice_disk_above_high_watermark",
		"1 while disk use is above disk_high_watermark: sends will be refused above the full watermark (refuse), or the oldest segments are deleted (delete_oldest).", nil, nil)
	descDiskRefusing = prometheus.NewDesc("sluice_disk_sends_refused",
		"1 while sends are refused for lack of disk space (above disk_full_watermark, or after an ENOSPC).", nil, nil)
	descDiskReserve = prometheus.NewDesc("sluice_disk_reserve_bytes",
		"Bytes of the disk reserve in place (0 while it is released because the disk is full).", nil, nil)
	descDiskPolicy = prometheus.NewDesc("sluice_disk_pressure_policy",
		"1 for the configured store.on_disk_pressure.", []string{"policy"}, nil)
	descDiskLost = prometheus.NewDesc("sluice_deleted_unconsumed_messages_total",
		"Messages deleted under disk pressure (on_disk_pressure: delete_oldest) before a consumer group had consumed them, by group and topic.",
		[]string{"group", "topic"}, nil)
)

// diskDescs are the disk metrics collectDisk sends.
var diskDescs = []*prometheus.Desc{descDisk, descDiskHigh, descDiskFull, descDiskAboveHigh, descDiskRefusing,
	descDiskReserve, descDiskPolicy, descDiskLost}

// collectDisk sends the disk metrics.
func (b *Broker) collectDisk(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	one := func(v bool) float64 { return map[bool]float64{true: 1}[v] }
	if u, err := b.store.DiskUsage(); err == nil {
		gauge(descDisk, u)
	}
	st := b.store.DiskStatus()
	gauge(descDiskHigh, st.HighWatermark)
	gauge(descDiskFull, st.FullWatermark)
	gauge(descDiskAboveHigh, one(st.AboveHigh))
	gauge(descDiskRefusing, one(st.Refusing))
	gauge(descDiskReserve, float64(st.ReserveSize)*one(st.ReserveHeld))
	gauge(descDiskPolicy, 1, st.Policy)
	for k, n := range b.store.Losses() {
		ch <- prometheus.MustNewConstMetric(descDiskLost, prometheus.CounterValue, float64(n), k.Group, k.Topic)
	}
}

// diskRuntime adds the disk values of GET_BROKER_RUNTIME_INFO to t.
func (b *Broker) diskRuntime(t map[string]string) {
	st := b.store.DiskStatus()
	fmtF := func(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) }
	var lost int64
	for _, n := range b.store.Losses() {
		lost += n
	}
	t["commitLogDiskRatio"] = fmtF(st.Used) // NB: the Java broker's key
	t["diskHighWatermark"] = fmtF(st.HighWatermark)
	t["diskFullWatermark"] = fmtF(st.FullWatermark)
	t["diskPressurePolicy"] = st.Policy
	t["diskAboveHighWatermark"] = strconv.FormatBool(st.AboveHigh)
	t["diskReserveBytes"] = strconv.FormatInt(st.ReserveSize, 10)
	t["diskReserveHeld"] = strconv.FormatBool(st.ReserveHeld)
	t["sendsRefused"] = strconv.FormatBool(st.Refusing)
	if st.Refusing {
		t["sendsRefusedReason"] = st.Refusal
	}
	t["deletedUnconsumedMessages"] = strconv.FormatInt(lost, 10)
}

// unconsumed returns, for the commitlog range [lo, hi) retention deleted
// under disk pressure, how many messages each group with a committed offset
// had not consumed there (store.SetUnconsumedCounter).
func (b *Broker) unconsumed(lo, hi int64) []store.Loss {
	var out []store.Loss
	for _, k := range b.offsets.Keys() {
		var n int64
		for q, off := range b.offsets.Queues(k.Group, k.Topic) {
			c, err := b.store.Unconsumed(k.Topic, q, off, lo, hi)
			if err != nil {
				b.logger.Error("broker: count unconsumed messages deleted under disk pressure", "group", k.Group,
					"topic", k.Topic, "queue_id", q, "err", err)
				continue
			}
			n += c
		}
		if n > 0 {
			out = append(out, store.Loss{LossKey: store.LossKey{Group: k.Group, Topic: k.Topic}, Messages: n})
		}
	}
	return out
}
