package prommetrics_test

import (
	"testing"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/prommetrics"
)

// BenchmarkQueueMetrics is the cost that one item's trip through a queue
// adds: two depth updates, an add, a retry and two observations.
func BenchmarkQueueMetrics(b *testing.B) {
	qm := prommetrics.New().ForQueue("bench")
	trip := func() {
		qm.SetDepth(1)
		qm.IncAdds()
		qm.IncRetries()
		qm.SetDepth(0)
		qm.ObserveLatency(time.Millisecond)
		qm.ObserveWorkDuration(10 * time.Millisecond)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			trip()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				trip()
			}
		})
	})
}

// BenchmarkQueueAddGetDone compares a queue without metrics to one that
// reports to Prometheus.
func BenchmarkQueueAddGetDone(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []backoff.Option
	}{
		{"nop", nil},
		{"prometheus", []backoff.Option{backoff.WithMetrics(prommetrics.New().ForQueue("bench"))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q := backoff.NewQueue[int](bc.opts...)
			defer q.ShutDown()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				q.Add(i & 1023)
				item, _ := q.Get()
				q.Done(item)
			}
		})
	}
}
