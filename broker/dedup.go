package broker

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The duplicate window as the broker shows it (brokerStatus, metrics); the
// window itself is the store's (store/dedup.go).

var (
	descDedupKeys = prometheus.NewDesc("sluice_dedup_keys",
		"UNIQ_KEYs the duplicate window remembers now.", nil, nil)
	descDedupSpan = prometheus.NewDesc("sluice_dedup_window_covered_seconds",
		"Age of the oldest key the duplicate window remembers: below dedup.window when max_keys cut it short.", nil, nil)
	descDedupHits = prometheus.NewDesc("sluice_dedup_hits_total",
		"Sends (batch members one each) answered from the duplicate window instead of being stored again.", nil, nil)
	descDedupMisses = prometheus.NewDesc("sluice_dedup_misses_total",
		"Sends with a UNIQ_KEY the duplicate window did not hold: stored.", nil, nil)
	descDedupExpired = prometheus.NewDesc("sluice_dedup_expired_total",
		"Keys that left the duplicate window at its end (dedup.window).", nil, nil)
	descDedupCut = prometheus.NewDesc("sluice_dedup_cut_total",
		"Keys the dedup.max_keys bound forced out of the duplicate window before its end: retries of them are stored again.", nil, nil)
)

// dedupDescs are the metrics collectDedup sends.
var dedupDescs = []*prometheus.Desc{descDedupKeys, descDedupSpan, descDedupHits, descDedupMisses, descDedupExpired, descDedupCut}

// collectDedup sends the duplicate window's metrics (none when it is off).
func (b *Broker) collectDedup(ch chan<- prometheus.Metric) {
	st := b.store.DedupStatus()
	if !st.Enabled {
		return
	}
	ch <- prometheus.MustNewConstMetric(descDedupKeys, prometheus.GaugeValue, float64(st.Keys))
	span := 0.0
	if st.Oldest > 0 {
		span = time.Since(time.UnixMilli(st.Oldest)).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descDedupSpan, prometheus.GaugeValue, span)
	for d, v := range map[*prometheus.Desc]int64{descDedupHits: st.Hits, descDedupMisses: st.Misses,
		descDedupExpired: st.Expired, descDedupCut: st.Cut} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
}

// dedupRuntime adds the duplicate window's state to a runtime info table
// (mqadmin brokerStatus).
func (b *Broker) dedupRuntime(t map[string]string) {
	st := b.store.DedupStatus()
	if !st.Enabled {
		t["dedupWindow"] = "off"
		return
	}
	t["dedupWindow"] = st.Window.String()
	t["dedupMaxKeys"] = strconv.Itoa(st.MaxKeys)
	t["dedupKeys"] = strconv.FormatInt(st.Keys, 10)
	covered := time.Duration(0)
	if st.Oldest > 0 {
		covered = time.Since(time.UnixMilli(st.Oldest)).Round(time.Second)
	}
	t["dedupCovered"] = covered.String()
	t["dedupHits"] = strconv.FormatInt(st.Hits, 10)
	t["dedupMisses"] = strconv.FormatInt(st.Misses, 10)
	t["dedupExpired"] = strconv.FormatInt(st.Expired, 10)
	t["dedupCut"] = strconv.FormatInt(st.Cut, 10)
}
