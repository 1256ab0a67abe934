package backoff

import (
	"time"
)

// DelayingQueue is a [Queue] that can also add an item after a delay. It is
// client-go's delaying queue (its method set is exactly
// workqueue.TypedDelayingInterface[T], plus GetContext, NextReadyAt and
// TakeWaiting), reworked so that waiting costs nothing while nothing is due:
//
//   - AddAfter is synchronous. Waiting items live in a min-heap ordered by
//     ready time, with an index for O(log n) updates, guarded by the queue's
//     one mutex; AddAfter allocates nothing once the heap has grown. client-go
//     allocates per call and hands each one to a goroutine over a channel.
//   - One clock timer (an AfterFunc) serves the whole heap. It is re-armed
//     only when the earliest ready time changes, and stopped when the heap
//     empties; there is no heartbeat. A queue whose items all wait runs no
//     goroutine and uses no CPU (client-go's queue runs a goroutine and a
//     10-second ticker per queue: client-go#746). With a FakeClock, a queue
//     registers at most one waiter however many items wait.
//   - Len, Get and the adds move items whose ready time has passed to the
//     FIFO themselves, so with a FakeClock an item is visible as soon as Step
//     passes its ready time, with no polling.
//   - A waiting int item takes about 36 bytes of heap at a million items
//     (client-go: about 95).
//
// A DelayingQueue is safe for concurrent use by multiple goroutines. Its zero
// value is not usable: create it with [NewDelayingQueue].
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
	q.promoteLocked(now)
	q.addAfterLocked(item, d, now)
}

// addAfterLocked is AddAfter on a running queue whose due items have been
// promoted at time now.
func (q *Queue[T]) addAfterLocked(item T, d time.Duration, now int64) {
	if d <= 0 {
		q.addLocked(item, q.states.hash(item), now)
	} else {
		at := int64(addDuration(time.Duration(now), d))
		q.waiting.pushOrLower(item, at)
		q.armLocked(now)
	}
	if q.metrics != nil {
		q.metrics.IncRetries()
	}
}

// NextReadyAt reports when the earliest waiting item becomes ready, and
// whether an item waits at all. It returns false once the queue is shut down:
// waiting items then never become ready (see [DelayingQueue.TakeWaiting]).
//
// With a FakeClock, stepping the clock to NextReadyAt moves the next item to
// the FIFO; simulations use it to jump from one ready time to the next.
func (q *DelayingQueue[T]) NextReadyAt() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown || q.waiting.len() == 0 {
		return time.Time{}, false
	}
	q.promoteLocked(q.nowLocked())
	if q.waiting.len() == 0 {
		return time.Time{}, false
	}
	return q.epoch.Add(time.Duration(q.waiting.minAt())), true
}

// A WaitingItem is an item that waited for its delay when
// [DelayingQueue.TakeWaiting] took it, and the time at which it would have
// been queued.
type WaitingItem[T comparable] struct {
	Item    T
	ReadyAt time.Time
}

// TakeWaiting removes every item that waits for its delay and returns them,
// earliest ready time first; nil if none waits. While the queue runs, items
// whose ready time has passed are queued first and so are not returned.
//
// Its use is after ShutDown: the items still waiting then never become ready,
// and client-go loses them silently. TakeWaiting gives them back, with their
// ready times, to be persisted, logged or handed to another queue. It is
// O(n log n).
func (q *DelayingQueue[T]) TakeWaiting() []WaitingItem[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.waiting.len() > 0 && !q.shuttingDown {
		q.promoteLocked(q.nowLocked())
	}
	if q.waiting.len() == 0 {
		return nil
	}
	out := make([]WaitingItem[T], 0, q.waiting.len())
	for q.waiting.len() > 0 {
		e := q.waiting.popMin()
		out = append(out, WaitingItem[T]{Item: e.item, ReadyAt: q.epoch.Add(time.Duration(e.at))})
	}
	q.armLocked(0) // stops the timer: the heap is empty
	return out
}

// promoteLocked queues, in ready-time order, every waiting item whose ready
// time is at or before now, then makes the timer match the new earliest ready
// time. It does nothing once the queue is shutting down: waiting items are
// then frozen for TakeWaiting.
func (q *Queue[T]) promoteLocked(now int64) {
	if q.shuttingDown {
		return
	}
	for q.waiting.len() > 0 && q.waiting.minAt() <= now {
		// The item joined the FIFO at its ready time, however late this
		// promotion runs: queue latency counts from there.
		e := q.waiting.popMin()
		q.enqueueLocked(e.item, q.states.hash(e.item), e.at)
	}
	q.armLocked(now)
}

// armLocked keeps the timer's invariant: armed, for the earliest ready time,
// exactly while the heap is non-empty and the queue is running. now is the
// time at which due items were last promoted, so that the earliest ready time
// is after it.
//
// The timer is made once and then reused with Reset, which moves a pending
// timer in one step: a Stop followed by Reset would leave a moment in which a
// FakeClock reports no waiter for a queue whose items wait. A FakeClock timer
// that has fired still holds its time in its channel (of capacity 1), and a
// second firing would block Step forever on the full channel; so when Reset
// finds the timer already fired, the channel is drained. A Step that fires
// the re-armed timer before the drain waits for it on the channel and does
// not hold anything the drain needs, so the order is safe. (A real AfterFunc
// timer has no channel; the drain is then a no-op.)
func (q *Queue[T]) armLocked(now int64) {
	if q.waiting.len() == 0 || q.shuttingDown {
		// Stop the timer whatever armed says: armed can be false while the
		// timer is pending. A stale firing's onTimer clears it; if another
		// onTimer, holding a clock reading from before a Step, re-armed the
		// timer in between, that re-arm lands after the Step's firing and
		// stays pending. Stop on a timer that is not pending does nothing,
		// and the heap empties at most once per item, so this costs little.
		if q.timer != nil {
			q.timer.Stop()
		}
		q.armed = false
		return
	}
	at := q.waiting.minAt()
	if q.armed && q.armedAt == at {
		return
	}
	d := time.Duration(at - now)
	if q.timer == nil {
		q.timer = q.clock.AfterFunc(d, q.fire)
	} else {
		if !q.timer.Reset(d) {
			select {
			case <-q.timer.C():
			default:
			}
		}
	}
	q.armed, q.armedAt = true, at
}

// onTimerFired is the timer callback. A FakeClock runs it inside Step while
// holding its own lock, and goroutines holding mu call the clock (Now,
// Reset): taking mu here could deadlock against them. So, except on the real
// clock, whose callbacks run on a goroutine of their own, the work is handed
// to a short-lived goroutine; it ends as soon as it has promoted the due
// items. Nothing is lost if it runs late: Len, Get and the adds promote due
// items themselves.
func (q *Queue[T]) onTimerFired() {
	if q.fireInline {
		q.onTimer()
		return
	}
	go q.onTimer()
}

// onTimer queues the due items and re-arms the timer for the next ready
// time.
func (q *Queue[T]) onTimer() {
	q.mu.Lock()
	defer q.mu.Unlock()
	// The timer has fired, or is stale: a firing that raced with a re-arm.
	// Either way, armLocked re-arms it from scratch if items still wait.
	q.armed = false
	if q.waiting.len() > 0 && !q.shuttingDown {
		q.promoteLocked(q.nowLocked())
	}
}
