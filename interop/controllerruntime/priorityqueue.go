package controllerruntime

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/retrykit/backoff"
)

// NewPriorityQueue returns a backoff.RateLimitingQueue named name, whose
// AddRateLimited delays come from limiter, as a controller-runtime
// priorityqueue.PriorityQueue: AddWithOpts is the queue's AddWithOptions,
// with a nil AddOpts.Priority read as 0, and GetWithPriority is the queue's.
// opts are passed to backoff.NewRateLimitingQueue after backoff.WithName
// (name), so a WithName among them wins; backoff.WithFairness and
// backoff.WithMaxReadyWait give the queue fairness and a starvation bound.
//
// Unlike controller-runtime's priority queue, it runs no goroutine, adds
// synchronously, reads time through backoff.WithClock, and its
// ShutDownWithDrain waits for the queued items to be processed.
//
// The queue also has the methods that controller-runtime's interfaces
// lack (kubernetes#133560, #49783, KEP-5647): Reschedule, CancelWaiting,
// WaitingFor, Park, Wake and Parked, reached with a type assertion to
// [Scheduler] on the queue a controller's NewQueue made (see the README).
//
// NewPriorityQueue panics if limiter is nil.
func NewPriorityQueue[T comparable](name string, limiter workqueue.TypedRateLimiter[T], opts ...backoff.Option) priorityqueue.PriorityQueue[T] {
	all := append([]backoff.Option{backoff.WithName(name)}, opts...)
	return priorityQueue[T]{backoff.NewRateLimitingQueue[T](limiter, all...)}
}

// NewQueue returns a function for controller-runtime's
// controller.Options.NewQueue that makes a [NewPriorityQueue] with opts. The
// controller type-asserts what NewQueue returns to a PriorityQueue, so its
// handlers (handler.WithLowPriorityWhenUnchanged, the default for the
// initial list) and reconcile.Result.Priority use the queue's priorities.
func NewQueue[T comparable](opts ...backoff.Option) func(name string, limiter workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
	return func(name string, limiter workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
		return NewPriorityQueue(name, limiter, opts...)
	}
}

// priorityQueue adapts controller-runtime's AddOpts to backoff.AddOptions;
// every other method is the backoff queue's.
type priorityQueue[T comparable] struct {
	*backoff.RateLimitingQueue[T]
}

// AddWithOpts is AddWithOptions, with a nil o.Priority read as 0.
func (q priorityQueue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	prio := 0
	if o.Priority != nil {
		prio = *o.Priority
	}
	q.AddWithOptions(backoff.AddOptions{After: o.After, RateLimited: o.RateLimited, Priority: prio}, items...)
}

var _ priorityqueue.PriorityQueue[request] = priorityQueue[request]{}

// Scheduler is what the queues of [NewPriorityQueue] (and
// backoff.RateLimitingQueue itself) add to controller-runtime's queue
// interfaces: replace or cancel an item's pending requeue, ask when it is
// due, and hold an item back until the informer's cache has caught up with
// the controller's own write. See backoff.DelayingQueue for each method.
type Scheduler[T comparable] interface {
	Reschedule(item T, d time.Duration)
	CancelWaiting(item T) bool
	WaitingFor(item T) (time.Duration, bool)
	Park(item T, ready func() bool, maxWait time.Duration)
	Wake()
	Parked(item T) bool
}

var (
	_ Scheduler[request] = priorityQueue[request]{}
	_ Scheduler[request] = (*backoff.RateLimitingQueue[request])(nil)
)
