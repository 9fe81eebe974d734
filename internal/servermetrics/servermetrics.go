// Package servermetrics holds what the broker's and the nameserver's
// Prometheus endpoints share: a registry with Go's runtime and process
// series (go_goroutines, go_memstats_*, process_open_fds,
// process_resident_memory_bytes, ...) and a collector of their remoting
// server's counters (sluice_remoting_*).
package servermetrics

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicemq/sluice/internal/remoting"
)

// HandlePprof serves Go's profiler on mux (mqbroker and mqnamesrv
// --pprof), for measuring a server under load:
// go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=10
func HandlePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// NewRegistry returns a registry holding the standard Go runtime and
// process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

var (
	descBadFrames = prometheus.NewDesc("sluice_remoting_bad_frames_total",
		"Connections closed for a bad frame, by reason (too_large, malformed, unknown_serialize_type, bad_header).",
		[]string{"reason"}, nil)
	descFrameTimeouts = prometheus.NewDesc("sluice_remoting_frame_timeouts_total",
		"Connections closed because a started frame was not completed within remoting.frame_timeout.", nil, nil)
	descBacklog = prometheus.NewDesc("sluice_remoting_input_backlog_closed_total",
		"Connections closed because their peer had sent more bytes not read yet than four frames of remoting.max_frame_size.", nil, nil)
	descTLS = prometheus.NewDesc("sluice_remoting_tls_refused_total",
		"Connections closed by TLS: plaintext to an enforcing port (plaintext), failed handshakes (handshake).",
		[]string{"reason"}, nil)
	descRefused = prometheus.NewDesc("sluice_remoting_connections_refused_total",
		"Connections closed at accept: their address already held remoting.max_connections_per_address.", nil, nil)
)

// Remoting collects a remoting server's counters at scrape time from
// Stats (remoting.Server.Stats). Its Describe needs no Stats.
type Remoting struct{ Stats func() remoting.ServerStats }

func (Remoting) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBadFrames
	ch <- descFrameTimeouts
	ch <- descBacklog
	ch <- descRefused
	ch <- descTLS
}

func (r Remoting) Collect(ch chan<- prometheus.Metric) {
	st := r.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, reason := range remoting.BadFrameReasons {
		counter(descBadFrames, st.BadFrames[reason], reason)
	}
	counter(descFrameTimeouts, st.FrameTimeouts)
	counter(descBacklog, st.BacklogClosed)
	counter(descRefused, st.Rejected)
	counter(descTLS, st.PlaintextRefused, "plaintext")
	counter(descTLS, st.TLSHandshakeFailures, "handshake")
}
