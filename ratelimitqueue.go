package backoff

// RateLimitingQueue is a [DelayingQueue] that requeues items after a delay
// chosen by a [RateLimiter]: the queue a controller's workers drain, as
// client-go's rate-limiting queue is (its method set is exactly
// workqueue.TypedRateLimitingInterface[T], plus GetContext, NextReadyAt and
// TakeWaiting), so it can be returned from controller-runtime's
// Options.NewQueue. A worker that fails on an item calls AddRateLimited(item)
// then Done(item); one that succeeds calls Forget(item) then Done(item).
// [RunWorkers] does this for you.
//
// A RateLimitingQueue is safe for concurrent use by multiple goroutines. Its
// zero value is not usable: create it with [NewRateLimitingQueue].
type RateLimitingQueue[T comparable] struct {
	DelayingQueue[T]
	limiter RateLimiter[T]
}

// NewRateLimitingQueue returns an empty, running queue whose AddRateLimited
// delays come from limiter, typically [DefaultControllerRateLimiter]. It
// reads [WithClock], [WithMetrics], [WithName] and [WithLogger]; the limiter
// has its own clock. It starts no goroutine.
//
// NewRateLimitingQueue panics if limiter is nil.
func NewRateLimitingQueue[T comparable](limiter RateLimiter[T], opts ...Option) *RateLimitingQueue[T] {
	if limiter == nil {
		panic("backoff: NewRateLimitingQueue: limiter must not be nil")
	}
	q := &RateLimitingQueue[T]{limiter: limiter}
	q.init(newConfig(opts))
	return q
}

// AddRateLimited adds item after the delay that the limiter's When(item)
// returns, as AddAfter(item, limiter.When(item)) would, except in one case:
// if a run of item is already pending — item is queued, including queued to
// run again when its current processing is Done, or it waits for a delay —
// AddRateLimited does nothing and does not call When. The pending run keeps
// its time, and the limiter records no failure and spends no token for it.
//
// client-go calls When on every AddRateLimited, so re-adding items that are
// already queued takes tokens from a shared bucket and stretches the delays
// of every other item (kubernetes#104554: ten thousand re-adds pushed delays
// to 16 minutes), and bumps the failure count of an item that did not run.
// The usual pattern, a worker calling AddRateLimited on the item it has just
// failed to process, is unaffected: that item is being processed, not
// queued.
//
// When is called with the queue's lock held, so that no two concurrent
// AddRateLimited calls for one item both call it; the limiter must not call
// back into the queue. AddRateLimited does nothing once the queue is shutting
// down.
func (q *RateLimitingQueue[T]) AddRateLimited(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	now := q.nowLocked()
	q.promoteDueAtLocked(now) // an item that is due counts as queued, not waiting
	if q.queuedOrWaitingLocked(item) {
		q.raisePendingLocked(item, AddOptions{}, now) // a pending run at a negative priority rises to 0
		return
	}
	q.addAfterLocked(item, q.limiter.When(item), now)
}

// Forget tells the limiter to forget item's failures, typically after it was
// processed successfully; the next AddRateLimited starts from the limiter's
// first delay. It does not touch the queue: the caller still calls Done.
func (q *RateLimitingQueue[T]) Forget(item T) {
	q.limiter.Forget(item)
}

// NumRequeues returns the limiter's count of item's failures since it was
// last forgotten: how many times AddRateLimited called When for it.
func (q *RateLimitingQueue[T]) NumRequeues(item T) int {
	return q.limiter.NumRequeues(item)
}
