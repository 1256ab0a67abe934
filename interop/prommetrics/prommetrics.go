// Package prommetrics reports the measurements of the queues of
// github.com/retrykit/backoff to Prometheus, under the metric names that
// client-go's workqueue metrics use, so that dashboards and alerts written
// for client-go or controller-runtime queues keep working when a controller
// moves to this library's queues.
//
// One [Metrics] holds the collectors for any number of queues; each queue
// gets its own [QueueMetrics] from [Metrics.ForQueue], passed to the queue
// with backoff.WithMetrics:
//
//	m := prommetrics.New()
//	registry.MustRegister(m)
//	q := backoff.NewRateLimitingQueue(limiter,
//		backoff.WithName("pods"), backoff.WithMetrics(m.ForQueue("pods")))
//
// # Metrics
//
// Every metric has one label, name, the queue's name:
//
//	workqueue_depth                              gauge      items queued and not being processed
//	workqueue_adds_total                         counter    items that became queued
//	workqueue_queue_duration_seconds             histogram  time an item was queued before a worker took it
//	workqueue_work_duration_seconds              histogram  time from Get to Done
//	workqueue_unfinished_work_seconds            gauge      processing time so far, summed over the items in process
//	workqueue_longest_running_processor_seconds  gauge      processing time so far of the longest-running item
//	workqueue_retries_total                      counter    AddAfter and AddRateLimited calls the queue accepted
//	workqueue_rate_limiter_delay_seconds         histogram  time an item waited for its delay, from AddAfter or AddRateLimited to ready
//	workqueue_delayed_items                      gauge      items waiting for a delay
//	workqueue_retry_budget_refused_total         counter    rate-limited requeues that the queue's retry budget refused
//
// The delay metrics take the names proposed for client-go (kubernetes PRs
// #138256 and #135543, open), which has no measure of how long items wait
// in backoff.
// and one with a second label, priority (controller-runtime's depth per
// priority; at most backoff.MaxPriorityLabels values per queue, the rest
// under backoff.OtherPriorityLabel), with series only for the priorities
// a queue has used:
//
//	workqueue_priority_depth                     gauge      workqueue_depth, per priority
//
// The histograms have 12 buckets, with upper bounds from 10 ns to 1000 s
// (the default limiter's longest delay), each ten times the previous one:
// controller-runtime's bounds, so that a dashboard's histogram_quantile reads
// the same from either.
//
// The two processing-time gauges are computed when the registry is scraped,
// from the queue's own record of when each item was handed out, so they are
// exact at the moment of the scrape. client-go instead refreshes them every
// 500 ms from a goroutine per queue; nothing here runs between scrapes.
//
// # With controller-runtime
//
// Importing sigs.k8s.io/controller-runtime/pkg/controller registers
// controller-runtime's own workqueue_* families (labelled name and
// controller, with help texts of their own) in
// sigs.k8s.io/controller-runtime/pkg/metrics.Registry, the registry that
// the manager serves at /metrics. Registering a Metrics there fails: a
// registry refuses two families of one name that differ in labels or help.
// Either register it in a registry of its own and serve that at another
// path of the manager's metrics server (its Options.ExtraHandlers, with
// promhttp.HandlerFor), scraped alongside /metrics, which keeps client-go's
// names; or register it in controller-runtime's registry under a prefix,
// with prometheus.WrapRegistererWithPrefix, which changes them.
package prommetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// durationBuckets are the upper bounds, in seconds, of the buckets of the
// two histograms: 1e-8 to 1e3.
var durationBuckets = prometheus.ExponentialBuckets(1e-8, 10, 12)

// labelName is the one label of every metric: the queue's name.
const labelName = "name"

// Metrics is a prometheus.Collector that holds the workqueue metrics of any
// number of queues, one series per metric and queue name. Register it once
// in a prometheus.Registerer, and give each queue its [QueueMetrics] from
// [Metrics.ForQueue].
//
// A Metrics is safe for concurrent use by multiple goroutines, and may be
// scraped while its queues run. Its zero value is not usable: create it with
// [New].
type Metrics struct {
	depth   *prometheus.GaugeVec
	adds    *prometheus.CounterVec
	latency *prometheus.HistogramVec
	work    *prometheus.HistogramVec
	retries *prometheus.CounterVec

	delay         *prometheus.HistogramVec
	delayed       *prometheus.GaugeVec
	budgetRefused *prometheus.CounterVec
	// priorityDepth has the labels name and priority.
	priorityDepth *prometheus.GaugeVec

	// The processing-time gauges have no vector: their values exist only
	// while a scrape asks the queues' probes (see Collect).
	unfinished *prometheus.Desc
	longest    *prometheus.Desc

	mu sync.Mutex
	// queues holds the QueueMetrics that have not been deleted; names counts
	// them by queue name, so that the series of a name are dropped only when
	// its last QueueMetrics is.
	queues map[*QueueMetrics]struct{}
	names  map[string]int
}

