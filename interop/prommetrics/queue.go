package prommetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrykit/backoff"
)

// QueueMetrics is the backoff.QueueMetrics of one queue: it writes the
// queue's measurements into the series of its name in the [Metrics] that
// made it. Get one from [Metrics.ForQueue] and pass it with
// backoff.WithMetrics.
//
// Its methods, called by the queue with the queue's lock held, update
// atomics only: they never block and allocate nothing.
//
// A QueueMetrics is safe for concurrent use by multiple goroutines. Its zero
// value is not usable.
type QueueMetrics struct {
	m       *Metrics
	name    string
	depth   prometheus.Gauge
	adds    prometheus.Counter
	latency prometheus.Observer
	work    prometheus.Observer
	retries prometheus.Counter

	delay         prometheus.Observer
	delayed       prometheus.Gauge
	budgetRefused prometheus.Counter

	// prioMu guards prio, the workqueue_priority_depth series of the
	// priorities the queue has reported, looked up once each.
	prioMu  sync.Mutex
	prio    map[string]prometheus.Gauge
	deleted bool // set by Delete: no new series

	// probes are the queue's processing-time probes (one, unless the
	// QueueMetrics was wrongly given to several queues); guarded by m.mu.
	probes []func() (unfinished, longest time.Duration)
}

var (
	_ backoff.QueueMetrics         = (*QueueMetrics)(nil)
	_ backoff.PriorityDepthMetrics = (*QueueMetrics)(nil)
	_ backoff.DelayMetrics         = (*QueueMetrics)(nil)
)

// SetPriorityDepth sets workqueue_priority_depth of priority to n. The
// series of a priority is looked up, and allocated, on its first report
// only; the queue reports at most backoff.MaxPriorityLabels+1 priorities.
func (q *QueueMetrics) SetPriorityDepth(priority string, n int) {
	q.prioMu.Lock()
	g, ok := q.prio[priority]
	if !ok {
		if q.deleted {
			q.prioMu.Unlock()
			return // what the queue reports after Delete is lost
		}
		if q.prio == nil {
			q.prio = make(map[string]prometheus.Gauge)
		}
		g = q.m.priorityDepth.WithLabelValues(q.name, priority)
		q.prio[priority] = g
	}
	q.prioMu.Unlock()
	g.Set(float64(n))
}

// SetDepth sets workqueue_depth to n.
func (q *QueueMetrics) SetDepth(n int) { q.depth.Set(float64(n)) }

// IncAdds adds 1 to workqueue_adds_total.
func (q *QueueMetrics) IncAdds() { q.adds.Inc() }

// IncRetries adds 1 to workqueue_retries_total.
func (q *QueueMetrics) IncRetries() { q.retries.Inc() }

// ObserveLatency records d, in seconds, in workqueue_queue_duration_seconds.
func (q *QueueMetrics) ObserveLatency(d time.Duration) { q.latency.Observe(d.Seconds()) }

// ObserveWorkDuration records d, in seconds, in
// workqueue_work_duration_seconds.
func (q *QueueMetrics) ObserveWorkDuration(d time.Duration) { q.work.Observe(d.Seconds()) }

// ObserveDelay records d, in seconds, in
// workqueue_rate_limiter_delay_seconds.
func (q *QueueMetrics) ObserveDelay(d time.Duration) { q.delay.Observe(d.Seconds()) }

// SetWaiting sets workqueue_delayed_items to n.
func (q *QueueMetrics) SetWaiting(n int) { q.delayed.Set(float64(n)) }

// IncBudgetRefused adds 1 to workqueue_retry_budget_refused_total.
func (q *QueueMetrics) IncBudgetRefused() { q.budgetRefused.Inc() }

// TrackProcessing keeps probe, which the queue's constructor passes, and
// calls it at every scrape to report workqueue_unfinished_work_seconds and
// workqueue_longest_running_processor_seconds. After [QueueMetrics.Delete]
// it does nothing.
func (q *QueueMetrics) TrackProcessing(probe func() (unfinished, longest time.Duration)) {
	q.m.mu.Lock()
	defer q.m.mu.Unlock()
	if _, live := q.m.queues[q]; live {
		q.probes = append(q.probes, probe)
	}
}

// Delete stops reporting the queue: its probe is no longer called, and,
// unless another live QueueMetrics has the same name, the name's series are
// removed from the [Metrics]. Call it when the queue is discarded, after
// ShutDown; otherwise the Metrics keeps the queue reachable, and its series
// keep their last values. Calling Delete again does nothing.
//
// Delete does not detach the QueueMetrics from its queue: what the queue
// reports afterwards is lost, or, while another live QueueMetrics has the
// name, still counted in the name's series. Delete a queue's metrics once
// the queue is no longer used.
//
// client-go never removes the series of a queue.
func (q *QueueMetrics) Delete() {
	m := q.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, live := m.queues[q]; !live {
		return
	}
	delete(m.queues, q)
	q.probes = nil
	q.prioMu.Lock()
	q.prio, q.deleted = nil, true
	q.prioMu.Unlock()
	if m.names[q.name]--; m.names[q.name] > 0 {
		return
	}
	delete(m.names, q.name)
	m.depth.DeleteLabelValues(q.name)
	m.adds.DeleteLabelValues(q.name)
	m.latency.DeleteLabelValues(q.name)
	m.work.DeleteLabelValues(q.name)
	m.retries.DeleteLabelValues(q.name)
	m.delay.DeleteLabelValues(q.name)
	m.delayed.DeleteLabelValues(q.name)
	m.budgetRefused.DeleteLabelValues(q.name)
	m.priorityDepth.DeletePartialMatch(prometheus.Labels{labelName: q.name})
}
