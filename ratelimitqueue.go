package backoff

import (
	"context"
	"time"
)

// RateLimitingQueue is a [DelayingQueue] that requeues items after a delay
// chosen by a [RateLimiter]: the queue a controller's workers drain, as
// client-go's rate-limiting queue is (its method set holds
// workqueue.TypedRateLimitingInterface[T], plus the methods listed below), so
// it can be returned from controller-runtime's Options.NewQueue. A worker
// that fails on an item calls AddRateLimited(item) then Done(item); one that
// succeeds calls Forget(item) then Done(item). [RunWorkers] does this for
// you.
//
// A RateLimitingQueue is safe for concurrent use by multiple goroutines. Its
// zero value is not usable: create it with [NewRateLimitingQueue].
//
// # Methods of the embedded queues
//
// It has every method of the [DelayingQueue] it embeds, and of that one's
// [Queue], besides its own (which go doc lists below):
//
//   - delays: [DelayingQueue.AddAfter]; [DelayingQueue.Reschedule] moves an
//     item's pending delayed add, earlier or later;
//     [DelayingQueue.CancelWaiting] removes it; [DelayingQueue.WaitingFor]
//     says how long it has left; [DelayingQueue.NextReadyAt] and
//     [DelayingQueue.TakeWaiting] read and take every waiting item.
//   - parking: [DelayingQueue.Park] holds an item back until a condition
//     holds or a time has passed, [DelayingQueue.Wake] re-checks the
//     conditions, [DelayingQueue.Parked] says whether an item is parked.
//   - the queue: [Queue.Add], [Queue.Done], [Queue.Len], [Queue.ShutDown],
//     [Queue.ShutDownWithDrain] and [Queue.ShuttingDown].
type RateLimitingQueue[T comparable] struct {
	DelayingQueue[T]
	limiter RateLimiter[T]
	budget  budgetGate // WithRetryBudget's
}

// NewRateLimitingQueue returns an empty, running queue whose AddRateLimited
// delays come from limiter, typically [DefaultControllerRateLimiter]. It
// reads [WithClock], [WithMetrics], [WithName], [WithLogger] and
// [WithRetryBudget]. It starts no goroutine.
//
// The limiter has its own clock: pass the clock once, in one options slice
// for both,
//
//	opts := []backoff.Option{backoff.WithClock(fc), backoff.WithName("pods")}
//	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](opts...), opts...)
//
// NewRateLimitingQueue panics if limiter is nil, and if limiter is one of
// this package's limiters that reads a clock (the default limiter, a bucket,
// or a combination holding one) and that clock is not the queue's: a
// FakeClock given to only one of them would leave the other on the real
// clock. Limiters of other packages are not checked.
func NewRateLimitingQueue[T comparable](limiter RateLimiter[T], opts ...Option) *RateLimitingQueue[T] {
	mustNotBeNil("NewRateLimitingQueue", "limiter", isNilValue(limiter))
	cfg := newConfig(opts)
	mustShareClock("NewRateLimitingQueue", limiter, cfg.clock)
	q := &RateLimitingQueue[T]{limiter: limiter, budget: budgetGate{budget: cfg.budget.budget}}
	q.init(cfg)
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
// With [WithRetryBudget], each AddRateLimited that reaches the limiter asks
// the budget for a retry (and each item Get or GetContext hands out counts as
// a request). A refused retry is never dropped, since a controller must
// converge: the item waits until the budget would allow a retry if nothing
// else happened, plus a random spread of up to one window of the budget (so
// that items refused together do not come back together), or the limiter's
// delay if that is longer; but never longer than the limiter's cap when the
// limiter is one of this package's with a cap (maxDelay for
// [NewItemExponentialFailureRateLimiter], [DefaultControllerRateLimiter] and
// [NewWithMaxWaitRateLimiter], slowDelay for [NewItemFastSlowRateLimiter]).
// Otherwise the wait is at most the limiter's delay or about two windows,
// whichever is longer. The run that follows a refusal is not counted as a
// retry: the budget counted it as refused.
//
// When is called with the queue's lock held, so that no two concurrent
// AddRateLimited calls for one item both call it; the limiter must not call
// back into the queue. AddRateLimited does nothing once the queue is shutting
// down.
func (q *RateLimitingQueue[T]) AddRateLimited(item T) {
	q.addRateLimited(item)
}

// addRateLimited is AddRateLimited; it returns the delay of the requeue,
// and whether the retry budget refused it (RunWorkers logs that), or
// pending true if the item's run was already pending.
func (q *RateLimitingQueue[T]) addRateLimited(item T) (r requeue) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return requeue{}
	}
	now := q.nowLocked()
	q.queueDueLocked(now) // an item that is due counts as queued, not waiting
	if q.queuedOrWaitingLocked(item) {
		q.raisePendingLocked(item, AddOptions{}, now) // a pending run at a negative priority rises to 0
		q.delays.arm(now)
		return requeue{pending: true}
	}
	r.delay, r.refused = q.budget.requeueDelay(q.limiter, q.limiter.When(item))
	q.noteRefusalLocked(r.refused)
	q.addAfterLocked(item, r.delay, now)
	return r
}

