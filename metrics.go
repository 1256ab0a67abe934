package backoff

import (
	"strconv"
	"time"
)

// QueueMetrics receives the measurements of one queue: the workqueue metrics
// of client-go (depth, adds, queue latency, work duration, unfinished work,
// longest running processor, retries), without a dependency on a metrics
// library. Implement it over Prometheus, OpenTelemetry or anything else, one
// value per queue, and pass it with [WithMetrics]; the queue's name is yours
// to attach.
//
// The queue calls the methods with its lock held, in the order the events
// happen: they must be fast, must not block and must not call back into the
// queue. The queue calls none of them, and reads the clock no more than
// without metrics, when it has no QueueMetrics or has [NopQueueMetrics].
//
// Embed NopQueueMetrics in an implementation to leave some measurements out;
// it also keeps the implementation compiling if methods are added.
type QueueMetrics interface {
	// SetDepth reports the number of queued items that are not being
	// processed (what Len returns), each time it changes.
	SetDepth(n int)
	// IncAdds counts an item that became queued: an Add, or an AddAfter
	// whose delay passed, of an item that was not already queued.
	IncAdds()
	// IncRetries counts an AddAfter or an AddRateLimited that the queue
	// accepted (not ignored after shutdown, and for AddRateLimited, not
	// ignored because a run of the item was already pending).
	IncRetries()
	// ObserveLatency reports how long an item stayed queued (ready, in the
	// FIFO) before Get handed it out. Time spent waiting for a delay is not
	// included: it was asked for.
	ObserveLatency(d time.Duration)
	// ObserveWorkDuration reports how long an item was processed: from Get
	// to Done.
	ObserveWorkDuration(d time.Duration)
	// TrackProcessing is called once, by the queue's constructor, with a
	// probe that returns, when called, the time the items being processed
	// have been processed in total (client-go's unfinished work) and the
	// longest of those times (its longest running processor). Call the probe
	// when the gauges are read, a Prometheus scrape say: the values are
	// exact at that moment, and nothing runs in between. client-go instead
	// refreshes them from a goroutine that ticks every 500 ms for every
	// queue, idle or not. The probe takes the queue's lock: do not call it
	// from the other methods.
	TrackProcessing(probe func() (unfinished, longest time.Duration))
}

// NopQueueMetrics is a [QueueMetrics] that discards everything; it is the
// default. Its zero value is ready to use.
type NopQueueMetrics struct{}

// SetDepth does nothing.
func (NopQueueMetrics) SetDepth(int) {}

// IncAdds does nothing.
func (NopQueueMetrics) IncAdds() {}

// IncRetries does nothing.
func (NopQueueMetrics) IncRetries() {}

// ObserveLatency does nothing.
func (NopQueueMetrics) ObserveLatency(time.Duration) {}

// ObserveWorkDuration does nothing.
func (NopQueueMetrics) ObserveWorkDuration(time.Duration) {}

// TrackProcessing does nothing.
func (NopQueueMetrics) TrackProcessing(func() (time.Duration, time.Duration)) {}

// WithMetrics makes a queue report its measurements to m. Pass one m per
// queue. The default is [NopQueueMetrics].
//
// WithMetrics panics if m is nil.
func WithMetrics(m QueueMetrics) Option {
	mustNotBeNil("WithMetrics", "m", isNilValue(m))
	return valueOption(optionMetrics, m)
}

// PriorityDepthMetrics is implemented by a [QueueMetrics] that also wants
// the depth of a queue per priority: controller-runtime's
// workqueue_depth with a priority label. A queue given such metrics with
// [WithMetrics] calls SetPriorityDepth, with its lock held, each time the
// number of ready items of a priority changes, besides SetDepth.
//
// The priority is a label: the decimal priority for the first
// [MaxPriorityLabels] distinct priorities the queue sees, and
// [OtherPriorityLabel] for all the others together, so that the number of
// series per queue stays bounded whatever priorities callers use
// (controller-runtime#3396).
type PriorityDepthMetrics interface {
	SetPriorityDepth(priority string, n int)
}

