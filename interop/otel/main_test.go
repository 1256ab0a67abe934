package otel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/retrykit/backoff/interop/otel"
)

// epoch is where every fake clock of these tests starts.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// TestMain fails the run if any test leaves a goroutine running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newMetrics returns a Metrics over an SDK MeterProvider read by a manual
// reader.
func newMetrics(t *testing.T) (*otel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otel.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	return m, reader
}

// collected is one collection, by instrument name.
type collected map[string]metricdata.Metrics

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	c := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otel.ScopeName)
		}
		for _, m := range sm.Metrics {
			c[m.Name] = m
		}
	}
	return c
}

// point returns the value of the data point of the named gauge or sum whose
// attributes are attrs, and whether there is one.
func (c collected) point(name string, attrs ...attribute.KeyValue) (float64, bool) {
	want := attribute.NewSet(attrs...)
	switch d := c[name].Data.(type) {
	case metricdata.Gauge[int64]:
		return find(d.DataPoints, want)
	case metricdata.Gauge[float64]:
		return find(d.DataPoints, want)
	case metricdata.Sum[int64]:
		return find(d.DataPoints, want)
	case metricdata.Sum[float64]:
		return find(d.DataPoints, want)
	}
	return 0, false
}

func find[N int64 | float64](dps []metricdata.DataPoint[N], want attribute.Set) (float64, bool) {
	for _, dp := range dps {
		if dp.Attributes.Equals(&want) {
			return float64(dp.Value), true
		}
	}
	return 0, false
}

// value is point for a series that must exist.
func (c collected) value(t *testing.T, name string, attrs ...attribute.KeyValue) float64 {
	t.Helper()
	v, ok := c.point(name, attrs...)
	if !ok {
		t.Fatalf("%s%v: no data point", name, attrs)
	}
	return v
}

// histogram returns the data point of the named float64 histogram with
// attrs; ok is false if there is none.
func (c collected) histogram(name string, attrs ...attribute.KeyValue) (metricdata.HistogramDataPoint[float64], bool) {
	want := attribute.NewSet(attrs...)
	if d, ok := c[name].Data.(metricdata.Histogram[float64]); ok {
		for _, dp := range d.DataPoints {
			if dp.Attributes.Equals(&want) {
				return dp, true
			}
		}
	}
	return metricdata.HistogramDataPoint[float64]{}, false
}

// intHistogram is histogram for an int64 histogram.
func (c collected) intHistogram(name string, attrs ...attribute.KeyValue) (metricdata.HistogramDataPoint[int64], bool) {
	want := attribute.NewSet(attrs...)
	if d, ok := c[name].Data.(metricdata.Histogram[int64]); ok {
		for _, dp := range d.DataPoints {
			if dp.Attributes.Equals(&want) {
				return dp, true
			}
		}
	}
	return metricdata.HistogramDataPoint[int64]{}, false
}
