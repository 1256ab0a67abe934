package prommetrics_test

import (
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/prommetrics"
)

// The families: client-go's seven workqueue metrics, and the three delay
// metrics under the names proposed for client-go.
var families = map[string]dto.MetricType{
	"workqueue_rate_limiter_delay_seconds":        dto.MetricType_HISTOGRAM,
	"workqueue_delayed_items":                     dto.MetricType_GAUGE,
	"workqueue_retry_budget_refused_total":        dto.MetricType_COUNTER,
	"workqueue_depth":                             dto.MetricType_GAUGE,
	"workqueue_adds_total":                        dto.MetricType_COUNTER,
	"workqueue_queue_duration_seconds":            dto.MetricType_HISTOGRAM,
	"workqueue_work_duration_seconds":             dto.MetricType_HISTOGRAM,
	"workqueue_unfinished_work_seconds":           dto.MetricType_GAUGE,
	"workqueue_longest_running_processor_seconds": dto.MetricType_GAUGE,
	"workqueue_retries_total":                     dto.MetricType_COUNTER,
}

// newRegistry returns a fresh registry holding a new Metrics.
func newRegistry(t *testing.T) (*prometheus.Registry, *prommetrics.Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := prommetrics.New()
	require.NoError(t, reg.Register(m))
	return reg, m
}

func TestFamiliesAreClientGos(t *testing.T) {
	reg, m := newRegistry(t)
	m.ForQueue("things")

	got, err := reg.Gather()
	require.NoError(t, err)
	types := make(map[string]dto.MetricType)
	for _, f := range got {
		types[f.GetName()] = f.GetType()
		for _, series := range f.GetMetric() {
			require.Len(t, series.GetLabel(), 1, f.GetName())
			assert.Equal(t, "name", series.GetLabel()[0].GetName(), f.GetName())
			assert.Equal(t, "things", series.GetLabel()[0].GetValue(), f.GetName())
		}
	}
	assert.Equal(t, families, types)

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems, "promlint")
}

func TestHistogramBuckets(t *testing.T) {
	want := []float64{1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1000}
	reg, m := newRegistry(t)
	m.ForQueue("things")
	got, err := reg.Gather()
	require.NoError(t, err)
	seen := 0
	for _, f := range got {
		if f.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		seen++
		buckets := f.GetMetric()[0].GetHistogram().GetBucket()
		require.Len(t, buckets, len(want), f.GetName())
		for i, b := range buckets {
			assert.InEpsilon(t, want[i], b.GetUpperBound(), 1e-9, "%s bucket %d", f.GetName(), i)
		}
	}
	assert.Equal(t, 3, seen, "histograms")
}

// A queue driven step by step on a fake clock moves every series by exactly
// the amounts its doc comments promise.
func TestQueueMovesTheSeries(t *testing.T) {
	const name = "things"
	reg, m := newRegistry(t)
	clock := testingclock.NewFakeClock(epoch)
	limiter := backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Minute, backoff.WithClock(clock))
	q := backoff.NewRateLimitingQueue[string](limiter,
		backoff.WithClock(clock), backoff.WithName(name), backoff.WithMetrics(m.ForQueue(name)))
	defer q.ShutDown()

	type state struct {
		depth, adds, retries, unfinished, longest float64
		latencyCount, workCount                   uint64
		latencySum, workSum                       float64
	}
	check := func(step string, want state) {
		t.Helper()
		var got state
		got.depth = value(t, reg, "workqueue_depth", name)
		got.adds = value(t, reg, "workqueue_adds_total", name)
		got.retries = value(t, reg, "workqueue_retries_total", name)
		got.unfinished = value(t, reg, "workqueue_unfinished_work_seconds", name)
		got.longest = value(t, reg, "workqueue_longest_running_processor_seconds", name)
		got.latencyCount, got.latencySum = histogram(t, reg, "workqueue_queue_duration_seconds", name)
		got.workCount, got.workSum = histogram(t, reg, "workqueue_work_duration_seconds", name)
		assert.Equal(t, want, got, step)
	}
	get := func(want string) {
		t.Helper()
		item, shutdown := q.Get()
		require.False(t, shutdown)
		require.Equal(t, want, item)
	}

	check("new queue", state{})

	q.Add("a")
	q.Add("b")
	q.Add("a") // already queued: not an add
	check("two adds", state{depth: 2, adds: 2})

	clock.Step(2 * time.Second)
	get("a") // queued for 2s; processing from t=2s
	clock.Step(3 * time.Second)
	get("b") // queued for 5s; processing from t=5s
	check("both taken", state{adds: 2, latencyCount: 2, latencySum: 7, unfinished: 3, longest: 3})

	clock.Step(time.Second) // t=6s: a for 4s, b for 1s
	check("processing", state{adds: 2, latencyCount: 2, latencySum: 7, unfinished: 5, longest: 4})

	q.AddRateLimited("a") // a failed: waits 1s, until t=7s
	q.Done("a")
	assert.Equal(t, 1, q.NumRequeues("a"))
	check("a requeued", state{adds: 2, retries: 1, latencyCount: 2, latencySum: 7,
		workCount: 1, workSum: 4, unfinished: 1, longest: 1})

	clock.Step(time.Second) // t=7s: a is due
	require.Equal(t, 1, q.Len())
	q.Done("b")
	check("a due, b done", state{depth: 1, adds: 3, retries: 1, latencyCount: 2, latencySum: 7,
		workCount: 2, workSum: 6})

	get("a") // queued at its ready time, taken at once
	q.Forget("a")
	q.Done("a")
	assert.Equal(t, 0, q.NumRequeues("a"))
	check("a done", state{adds: 3, retries: 1, latencyCount: 3, latencySum: 7, workCount: 3, workSum: 6})
}

