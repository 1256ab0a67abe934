package backoff

import (
	"time"
)

// DelayingQueue is a [Queue] that can also add an item after a delay. It is
// client-go's delaying queue (its method set holds
// workqueue.TypedDelayingInterface[T], plus GetContext, GetWithPriority,
// GetContextWithPriority, AddWithOptions, and the methods that move, cancel,
// read and park waiting items: Reschedule, CancelWaiting, WaitingFor,
// NextReadyAt, TakeWaiting, Park, Wake and Parked), reworked so that waiting
// costs nothing while nothing is due:
//
//   - AddAfter is synchronous. Waiting items live in a min-heap ordered by
//     ready time, with an index for O(log n) updates, guarded by the queue's
//     one mutex; AddAfter allocates nothing once the heap has grown. client-go
//     allocates per call and hands each one to a goroutine over a channel.
//     From 16,384 waiting items, when the heap outgrows a core's cache,
//     AddAfter's changes are applied 16 at a time, invisibly, so that their
//     cache misses overlap.
//   - One clock timer (an AfterFunc) serves the whole heap. It is re-armed
//     only when the earliest ready time changes, and stopped when the heap
//     empties; there is no heartbeat. A queue whose items all wait runs no
//     goroutine and uses no CPU (client-go's queue runs a goroutine and a
//     10-second ticker per queue: client-go#746). With a FakeClock, a queue
//     registers at most one waiter however many items wait.
//   - Len, Get and the adds move items whose ready time has passed to the
//     FIFO themselves, so with a FakeClock an item is visible as soon as Step
//     passes its ready time, with no polling.
//   - A waiting item takes a fraction of the heap memory it takes in
//     client-go (BenchmarkDelayingQueueBytesPerWaitingItem here, and
//     BenchmarkWaitingHeap in bench/ against client-go).
//
// A DelayingQueue is safe for concurrent use by multiple goroutines. Its zero
// value is not usable: create it with [NewDelayingQueue].
//
// Besides its own methods (which go doc lists below), it has those of the
// [Queue] it embeds: [Queue.Add], [Queue.Done], [Queue.Get],
// [Queue.GetContext], [Queue.GetWithPriority], [Queue.GetContextWithPriority],
// [Queue.Len], [Queue.ShutDown], [Queue.ShutDownWithDrain] and
// [Queue.ShuttingDown].
type DelayingQueue[T comparable] struct {
	Queue[T]
}

// NewDelayingQueue returns an empty, running delaying queue. It reads
// [WithClock], [WithMetrics], [WithName] and [WithLogger]. It starts no
// goroutine; while items wait, the clock holds one timer for the queue.
func NewDelayingQueue[T comparable](opts ...Option) *DelayingQueue[T] {
	q := new(DelayingQueue[T])
	q.init(newConfig(opts))
	return q
}

// AddAfter adds item once d has passed: at once if d ≤ 0 (a negative d counts
// as zero), else when the clock reaches now+d. A ready time more than about
// 292 years after the queue's creation (math.MaxInt64 nanoseconds)
// saturates there instead of overflowing. If item already waits, the earlier
// of its two ready times wins. Items that become ready together are queued in
// the order of their ready times, and ties in the order in which those times
// were set. AddAfter does nothing once the queue is shutting down.
//
// AddAfter(item, d ≤ 0) is Add(item): it also takes item out of the wait
// (kubernetes#126027). With d > 0, an item that is queued or being processed
// still waits for a further run after d, as in client-go: a requeue after a
// delay asks for a run that late, which the pending one does not give.
//
// AddAfter never blocks beyond the queue's mutex and does not allocate in
// steady state; O(log n) in the number of waiting items.
func (q *DelayingQueue[T]) AddAfter(item T, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	now := q.nowLocked()
	q.queueDueLocked(now) // addAfterLocked arms the timer
	q.addAfterLocked(item, d, now)
}

// AddWithOptions adds items as o says; see
// [RateLimitingQueue.AddWithOptions]. A DelayingQueue has no rate limiter:
// o.RateLimited is ignored and the items wait o.After.
func (q *DelayingQueue[T]) AddWithOptions(o AddOptions, items ...T) {
	q.addWithOptions(o, nil, budgetGate{}, items)
}

// Reschedule replaces item's pending delayed add (from AddAfter,
// AddRateLimited, AddWithOptions or Reschedule) by one due at now+d, whether
// that is earlier or later: the last call wins, where AddAfter keeps the
// earlier of two ready times (kubernetes#133560). A d ≤ 0 makes it due now:
// item is queued at once, as by Add. With no pending delayed add,
// Reschedule is AddAfter(item, d). Either way, if item is also queued, it
// stays queued: only its further run moves. The item keeps the priority it
// waited with. Replacing a pending delayed add counts no new retry in the
// metrics; making one counts one, as AddAfter does.
//
// Reschedule does nothing once the queue is shutting down. Like AddAfter,
// it allocates nothing in steady state and is O(log n).
func (q *DelayingQueue[T]) Reschedule(item T, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	now := q.nowLocked()
	q.queueDueLocked(now) // both ways below arm the timer
	if d > 0 && q.delays.waiting.Len() > 0 && q.delays.waiting.Contains(item) {
		q.delays.waiting.Set(item, int64(addDuration(time.Duration(now), d)))
		q.delays.arm(now)
		return
	}
	q.addAfterLocked(item, d, now)
}

