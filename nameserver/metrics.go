package nameserver

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/servermetrics"
)

var (
	descBrokers  = prometheus.NewDesc("sluice_namesrv_brokers", "Live broker addresses in the route table.", nil, nil)
	descTopics   = prometheus.NewDesc("sluice_namesrv_topics", "Topics with a route.", nil, nil)
	descClusters = prometheus.NewDesc("sluice_namesrv_clusters", "Clusters with at least one broker.", nil, nil)
	descConns    = prometheus.NewDesc("sluice_namesrv_connections", "Open connections (brokers and clients).", nil, nil)
)

// collector reads the route table at scrape time.
type collector struct{ s *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBrokers
	ch <- descTopics
	ch <- descClusters
	ch <- descConns
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	info := c.s.routes.clusterInfo()
	brokers := 0
	for _, bd := range info.BrokerAddrTable {
		brokers += len(bd.BrokerAddrs)
	}
	g := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	g(descBrokers, brokers)
	g(descTopics, len(c.s.routes.topicList()))
	g(descClusters, len(info.ClusterAddrTable))
	g(descConns, len(c.s.rs.Conns()))
}

// serveMetrics starts the Prometheus endpoint at cfg.MetricsListen: the
// route table's series, the remoting server's counters and Go's runtime and
// process series.
func (s *Server) serveMetrics() error {
	ln, err := servermetrics.Listen(s.cfg.MetricsListen)
	if err != nil {
		return err
	}
	reg := servermetrics.NewRegistry()
	reg.MustRegister(collector{s}, servermetrics.Remoting{Stats: s.rs.Stats})
	if s.acl != nil {
		reg.MustRegister(acl.Collector{W: s.acl})
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if s.cfg.Pprof {
		servermetrics.HandlePprof(mux)
	}
	s.metricsSrv = &http.Server{Handler: acl.HTTPAuth(s.acl, mux), ReadHeaderTimeout: 10 * time.Second}
	s.metricsAddr = ln.Addr().String()
	go func() {
		if err := s.metricsSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("nameserver: metrics endpoint stopped", "err", err)
		}
	}()
	return nil
}

// MetricsAddr returns the metrics endpoint's address ("" when off).
func (s *Server) MetricsAddr() string { return s.metricsAddr }