// New returns a Metrics with no queue. It registers nothing: pass it to a
// registry's Register or MustRegister.
func New() *Metrics {
	return &Metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue",
			Name:      "depth",
			Help:      "Items queued and ready to be handed to a worker (neither waiting for a delay nor being processed).",
		}, []string{labelName}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue",
			Name:      "adds_total",
			Help:      "Items that became queued, by an Add or by a delay that ran out, when they were not queued already.",
		}, []string{labelName}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue",
			Name:      "queue_duration_seconds",
			Help:      "Seconds an item was queued and ready before a worker took it (a requested delay not included).",
			Buckets:   durationBuckets,
		}, []string{labelName}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue",
			Name:      "work_duration_seconds",
			Help:      "Seconds a worker held an item, from Get to Done.",
			Buckets:   durationBuckets,
		}, []string{labelName}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue",
			Name:      "retries_total",
			Help:      "Delayed and rate-limited adds (AddAfter, AddRateLimited) that the queue accepted.",
		}, []string{labelName}),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue",
			Name:      "rate_limiter_delay_seconds",
			Help:      "Seconds an item waited for its delay (AddAfter, AddRateLimited), from the add to the moment it became ready.",
			Buckets:   durationBuckets,
		}, []string{labelName}),
		delayed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue",
			Name:      "delayed_items",
			Help:      "Items waiting for a delay before they are queued; one that stays above 0 points to an item failing again and again.",
		}, []string{labelName}),
		budgetRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue",
			Name:      "retry_budget_refused_total",
			Help:      "Rate-limited requeues that the queue's retry budget refused: the item waited for the budget instead of its backoff.",
		}, []string{labelName}),
		priorityDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue",
			Name:      "priority_depth",
			Help:      "Items queued and ready to be handed to a worker, per priority.",
		}, []string{labelName, "priority"}),
		unfinished: prometheus.NewDesc("workqueue_unfinished_work_seconds",
			"Seconds spent so far on the items being processed, added up; a value that keeps growing points to a stuck worker.",
			[]string{labelName}, nil),
		longest: prometheus.NewDesc("workqueue_longest_running_processor_seconds",
			"Seconds spent so far on the item that has been processed the longest.",
			[]string{labelName}, nil),
		queues: make(map[*QueueMetrics]struct{}),
		names:  make(map[string]int),
	}
}

// ForQueue returns the [QueueMetrics] to pass, with backoff.WithMetrics, to
// the queue called name, and creates that queue's series: depth, counters
// and processing gauges at 0, histograms empty. name is the value of the
// name label; use the name the queue gets with backoff.WithName (for a
// controller-runtime controller, the controller's name, which its NewQueue
// function receives).
//
// Give each queue its own QueueMetrics. Queues given one name share their
// series: counters and histograms add up, the depths overwrite each other,
// unfinished work adds up and the longest-running time is the largest.
// Call [QueueMetrics.Delete] when a queue is discarded.
//
// ForQueue panics if name is empty.
func (m *Metrics) ForQueue(name string) *QueueMetrics {
	if name == "" {
		panic("prommetrics: ForQueue: name must not be empty")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The children are looked up once, here, so that the queue's calls
	// touch only atomics: no label lookup, no allocation, no lock. The
	// lookup holds mu so that a concurrent Delete of the name's last
	// QueueMetrics cannot remove the series between it and the count.
	q := &QueueMetrics{
		m:       m,
		name:    name,
		depth:   m.depth.WithLabelValues(name),
		adds:    m.adds.WithLabelValues(name),
		latency: m.latency.WithLabelValues(name),
		work:    m.work.WithLabelValues(name),
		retries: m.retries.WithLabelValues(name),

		delay:         m.delay.WithLabelValues(name),
		delayed:       m.delayed.WithLabelValues(name),
		budgetRefused: m.budgetRefused.WithLabelValues(name),
	}
	m.queues[q] = struct{}{}
	m.names[name]++
	return q
}

// Describe sends the descriptors of the eleven metrics. It implements
// prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.depth.Describe(ch)
	m.adds.Describe(ch)
	m.latency.Describe(ch)
	m.work.Describe(ch)
	m.retries.Describe(ch)
	m.delay.Describe(ch)
	m.delayed.Describe(ch)
	m.budgetRefused.Describe(ch)
	m.priorityDepth.Describe(ch)
	ch <- m.unfinished
	ch <- m.longest
}

// Collect sends the current value of every series. It implements
// prometheus.Collector.
//
// For the processing-time gauges it calls the probe of every queue, which
// takes that queue's lock for a time proportional to the number of items it
// is processing.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.depth.Collect(ch)
	m.adds.Collect(ch)
	m.latency.Collect(ch)
	m.work.Collect(ch)
	m.retries.Collect(ch)
	m.delay.Collect(ch)
	m.delayed.Collect(ch)
	m.budgetRefused.Collect(ch)
	m.priorityDepth.Collect(ch)

	type probe struct {
		name string
		fn   func() (unfinished, longest time.Duration)
	}
	type times struct{ unfinished, longest time.Duration }
	m.mu.Lock()
	perName := make(map[string]times, len(m.names))
	for name := range m.names {
		perName[name] = times{}
	}
	var probes []probe
	for q := range m.queues {
		for _, fn := range q.probes {
			probes = append(probes, probe{q.name, fn})
		}
	}
	m.mu.Unlock()

	// The probes take their queues' locks: call them with m.mu released, so
	// that a slow queue holds up only this scrape, not ForQueue or Delete.
	for _, p := range probes {
		unfinished, longest := p.fn()
		t := perName[p.name]
		t.unfinished += unfinished
		t.longest = max(t.longest, longest)
		perName[p.name] = t
	}
	for name, t := range perName {
		ch <- prometheus.MustNewConstMetric(m.unfinished, prometheus.GaugeValue, t.unfinished.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(m.longest, prometheus.GaugeValue, t.longest.Seconds(), name)
	}
}
