package backoff

import (
	"context"
	"fmt"
	"time"
)

// AddOptions says how [RateLimitingQueue.AddWithOptions] adds items: after a
// delay, after the rate limiter's delay, and at which priority. The zero
// value adds now at priority 0, as Add does.
type AddOptions struct {
	// After, if positive, makes the items wait this long before they are
	// queued, as AddAfter does. Zero or negative means now.
	After time.Duration
	// RateLimited makes the items wait the delay the queue's rate limiter
	// returns (When), or After if that is positive and shorter, as
	// AddRateLimited does.
	RateLimited bool
	// Priority is the priority the items are queued at: Get hands out the
	// highest priority first, FIFO within a priority. 0 is the priority of
	// Add, AddAfter and AddRateLimited; controller-runtime adds its initial
	// list and resyncs at -100, below real changes.
	Priority int
}

// priorityConfig holds the options of the queues about priorities.
type priorityConfig struct {
	fairKey      any // func(T) string, from WithFairness; nil without fairness
	maxReadyWait time.Duration
}

// WithFairness makes a queue hand out the ready items of one priority
// round-robin across the keys that key returns, FIFO within a key: one key
// with ten thousand items delays another key's one item by one turn, not ten
// thousand. For controller-runtime's reconcile.Request, the namespace is the
// usual key. The default is FIFO within a priority.
//
// key is called once per item that becomes ready, with the queue's lock
// held: it must be fast and must not call back into the queue. T must be the
// queue's item type.
//
// WithFairness panics if key is nil; a queue constructor given a key of
// another item type panics.
func WithFairness[T comparable](key func(T) string) Option {
	mustNotBeNil("WithFairness", "key", key == nil)
	return func(c *config) { c.queue.priority.fairKey = key }
}

// WithMaxReadyWait bounds starvation across priorities: a ready item that
// has waited longer than d is handed out before items of higher priority,
// the item that has waited longest first (with [WithFairness] too: such an
// item is handed out out of its key's turn, and the other keys keep their
// places). 0, the default, means strict priority: a stream of high-priority
// items can delay lower ones forever.
//
// WithMaxReadyWait panics if d is negative.
func WithMaxReadyWait(d time.Duration) Option {
	mustNotBeNegative("WithMaxReadyWait", "d", d)
	return func(c *config) { c.queue.priority.maxReadyWait = d }
}

// initPriorities reads the options about priorities.
func (q *Queue[T]) initPriorities(cfg priorityConfig) {
	q.prios.maxReadyWait = int64(cfg.maxReadyWait)
	if cfg.fairKey == nil {
		return
	}
	key, ok := cfg.fairKey.(func(T) string)
	if !ok {
		var zero T
		badArgument("WithFairness", fmt.Sprintf("key must be a func(%T) string for this queue", zero), fmt.Sprintf("%T", cfg.fairKey))
	}
	q.ready.Init(func(e readyEntry[T]) string { return key(e.item) })
	q.ready.SetCurrent(q.prios.isCurrent)
	if cfg.maxReadyWait > 0 {
		q.ready.TrackOldest()
	}
}

// readyLenLocked returns the number of items Get can hand out.
func (q *Queue[T]) readyLenLocked() int {
	return q.ready.Len() - q.prios.stale
}

// setDepthLocked reports the depth to the metrics, which must not be nil.
func (q *Queue[T]) setDepthLocked() {
	q.metrics.SetDepth(q.readyLenLocked())
}

// enqueuePrioLocked is enqueueLocked at priority prio: an item that is
// already dirty keeps the higher of its two priorities, and one that is
// queued and rises moves to the end of its new level.
func (q *Queue[T]) enqueuePrioLocked(item T, hash uint64, at int64, prio int) {
	if prio == 0 && !q.prios.used() {
		q.enqueuePlainLocked(item, hash, at)
		return
	}
	q.enqueueGeneralLocked(item, hash, at, prio)
}