// seriesOf returns the queue names that have a series of metric.
func seriesOf(t *testing.T, g prometheus.Gatherer, metric string) []string {
	t.Helper()
	got, err := g.Gather()
	require.NoError(t, err)
	var names []string
	for _, f := range got {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					names = append(names, l.GetValue())
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

// Queues of one name share its series; Delete removes a queue's probe, and
// the name's series with its last QueueMetrics.
func TestSharedNamesAndDelete(t *testing.T) {
	reg, m := newRegistry(t)
	clock := testingclock.NewFakeClock(epoch)
	a1, a2, b := m.ForQueue("a"), m.ForQueue("a"), m.ForQueue("b")
	qa1 := backoff.NewQueue[int](backoff.WithClock(clock), backoff.WithMetrics(a1))
	qa2 := backoff.NewQueue[int](backoff.WithClock(clock), backoff.WithMetrics(a2))
	qb := backoff.NewQueue[int](backoff.WithClock(clock), backoff.WithMetrics(b))
	defer qa1.ShutDown()
	defer qa2.ShutDown()
	defer qb.ShutDown()

	qa1.Add(1)
	qa1.Get()
	clock.Step(time.Second)
	qa2.Add(2)
	qa2.Get() // qa1 has processed 1 for 1s, qa2 processes 2 from now
	clock.Step(2 * time.Second)
	qb.Add(3)

	assert.Equal(t, 2.0, value(t, reg, "workqueue_adds_total", "a"))
	assert.Equal(t, 1.0, value(t, reg, "workqueue_adds_total", "b"))
	assert.Equal(t, 5.0, value(t, reg, "workqueue_unfinished_work_seconds", "a"), "3s + 2s")
	assert.Equal(t, 3.0, value(t, reg, "workqueue_longest_running_processor_seconds", "a"))

	a1.Delete()
	assert.Equal(t, 2.0, value(t, reg, "workqueue_unfinished_work_seconds", "a"), "only qa2's item")
	assert.Equal(t, 2.0, value(t, reg, "workqueue_adds_total", "a"), "a2 keeps the name's series")
	a1.Delete() // again: must not count as a2's deletion
	assert.Equal(t, 2.0, value(t, reg, "workqueue_adds_total", "a"))

	a2.Delete()
	for metric := range families {
		assert.Equal(t, []string{"b"}, seriesOf(t, reg, metric), metric)
	}

	// A deleted QueueMetrics given to a new queue tracks nothing.
	qa3 := backoff.NewQueue[int](backoff.WithClock(clock), backoff.WithMetrics(a1))
	defer qa3.ShutDown()
	qa3.Add(4)
	qa3.Get()
	assert.Equal(t, []string{"b"}, seriesOf(t, reg, "workqueue_unfinished_work_seconds"))

	// The name can be used again, from zero.
	m.ForQueue("a")
	assert.Equal(t, 0.0, value(t, reg, "workqueue_adds_total", "a"))
	assert.Equal(t, 0.0, value(t, reg, "workqueue_unfinished_work_seconds", "a"))
}

func TestForQueueRejectsEmptyName(t *testing.T) {
	m := prommetrics.New()
	assert.PanicsWithValue(t, "prommetrics: ForQueue: name must not be empty", func() { m.ForQueue("") })
}

// Scrapes run concurrently with producers and workers; the counts add up
// at the end. Run with -race.
func TestConcurrentScrapes(t *testing.T) {
	const items, workers, scrapes = 500, 3, 20
	reg, m := newRegistry(t)
	q := backoff.NewQueue[int](backoff.WithMetrics(m.ForQueue("busy")))

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < items; i++ {
			q.Add(i)
		}
		q.ShutDownWithDrain() // returns once every item is Done
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(item)
			}
		}()
	}
	for i := 0; i < scrapes; i++ {
		_, err := reg.Gather()
		require.NoError(t, err)
	}
	wg.Wait()

	assert.Equal(t, float64(items), value(t, reg, "workqueue_adds_total", "busy"))
	assert.Equal(t, 0.0, value(t, reg, "workqueue_depth", "busy"))
	assert.Equal(t, 0.0, value(t, reg, "workqueue_unfinished_work_seconds", "busy"))
	latency, _ := histogram(t, reg, "workqueue_queue_duration_seconds", "busy")
	work, _ := histogram(t, reg, "workqueue_work_duration_seconds", "busy")
	assert.Equal(t, uint64(items), latency)
	assert.Equal(t, uint64(items), work)
}