const (
	// MaxPriorityLabels is how many distinct priorities a queue reports
	// under labels of their own.
	MaxPriorityLabels = 16
	// OtherPriorityLabel is the label of the priorities beyond the first
	// MaxPriorityLabels.
	OtherPriorityLabel = "other"
)

// priorityDepths counts the ready items per priority label, for
// PriorityDepthMetrics.
type priorityDepths struct {
	m      PriorityDepthMetrics
	labels map[int]string
	depths map[string]int
}

// newPriorityDepths returns the per-priority depths of a queue whose metrics
// are m, or nil if m does not want them.
func newPriorityDepths(m QueueMetrics) *priorityDepths {
	if pm, ok := m.(PriorityDepthMetrics); ok {
		return &priorityDepths{m: pm, labels: map[int]string{}, depths: map[string]int{}}
	}
	return nil
}

// label returns the label of prio.
func (d *priorityDepths) label(prio int) string {
	if s, ok := d.labels[prio]; ok {
		return s
	}
	if len(d.labels) >= MaxPriorityLabels {
		return OtherPriorityLabel
	}
	s := strconv.Itoa(prio)
	d.labels[prio] = s
	return s
}

// add changes the depth of prio by delta and reports it.
func (d *priorityDepths) add(prio, delta int) {
	l := d.label(prio)
	n := d.depths[l] + delta
	d.depths[l] = n
	d.m.SetPriorityDepth(l, n)
}

// DelayMetrics is implemented by a [QueueMetrics] that also wants to see
// the delays items wait before they are queued: how long they wait, how
// many wait, and how many requeues the retry budget held back. A queue
// given such metrics with [WithMetrics] calls these methods with its lock
// held, as it calls the others. client-go has no such measurements
// (client-go#1414; kubernetes PRs #138256 and #135543 propose them).
type DelayMetrics interface {
	// ObserveDelay reports how long an item waited for its delay: from the
	// AddAfter, AddRateLimited, AddWithOptions or Reschedule that made it
	// wait to the time it became ready (its ready time, or the Add that
	// took it out of the wait early). A wait that CancelWaiting or
	// TakeWaiting ends is not observed.
	ObserveDelay(d time.Duration)
	// SetWaiting reports the number of items that wait for a delay, each
	// time it changes. Parked items ([DelayingQueue.Park]) are not counted.
	SetWaiting(n int)
	// IncBudgetRefused counts a rate-limited requeue (AddRateLimited, or
	// AddWithOptions with RateLimited) that the queue's retry budget
	// refused: the item waits for the budget instead of for its limiter's
	// delay (see [RateLimitingQueue.AddRateLimited]).
	IncBudgetRefused()
}

// delayObserver measures the waits for DelayMetrics. It lives under the
// queue's mutex.
type delayObserver[T comparable] struct {
	m     DelayMetrics
	since map[T]int64 // when each waiting item started to wait
}

// newDelayObserver returns the observer of a queue whose metrics are m, or
// nil if m does not want delays.
func newDelayObserver[T comparable](m QueueMetrics) *delayObserver[T] {
	if dm, ok := m.(DelayMetrics); ok {
		return &delayObserver[T]{m: dm, since: make(map[T]int64)}
	}
	return nil
}

// waits records that item waits since now, unless it already did.
func (o *delayObserver[T]) waits(item T, now int64) {
	if _, ok := o.since[item]; !ok {
		o.since[item] = now
		o.m.SetWaiting(len(o.since))
	}
}

// ready records that item's wait ended at time at, when it became ready.
func (o *delayObserver[T]) ready(item T, at int64) {
	if start, ok := o.since[item]; ok {
		delete(o.since, item)
		o.m.ObserveDelay(time.Duration(max(at-start, 0)))
		o.m.SetWaiting(len(o.since))
	}
}

// cancelled records that item's wait ended without making it ready.
func (o *delayObserver[T]) cancelled(item T) {
	if _, ok := o.since[item]; ok {
		delete(o.since, item)
		o.m.SetWaiting(len(o.since))
	}
}