// enqueueGeneralLocked is enqueuePrioLocked once priorities are in use.
func (q *Queue[T]) enqueueGeneralLocked(item T, hash uint64, at int64, prio int) {
	st, ref := q.states.FindOrInsert(hash, item, queueDirty)
	if st&queueDirty != 0 {
		cur := q.pendingLocked(ref, item)
		if prio <= cur {
			return
		}
		q.setPendingLocked(ref, item, prio)
		if st&queueProcessing != 0 {
			return // Done queues it at prio
		}
		// Queued at a lower priority: its entry goes stale, and a new one
		// joins the end of the new level.
		if q.prioDepths != nil {
			q.prioDepths.add(cur, -1)
		}
		q.prios.raise(item)
		q.ready.MarkStale(cur, readyEntry[T]{item: item})
		q.pushReadyLocked(item, hash, at, prio)
		return
	}
	if st != 0 {
		q.states.Set(ref, item, st|queueDirty)
	}
	if q.metrics != nil {
		q.metrics.IncAdds()
	}
	if prio != 0 {
		q.addPendingLocked(ref, item, prio) // not dirty: its aux byte is 0
	}
	if st&queueProcessing != 0 {
		return // Done queues it
	}
	q.pushReadyLocked(item, hash, at, prio)
}

// popReadyLocked takes the next item's current entry out of the levels,
// skipping stale entries, and returns it with its priority. An item must be
// ready.
func (q *Queue[T]) popReadyLocked() (readyEntry[T], int) {
	for {
		var e readyEntry[T]
		var prio int
		if q.zero != nil && q.ready.OnlyZero() {
			e = q.zero.Pop()
		} else if q.prios.maxReadyWait > 0 {
			e, prio = q.popOverdueLocked()
		} else {
			e, prio = q.ready.Pop()
		}
		// Without stale entries, every entry is current: no lookup.
		if q.prios.stale == 0 || q.prios.popped(&e) {
			if q.prios.stale > 0 && q.readyLenLocked() == 0 {
				q.dropStaleLocked()
			}
			return e, prio
		}
	}
}

// dropStaleLocked empties the levels, which hold only stale entries, so
// that the items they refer to are not kept until the next Get.
func (q *Queue[T]) dropStaleLocked() {
	q.ready.Clear(func(e readyEntry[T]) { q.prios.popped(&e) })
}

// popOverdueLocked pops the oldest entry of the level whose oldest entry
// has waited longest, if that is longer than maxReadyWait, and else the
// next entry of the highest level. An oldest entry may be stale: the
// caller then drops it and asks again.
func (q *Queue[T]) popOverdueLocked() (readyEntry[T], int) {
	now := q.nowLocked()
	oldest, oldestAt := 0, int64(0)
	found := false
	q.ready.Heads(func(prio int, next readyEntry[T]) bool {
		if now-next.at > q.prios.maxReadyWait && (!found || next.at < oldestAt) {
			oldest, oldestAt, found = prio, next.at, true
		}
		return true
	})
	if !found {
		return q.ready.Pop()
	}
	return q.ready.PopOldest(oldest), oldest
}

// GetWithPriority is [Queue.Get] that also returns the priority at which
// the item was queued.
func (q *Queue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	item, priority, err := q.get(context.Background())
	return item, priority, err != nil
}

