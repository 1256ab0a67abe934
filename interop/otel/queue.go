package otel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/retrykit/backoff"
)

// QueueMetrics is the backoff.QueueMetrics (and
// backoff.PriorityDepthMetrics and backoff.DelayMetrics) of one queue: it reports the queue's
// measurements under its name in the [Metrics] that made it.
// [Metrics.ForQueue] returns one, to pass with backoff.WithMetrics.
//
// The depth, the adds and the retries are atomics, read when the metrics
// are collected; the two durations are recorded in histograms as they
// happen; unfinished work and the longest-running item are computed at
// collection from the queue's own record. Its methods never block (but for
// a short lock for the per-priority depths) and allocate nothing.
//
// A QueueMetrics is safe for concurrent use by multiple goroutines. Its
// zero value is not usable.
type QueueMetrics struct {
	m       *Metrics
	name    string
	depth   atomic.Int64
	adds    atomic.Int64
	retries atomic.Int64
	delayed atomic.Int64          // items waiting for a delay
	refused atomic.Int64          // requeues the retry budget refused
	rec     []metric.RecordOption // name=name, built once

	prioMu sync.Mutex // guards prio and probe
	prio   map[string]int64
	probe  func() (unfinished, longest time.Duration)
}

var (
	_ backoff.QueueMetrics         = (*QueueMetrics)(nil)
	_ backoff.PriorityDepthMetrics = (*QueueMetrics)(nil)
	_ backoff.DelayMetrics         = (*QueueMetrics)(nil)
)

// ForQueue returns the metrics to pass, with backoff.WithMetrics, to the
// queue called name: a [*QueueMetrics] whose series have the attribute
// name=name, or, when m was built on the no-op MeterProvider,
// backoff.NopQueueMetrics, so that the queue skips its measurements (and
// its clock reads) altogether. Give each queue its own, and call
// [Metrics.DeleteQueue] when the queue is discarded. ForQueue panics if
// name is empty.
func (m *Metrics) ForQueue(name string) backoff.QueueMetrics {
	if name == "" {
		panic("otel: ForQueue: name must not be empty")
	}
	if m.noop {
		return backoff.NopQueueMetrics{}
	}
	return m.forQueue(name)
}

// forQueue returns a new QueueMetrics called name.
func (m *Metrics) forQueue(name string) *QueueMetrics {
	q := &QueueMetrics{
		m:    m,
		name: name,
		rec:  []metric.RecordOption{metric.WithAttributeSet(nameSet(name))},
		prio: map[string]int64{},
	}
	m.mu.Lock()
	m.queues[q] = struct{}{}
	m.mu.Unlock()
	return q
}

// DeleteQueue stops reporting the series of the queues called name; the
// histograms keep what they recorded.
func (m *Metrics) DeleteQueue(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for q := range m.queues {
		if q.name == name {
			delete(m.queues, q)
		}
	}
}

// SetDepth sets workqueue.depth to n.
func (q *QueueMetrics) SetDepth(n int) { q.depth.Store(int64(n)) }

// SetPriorityDepth sets workqueue.priority_depth of priority to n.
func (q *QueueMetrics) SetPriorityDepth(priority string, n int) {
	q.prioMu.Lock()
	q.prio[priority] = int64(n)
	q.prioMu.Unlock()
}

// IncAdds adds 1 to workqueue.adds.
func (q *QueueMetrics) IncAdds() { q.adds.Add(1) }

// IncRetries adds 1 to workqueue.retries.
func (q *QueueMetrics) IncRetries() { q.retries.Add(1) }

// ObserveLatency records d, in seconds, in workqueue.queue_duration.
func (q *QueueMetrics) ObserveLatency(d time.Duration) {
	q.m.latency.Record(context.Background(), d.Seconds(), q.rec...)
}

// ObserveWorkDuration records d, in seconds, in workqueue.work_duration.
func (q *QueueMetrics) ObserveWorkDuration(d time.Duration) {
	q.m.work.Record(context.Background(), d.Seconds(), q.rec...)
}

// ObserveDelay records d, in seconds, in workqueue.rate_limiter_delay.
func (q *QueueMetrics) ObserveDelay(d time.Duration) {
	q.m.queueDelay.Record(context.Background(), d.Seconds(), q.rec...)
}

// SetWaiting sets workqueue.delayed_items to n.
func (q *QueueMetrics) SetWaiting(n int) { q.delayed.Store(int64(n)) }

// IncBudgetRefused adds 1 to workqueue.retry_budget_refused.
func (q *QueueMetrics) IncBudgetRefused() { q.refused.Add(1) }

// TrackProcessing keeps the queue's probe, called when the metrics are
// collected for workqueue.unfinished_work and
// workqueue.longest_running_processor.
func (q *QueueMetrics) TrackProcessing(probe func() (unfinished, longest time.Duration)) {
	q.prioMu.Lock()
	q.probe = probe
	q.prioMu.Unlock()
}