// requeue is what became of a rate-limited requeue, for RunWorkers' log.
type requeue struct {
	delay   time.Duration // how long the item waits
	refused bool          // the retry budget refused it: delay is the budget's
	pending bool          // a run of the item was already pending: nothing was added
}

// noteRefusalLocked counts a requeue the retry budget refused, if refused,
// in the DelayMetrics.
func (q *Queue[T]) noteRefusalLocked(refused bool) {
	if refused && q.delayObs != nil {
		q.delayObs.m.IncBudgetRefused()
	}
}

// AddWithOptions adds items as o says. It is controller-runtime's
// priority queue's AddWithOpts:
//
//   - With o.RateLimited, each item waits the delay the limiter's When
//     returns, or o.After if that is positive and shorter. As in
//     AddRateLimited, an item whose run is already pending (queued, or
//     waiting) does not ask the limiter: only its priority can rise, and,
//     if it waits and o.After is positive, its ready time come earlier.
//   - Without, each item waits o.After, as in AddAfter; o.After ≤ 0 adds it
//     now, as Add does.
//   - An item already queued or waiting keeps the higher of its two
//     priorities and the earlier of its two ready times. An item queued at
//     a lower priority moves to the end of its new level. An item being
//     processed that is added again runs once more after Done, at the
//     highest priority it was added at.
//
// Add and AddRateLimited are AddWithOptions at priority 0. Unlike AddAfter
// (which keeps client-go's semantics), an item added with a positive delay
// while it is queued does not wait for a further run: its pending run takes
// the higher priority, as in controller-runtime, where
// Add("x") then AddWithOptions(AddOptions{After: time.Hour, Priority: 7}, "x")
// hands x out now at priority 7. An item being processed and not queued
// again waits o.After for its further run.
//
// The limiter is called with the queue's lock held (see AddRateLimited).
// AddWithOptions does nothing once the queue is shutting down.
func (q *RateLimitingQueue[T]) AddWithOptions(o AddOptions, items ...T) {
	q.addWithOptions(o, q.limiter, q.budget, items)
}

// Get is [Queue.Get]; with [WithRetryBudget], the item it hands out counts
// as a request of the budget.
func (q *RateLimitingQueue[T]) Get() (item T, shutdown bool) {
	item, shutdown = q.DelayingQueue.Get()
	if !shutdown {
		q.budget.request(0)
	}
	return item, shutdown
}

// GetContext is [Queue.GetContext]; with [WithRetryBudget], the item it
// hands out counts as a request of the budget.
func (q *RateLimitingQueue[T]) GetContext(ctx context.Context) (item T, err error) {
	item, err = q.DelayingQueue.GetContext(ctx)
	if err == nil {
		q.budget.request(0)
	}
	return item, err
}

// GetWithPriority is [Queue.GetWithPriority]; with [WithRetryBudget], the
// item it hands out counts as a request of the budget.
func (q *RateLimitingQueue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	item, priority, shutdown = q.DelayingQueue.GetWithPriority()
	if !shutdown {
		q.budget.request(0)
	}
	return item, priority, shutdown
}

// GetContextWithPriority is [Queue.GetContextWithPriority]; with
// [WithRetryBudget], the item it hands out counts as a request of the budget.
// RunWorkers takes its items through it.
func (q *RateLimitingQueue[T]) GetContextWithPriority(ctx context.Context) (item T, priority int, err error) {
	item, priority, err = q.DelayingQueue.GetContextWithPriority(ctx)
	if err == nil {
		q.budget.request(0)
	}
	return item, priority, err
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
