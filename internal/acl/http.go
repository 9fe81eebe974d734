package acl

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPAuth wraps an HTTP endpoint (metrics, pprof, console): with w set,
// every request must carry basic auth with an account's access key and
// secret key; w nil (ACL off) returns h as it is.
func HTTPAuth(w *Watcher, h http.Handler) http.Handler {
	if w == nil {
		return h
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		key, secret, ok := r.BasicAuth()
		if !ok || !w.Rules().Credentials(key, secret) {
			rw.Header().Set("WWW-Authenticate", `Basic realm="sluice"`)
			http.Error(rw, "ACL is on: give an account's access key and secret key (basic auth)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(rw, r)
	})
}

var (
	descRefusals = prometheus.NewDesc("sluice_acl_refusals_total",
		"Requests refused by ACL, by access key (empty: none, or not an account) and reason.",
		[]string{"access_key", "reason"}, nil)
	descReloads = prometheus.NewDesc("sluice_acl_reloads_total",
		"Reloads of the ACL rules file, by result (ok, or failed: the last good rules were kept).",
		[]string{"result"}, nil)
)

// Collector exports w's refusal and reload counts.
type Collector struct{ W *Watcher }

func (Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRefusals
	ch <- descReloads
}

func (c Collector) Collect(ch chan<- prometheus.Metric) {
	for k, n := range c.W.Guard().Refusals() {
		ch <- prometheus.MustNewConstMetric(descRefusals, prometheus.CounterValue, float64(n), k.Key, k.Reason)
	}
	ok, failed := c.W.Reloads()
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(failed), "failed")
}
