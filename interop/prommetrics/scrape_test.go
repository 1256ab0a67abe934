package prommetrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// sample is what one scrape says about one series: the value of a gauge or
// counter, or the count and sum of a histogram.
type sample struct {
	value float64
	count uint64
	sum   float64
}

// scrape gathers g and returns the series of metric whose name label is
// queue, and whether there is one.
func scrape(t *testing.T, g prometheus.Gatherer, metric, queue string) (sample, bool) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabel(m, "name", queue) {
				continue
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				return sample{value: m.GetGauge().GetValue()}, true
			case dto.MetricType_COUNTER:
				return sample{value: m.GetCounter().GetValue()}, true
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				return sample{count: h.GetSampleCount(), sum: h.GetSampleSum()}, true
			default:
				t.Fatalf("%s: unexpected type %v", metric, f.GetType())
			}
		}
	}
	return sample{}, false
}

// value is the value of a gauge or counter series that must exist.
func value(t *testing.T, g prometheus.Gatherer, metric, queue string) float64 {
	t.Helper()
	s, ok := scrape(t, g, metric, queue)
	if !ok {
		t.Fatalf("no series %s{name=%q}", metric, queue)
	}
	return s.value
}

// histogram is the count and sum of a histogram series that must exist.
func histogram(t *testing.T, g prometheus.Gatherer, metric, queue string) (count uint64, sum float64) {
	t.Helper()
	s, ok := scrape(t, g, metric, queue)
	if !ok {
		t.Fatalf("no series %s{name=%q}", metric, queue)
	}
	return s.count, s.sum
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
