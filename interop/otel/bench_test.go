package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	global "go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/otel"
)

// benchMetrics returns the Metrics of the benchmark rows: over the no-op
// MeterProvider, or over the SDK's with a reader that is never collected.
func benchMetrics(b *testing.B, sdk bool) *otel.Metrics {
	b.Helper()
	if !sdk {
		m, err := otel.NewMetrics(metricnoop.NewMeterProvider())
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otel.NewMetrics(mp)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkQueueMetrics is the cost that one item's trip through a queue
// adds: two depth updates, an add, a retry and two observations (the rows
// of interop/prommetrics' benchmark of the same name).
func BenchmarkQueueMetrics(b *testing.B) {
	for _, sdk := range []bool{false, true} {
		qm := benchMetrics(b, sdk).ForQueue("bench")
		trip := func() {
			qm.SetDepth(1)
			qm.IncAdds()
			qm.IncRetries()
			qm.SetDepth(0)
			qm.ObserveLatency(time.Millisecond)
			qm.ObserveWorkDuration(10 * time.Millisecond)
		}
		name := map[bool]string{false: "noop", true: "sdk"}[sdk]
		b.Run(name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				trip()
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					trip()
				}
			})
		})
	}
}

// BenchmarkQueueAddGetDone compares a queue without metrics to one that
// reports to OpenTelemetry, with the no-op MeterProvider and with the SDK.
func BenchmarkQueueAddGetDone(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts func(b *testing.B) []backoff.Option
	}{
		{"nop", func(*testing.B) []backoff.Option { return nil }},
		{"otel-noop", func(b *testing.B) []backoff.Option {
			return []backoff.Option{backoff.WithMetrics(benchMetrics(b, false).ForQueue("bench"))}
		}},
		{"otel-sdk", func(b *testing.B) []backoff.Option {
			return []backoff.Option{backoff.WithMetrics(benchMetrics(b, true).ForQueue("bench"))}
		}},
		// The global MeterProvider with no SDK installed: not known to be
		// a no-op, so the queue measures (and reads its clock) for nothing.
		{"otel-global", func(b *testing.B) []backoff.Option {
			m, err := otel.NewMetrics(global.GetMeterProvider())
			if err != nil {
				b.Fatal(err)
			}
			return []backoff.Option{backoff.WithMetrics(m.ForQueue("bench"))}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q := backoff.NewQueue[int](bc.opts(b)...)
			defer q.ShutDown()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q.Add(i & 1023)
				item, _ := q.Get()
				q.Done(item)
				i++
			}
		})
	}
}

var errBench = errors.New("bench")

// BenchmarkRetry is a call that fails once and succeeds on its retry, with
// no wait in between: backoff.Retry alone, and through a Retrier with
// OpenTelemetry's no-op providers and with the SDK's (three spans sampled
// and ended, with no exporter; two histograms).
func BenchmarkRetry(b *testing.B) {
	s := backoff.Schedule{Steps: 2, Duration: 0}
	n := 0
	fn := func(context.Context) error {
		n++
		if n&1 == 1 {
			return errBench
		}
		return nil
	}
	ctx := context.Background()
	noop := otel.NewRetrier("bench", otel.WithTracerProvider(tracenoop.NewTracerProvider()), otel.WithMetrics(benchMetrics(b, false)))
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(ctx) })
	sdk := otel.NewRetrier("bench", otel.WithTracerProvider(tp), otel.WithMetrics(benchMetrics(b, true)))
	// The global providers with no SDK installed: not known to be no-ops,
	// so the Retrier does its bookkeeping for nothing.
	global := otel.NewRetrier("bench", otel.WithMetrics(benchGlobalMetrics(b)))
	for _, bc := range []struct {
		name  string
		retry func() error
	}{
		{"plain", func() error { return backoff.Retry(ctx, s, fn) }},
		{"otel-noop", func() error { return noop.Retry(ctx, s, fn) }},
		{"otel-sdk", func() error { return sdk.Retry(ctx, s, fn) }},
		{"otel-global", func() error { return global.Retry(ctx, s, fn) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.retry(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchGlobalMetrics(b *testing.B) *otel.Metrics {
	m, err := otel.NewMetrics(global.GetMeterProvider())
	if err != nil {
		b.Fatal(err)
	}
	return m
}
