package otel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/otel"
)

// A Retrier makes each attempt of a retried call a span; a retry.scheduled
// event at the end of a failed attempt says how long the wait before the
// next one is and why.
func ExampleRetrier() {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer tp.Shutdown(context.Background())

	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	start := clock.Now()
	r := otel.NewRetrier("load config",
		otel.WithTracerProvider(tp),
		otel.WithClock(clock),
		// The fake clock moves on by each wait, so the next attempt
		// follows at once.
		otel.WithNotify(func(_ int, _ error, next time.Duration) { clock.Step(next) }))

	failures := 2
	err := r.Retry(context.Background(), backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 5},
		func(context.Context) error {
			if failures > 0 {
				failures--
				return errors.New("connection refused")
			}
			return nil
		}, backoff.WithClock(clock))
	fmt.Println("error:", err)

	for _, s := range recorder.Ended() {
		fmt.Printf("%s at %v: %v", s.Name(), s.StartTime().Sub(start), s.Status().Code)
		for _, e := range s.Events() {
			fmt.Printf(", %s", e.Name)
			for _, a := range e.Attributes {
				fmt.Printf(" %s=%s", a.Key, a.Value.String())
			}
		}
		fmt.Println()
	}
	// Output:
	// error: <nil>
	// load config at 0s: Error, retry.scheduled retrykit.retry.attempt=1 retrykit.retry.delay=1 retrykit.retry.reason=schedule
	// load config at 1s: Error, retry.scheduled retrykit.retry.attempt=2 retrykit.retry.delay=2 retrykit.retry.reason=schedule
	// load config at 3s: Unset
	// load config at 0s: Unset
}

// One Metrics holds the instruments of every queue, retry budget, limiter
// and Retrier of a program.
func ExampleNewMetrics() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := otel.NewMetrics(mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	q := backoff.NewQueue[string](backoff.WithName("pods"), backoff.WithMetrics(m.ForQueue("pods")))
	defer q.ShutDown()
	budget := backoff.NewRetryBudget(0.1, 1, 10*time.Second,
		backoff.WithRetryBudgetMetrics(m.ForRetryBudget("api")))
	defer m.ObserveRetryBudget("api", budget)()
	limiter := backoff.NewLimiter(50, 10)
	defer m.ObserveLimiter("api", limiter)()
	q.Add("default/web")
	q.Add("default/db")
	budget.RecordRequest()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Gauge[int64]:
				lines = append(lines, points(mt.Name, d.DataPoints)...)
			case metricdata.Gauge[float64]:
				lines = append(lines, points(mt.Name, d.DataPoints)...)
			case metricdata.Sum[int64]:
				lines = append(lines, points(mt.Name, d.DataPoints)...)
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// retrykit.limiter.burst{name=api} 10
	// retrykit.limiter.limit{name=api} 50
	// retrykit.limiter.tokens{name=api} 10
	// retrykit.retry_budget.balance{name=api} 10.1
	// retrykit.retry_budget.refused{name=api} 0
	// retrykit.retry_budget.requests{name=api} 1
	// retrykit.retry_budget.retries{name=api} 0
	// workqueue.adds{name=pods} 2
	// workqueue.delayed_items{name=pods} 0
	// workqueue.depth{name=pods} 2
	// workqueue.longest_running_processor{name=pods} 0
	// workqueue.priority_depth{name=pods,priority=0} 2
	// workqueue.retries{name=pods} 0
	// workqueue.retry_budget_refused{name=pods} 0
	// workqueue.unfinished_work{name=pods} 0
}

// points formats the data points of the instrument called name.
func points[N int64 | float64](name string, dps []metricdata.DataPoint[N]) []string {
	var out []string
	for _, dp := range dps {
		var attrs []string
		for _, kv := range dp.Attributes.ToSlice() {
			attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
		}
		out = append(out, fmt.Sprintf("%s{%s} %v", name, strings.Join(attrs, ","), dp.Value))
	}
	return out
}