// CancelWaiting removes item's pending delayed add, and reports whether it
// had one. An item whose ready time has passed is queued, not waiting:
// CancelWaiting leaves it queued and reports false. It does not touch a
// queued or processing item's pending run, nor a park (see
// [DelayingQueue.Park]). After ShutDown it still removes a waiting item,
// which TakeWaiting then does not return. O(log n); it allocates nothing.
func (q *DelayingQueue[T]) CancelWaiting(item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.delays.waiting.Len() == 0 {
		return false
	}
	now := q.nowLocked()
	q.promoteDueAtLocked(now)
	if q.delays.waiting.Len() == 0 || !q.delays.waiting.Remove(item) {
		return false
	}
	q.prios.unwait(item)
	q.delays.arm(now)
	if q.delayObs != nil {
		q.delayObs.cancelled(item)
	}
	return true
}

// WaitingFor reports how long until item's pending delayed add is due, and
// whether it has one; tests use it to assert that a controller asked for a
// requeue, and when (kubernetes#49783). It reports false for an item whose
// ready time has passed (it is queued), and once the queue is shut down, as
// NextReadyAt does. A parked item is not waiting for a delay (see
// [DelayingQueue.Parked]).
func (q *DelayingQueue[T]) WaitingFor(item T) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown || q.delays.waiting.Len() == 0 {
		return 0, false
	}
	now := q.nowLocked()
	q.promoteDueAtLocked(now)
	at, ok := q.delays.waiting.At(item)
	if !ok {
		return 0, false
	}
	return time.Duration(at - now), true
}

// NextReadyAt reports when the earliest waiting item becomes ready, and
// whether an item waits at all. A parked item counts, at the end of its
// maxWait (see [DelayingQueue.Park]). It returns false once the queue is shut down:
// waiting items then never become ready (see [DelayingQueue.TakeWaiting]).
//
// With a FakeClock, stepping the clock to NextReadyAt moves the next item to
// the FIFO; simulations use it to jump from one ready time to the next.
func (q *DelayingQueue[T]) NextReadyAt() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return time.Time{}, false
	}
	q.promoteDueLocked()
	if q.delays.waiting.Len() == 0 && q.delays.held.Len() == 0 {
		return time.Time{}, false
	}
	return q.epoch.Add(time.Duration(q.delays.nextAt())), true
}

// A WaitingItem is an item that waited for its delay when
// [DelayingQueue.TakeWaiting] took it, and the time at which it would have
// been queued.
type WaitingItem[T comparable] struct {
	Item    T
	ReadyAt time.Time
	// Priority is the priority the item waited with (see
	// [RateLimitingQueue.AddWithOptions]); 0 for AddAfter and AddRateLimited.
	Priority int
	// Parked says that the item was parked ([DelayingQueue.Park]) rather
	// than waiting for a delay; ReadyAt is then the end of its maxWait.
	Parked bool
}

// TakeWaiting removes every item that waits for its delay, and every parked
// item, and returns them, earliest ready time first; nil if none waits. An
// item both waiting and parked is returned twice, once each way. While the
// queue runs, items whose ready time has passed are queued first and so are
// not returned.
//
// Its use is after ShutDown: the items still waiting then never become ready,
// and client-go loses them silently. TakeWaiting gives them back, with their
// ready times, to be persisted, logged or handed to another queue. It is
// O(n log n).
func (q *DelayingQueue[T]) TakeWaiting() []WaitingItem[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.promoteDueLocked()
	waiting, held := &q.delays.waiting, &q.delays.held
	if waiting.Len() == 0 && held.Len() == 0 {
		return nil
	}
	out := make([]WaitingItem[T], 0, waiting.Len()+held.Len())
	q.detachParkedLocked() // their held runs leave the queue with them
	for waiting.Len() > 0 || held.Len() > 0 {
		if waiting.Len() == 0 || (held.Len() > 0 && held.MinAt() < waiting.MinAt()) {
			e := held.PopMin()
			w := WaitingItem[T]{Item: e.Item, ReadyAt: q.epoch.Add(time.Duration(e.At)), Priority: q.parked.items[e.Item].prio, Parked: true}
			delete(q.parked.items, e.Item)
			out = append(out, w)
			continue
		}
		e := waiting.PopMin()
		if q.delayObs != nil {
			q.delayObs.cancelled(e.Item)
		}
		out = append(out, WaitingItem[T]{Item: e.Item, ReadyAt: q.epoch.Add(time.Duration(e.At)), Priority: q.prios.unwait(e.Item)})
	}
	q.delays.stop() // nothing waits
	return out
}
