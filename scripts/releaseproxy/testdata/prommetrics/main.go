// Program prommetrics is the release rehearsal's user of the module
// github.com/retrykit/backoff/interop/prommetrics: a queue's adds, counted
// under client-go's metric name and gathered from a Prometheus registry.
package main

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/prommetrics"
)

func main() {
	reg := prometheus.NewRegistry()
	metrics := prommetrics.New()
	reg.MustRegister(metrics)

	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](),
		backoff.WithName("deployments"), backoff.WithMetrics(metrics.ForQueue("deployments")))
	defer q.ShutDown()
	q.Add("default/web")
	q.Add("default/db")

	families, err := reg.Gather()
	if err != nil {
		fail("Gather: %v", err)
	}
	adds := -1.0
	for _, f := range families {
		if f.GetName() == "workqueue_adds_total" && len(f.GetMetric()) == 1 {
			adds = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if adds != 2 {
		fail("workqueue_adds_total is %v; want 2", adds)
	}
	if n := testutil.CollectAndCount(metrics, "workqueue_depth"); n != 1 {
		fail("%d workqueue_depth series; want 1", n)
	}
	fmt.Printf("prommetrics: workqueue_adds_total{name=\"deployments\"} %v\n", adds)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "prommetrics: "+format+"\n", args...)
	os.Exit(1)
}