// GetContextWithPriority is [Queue.GetContext] that also returns the
// priority at which the item was queued.
func (q *Queue[T]) GetContextWithPriority(ctx context.Context) (item T, priority int, err error) {
	return q.get(ctx)
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
// Add, AddAfter and AddRateLimited are AddWithOptions at priority 0. As
// with AddAfter, an item added with a positive delay while it is queued or
// being processed still waits for a further run.
//
// The limiter is called with the queue's lock held (see AddRateLimited).
// AddWithOptions does nothing once the queue is shutting down.
func (q *RateLimitingQueue[T]) AddWithOptions(o AddOptions, items ...T) {
	q.addWithOptions(o, q.limiter, q.budget, items)
}

// AddWithOptions adds items as o says; see
// [RateLimitingQueue.AddWithOptions]. A DelayingQueue has no rate limiter:
// o.RateLimited is ignored and the items wait o.After.
func (q *DelayingQueue[T]) AddWithOptions(o AddOptions, items ...T) {
	q.addWithOptions(o, nil, nil, items)
}

// addWithOptions is AddWithOptions; limiter and budget are nil for a
// DelayingQueue, and budget is nil without WithRetryBudget. A rate-limited
// add asks the budget as AddRateLimited does (see requeueDelay).
func (q *Queue[T]) addWithOptions(o AddOptions, limiter RateLimiter[T], budget *RetryBudget, items []T) {
	if len(items) == 1 && o.After <= 0 && (!o.RateLimited || limiter == nil) {
		q.addAt(items[0], o.Priority) // the common call: one item, now
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	if o.After <= 0 && (!o.RateLimited || limiter == nil) {
		// Add at a priority, which is no retry: the clock is read only if
		// something waits, or for the join time (see joinTimeLocked).
		for _, item := range items {
			prio := o.Priority
			if p, waited := q.unwaitLocked(item); waited {
				prio = max(prio, p)
			}
			q.enqueuePrioLocked(item, q.states.Hash(item), q.joinTimeLocked(), prio)
		}
		return
	}
	now := q.nowLocked()
	q.promoteDueAtLocked(now)
	for _, item := range items {
		d := o.After
		if o.RateLimited && limiter != nil {
			if q.queuedOrWaitingLocked(item) {
				q.raisePendingLocked(item, o, now)
				continue
			}
			d = limiter.When(item)
			if budget != nil {
				d = requeueDelay(budget, limiter, d)
			}
			if o.After > 0 {
				d = min(d, o.After)
			}
		}
		q.addAfterPrioLocked(item, d, now, o.Priority) // counts a retry, as AddAfter
	}
}

// addAt is Add at priority prio: an item that waited keeps the higher of
// prio and its waiting priority. Like Add, it takes the cache miss on the
// item's state before the lock.
func (q *Queue[T]) addAt(item T, prio int) {
	hash := q.states.Hash(item)
	_ = q.states.Prefetch(hash)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	if q.delays.waiting.Len() > 0 { // unwaitLocked, inlined by hand
		if p, waited := q.unwaitNowLocked(item); waited {
			prio = max(prio, p)
		}
	}
	if prio == 0 && !q.prios.used() { // enqueuePrioLocked, inlined by hand
		q.enqueuePlainLocked(item, hash, q.joinTimeLocked())
	} else {
		q.enqueueGeneralLocked(item, hash, q.joinTimeLocked(), prio)
	}
}

// raisePendingLocked applies o to an item whose run is pending, for
// AddWithOptions and AddRateLimited, which do not ask the limiter then: its
// priority rises to o.Priority if that is higher, and, if it waits, its
// ready time comes to now+o.After if that is earlier.
func (q *Queue[T]) raisePendingLocked(item T, o AddOptions, now int64) {
	if q.delays.waiting.Contains(item) {
		if o.After > 0 {
			q.waitLocked(item, int64(addDuration(time.Duration(now), o.After)), now, o.Priority)
		} else if o.Priority != 0 || q.prios.waitingUsed() {
			q.prios.wait(item, o.Priority, true)
		}
	}
	st, _ := q.states.Find(q.states.Hash(item), item)
	if st&queueDirty != 0 {
		q.enqueuePrioLocked(item, q.states.Hash(item), now, o.Priority)
	}
}

// priorityOr returns the priority r asks for, or prio if r asks for none.
func (r Result) priorityOr(prio int) int {
	if r.Priority != 0 {
		return r.Priority
	}
	return prio
}

// addRateLimitedAt is AddRateLimited at priority prio, for RunWorkers.
func (q *RateLimitingQueue[T]) addRateLimitedAt(item T, prio int) {
	if prio == 0 {
		q.AddRateLimited(item)
		return
	}
	q.AddWithOptions(AddOptions{RateLimited: true, Priority: prio}, item)
}

// addAfterAt is AddAfter at priority prio, for RunWorkers.
func (q *RateLimitingQueue[T]) addAfterAt(item T, d time.Duration, prio int) {
	if prio == 0 {
		q.AddAfter(item, d)
		return
	}
	q.AddWithOptions(AddOptions{After: d, Priority: prio}, item)
}
