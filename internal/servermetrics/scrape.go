package servermetrics

import (
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Values is a scrape of a /metrics endpoint, read with the Prometheus text
// parser (tests and tools read endpoints with it).
type Values map[string]*dto.MetricFamily

// Scrape reads http://addr/metrics.
func Scrape(addr string) (Values, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("servermetrics: GET %s/metrics: %s", addr, resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("servermetrics: parse %s/metrics: %w", addr, err)
	}
	return Values(families), nil
}

// Lookup returns a counter's or gauge's value, or a histogram's sample
// count, for the first series of name whose labels include those given;
// ok is false when there is none.
func (v Values) Lookup(name string, labels map[string]string) (float64, bool) {
next:
	for _, m := range v[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}
