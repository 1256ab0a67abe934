package prommetrics_test

import (
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/prommetrics"
)

// A queue reports under client-go's workqueue metric names, labelled with
// the queue's name.
func Example() {
	reg := prometheus.NewRegistry()
	metrics := prommetrics.New()
	reg.MustRegister(metrics)

	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	q := backoff.NewRateLimitingQueue(
		backoff.DefaultControllerRateLimiter[string](backoff.WithClock(clock)),
		backoff.WithClock(clock),
		backoff.WithName("deployments"),
		backoff.WithMetrics(metrics.ForQueue("deployments")),
	)
	defer q.ShutDown()

	q.Add("default/web")
	q.Add("default/db")
	item, _ := q.Get()
	q.AddRateLimited(item) // it failed: retried in 5ms
	q.Done(item)

	out, err := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain,
		"workqueue_depth", "workqueue_adds_total", "workqueue_retries_total")
	if err != nil {
		fmt.Println(err)
		return
	}
	os.Stdout.Write(out)
	// Output:
	// # HELP workqueue_adds_total Items that became queued, by an Add or by a delay that ran out, when they were not queued already.
	// # TYPE workqueue_adds_total counter
	// workqueue_adds_total{name="deployments"} 2
	// # HELP workqueue_depth Items queued and ready to be handed to a worker (neither waiting for a delay nor being processed).
	// # TYPE workqueue_depth gauge
	// workqueue_depth{name="deployments"} 1
	// # HELP workqueue_retries_total Delayed and rate-limited adds (AddAfter, AddRateLimited) that the queue accepted.
	// # TYPE workqueue_retries_total counter
	// workqueue_retries_total{name="deployments"} 1
}