// The methods a queue calls under its lock allocate nothing.
func TestQueueMetricsAllocateNothing(t *testing.T) {
	qm := prommetrics.New().ForQueue("q")
	allocs := testing.AllocsPerRun(100, func() {
		qm.SetDepth(3)
		qm.IncAdds()
		qm.IncRetries()
		qm.ObserveLatency(time.Millisecond)
		qm.ObserveWorkDuration(time.Second)
	})
	assert.Zero(t, allocs)
}

func TestPriorityDepth(t *testing.T) {
	reg, m := newRegistry(t)
	qm := m.ForQueue("prio")
	q := backoff.NewDelayingQueue[int](backoff.WithName("prio"), backoff.WithMetrics(qm))
	defer q.ShutDown()
	q.AddWithOptions(backoff.AddOptions{Priority: -100}, 1, 2)
	q.Add(3)
	want := `
# HELP workqueue_priority_depth Items queued and ready to be handed to a worker, per priority.
# TYPE workqueue_priority_depth gauge
workqueue_priority_depth{name="prio",priority="-100"} 2
workqueue_priority_depth{name="prio",priority="0"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "workqueue_priority_depth"))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems, "promlint")
	qm.Delete()
	assert.Empty(t, seriesOf(t, reg, "workqueue_priority_depth"))
	q.AddWithOptions(backoff.AddOptions{Priority: 5}, 4)
	assert.Empty(t, seriesOf(t, reg, "workqueue_priority_depth"), "no series comes back after Delete")
}

func TestSetPriorityDepthAllocatesNothingOnceSeen(t *testing.T) {
	_, m := newRegistry(t)
	qm := m.ForQueue("prio")
	qm.SetPriorityDepth("-100", 1)
	assert.Zero(t, testing.AllocsPerRun(100, func() { qm.SetPriorityDepth("-100", 2) }))
}

// TestDelaySeries: an item that waits moves workqueue_delayed_items up and
// down and lands in workqueue_rate_limiter_delay_seconds with the time it
// waited.
func TestDelaySeries(t *testing.T) {
	const name = "things"
	reg, m := newRegistry(t)
	clock := testingclock.NewFakeClock(epoch)
	q := backoff.NewDelayingQueue[string](backoff.WithClock(clock), backoff.WithName(name), backoff.WithMetrics(m.ForQueue(name)))
	defer q.ShutDown()
	family := func(metric string) *dto.Metric {
		got, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range got {
			if f.GetName() == metric {
				return f.GetMetric()[0]
			}
		}
		t.Fatalf("no %s", metric)
		return nil
	}
	q.AddAfter("a", 3*time.Second)
	q.AddAfter("b", time.Hour)
	assert.Equal(t, 2.0, family("workqueue_delayed_items").GetGauge().GetValue())
	clock.Step(3 * time.Second)
	q.Len()
	assert.Equal(t, 1.0, family("workqueue_delayed_items").GetGauge().GetValue())
	h := family("workqueue_rate_limiter_delay_seconds").GetHistogram()
	assert.Equal(t, uint64(1), h.GetSampleCount())
	assert.InDelta(t, 3.0, h.GetSampleSum(), 1e-9)
}
