package backoff

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/retrykit/backoff/internal/waitheap"
)

// delays is the delaying part of a Queue: the items that wait for their
// ready time, and the one clock timer that has the queue move them to the
// FIFO when the earliest is due. Its fields are guarded by the queue's
// mutex. The queue moves due items with one entry point, promoteDueAtLocked
// (or promoteDueLocked, which reads the clock only if an item waits).
//
// A plain Queue carries one too: Add, Get, Len and Done, which DelayingQueue
// and RateLimitingQueue inherit, must queue what is due and take an added
// item out of the wait. In a plain Queue nothing waits: the heap allocates
// nothing, and each call costs one length check.
type delays[T comparable] struct {
	waiting waitheap.Heap[T] // ready times in nanoseconds since the queue's epoch
	clock   clock.WithDelayedExecution

	// The timer is pending while an item waits and the queue runs. armed
	// says it was last set for armedAt and not stopped since; a firing, or a
	// stale firing's onTimer, may leave it false while the timer is pending,
	// never true for long while it is not.
	timer   clock.Timer
	armed   bool
	armedAt int64
	// frozen is set at shutdown: waiting items then stay where they are, for
	// TakeWaiting, and the timer stays stopped.
	frozen bool
	// fireInline says that the clock runs AfterFunc callbacks on a goroutine
	// of their own with no lock held, as the real clock does, so the callback
	// may take the queue's mutex itself.
	fireInline bool
	fire       func() // the timer callback, made once so that arming allocates nothing
}

// init sets the clock and the timer callback.
func (d *delays[T]) init(c clock.WithDelayedExecution, fire func()) {
	d.clock = c
	switch c.(type) {
	case clock.RealClock, *clock.RealClock:
		d.fireInline = true
	}
	d.fire = fire
}

// promoteDueLocked is promoteDueAtLocked at the clock's current time. It
// reads the clock only if an item waits and the queue runs.
func (q *Queue[T]) promoteDueLocked() {
	if q.delays.waiting.Len() > 0 {
		q.promoteDueNowLocked()
	}
}

// promoteDueNowLocked is promoteDueLocked once an item waits: out of line,
// so that promoteDueLocked, called by every Get and Done, inlines.
func (q *Queue[T]) promoteDueNowLocked() {
	if !q.delays.frozen {
		q.promoteDueAtLocked(q.nowLocked())
	}
}

// promoteDueAtLocked queues, in ready-time order, every waiting item whose
// ready time is at or before now, then sets the timer for the new earliest
// ready time. It does nothing once the queue is shutting down: waiting items
// are then frozen for TakeWaiting.
func (q *Queue[T]) promoteDueAtLocked(now int64) {
	d := &q.delays
	if d.frozen {
		return
	}
	for d.waiting.Len() > 0 && d.waiting.MinAt() <= now {
		// The item joined the FIFO at its ready time, however late this
		// promotion runs: queue latency counts from there.
		e := d.waiting.PopMin()
		q.enqueuePrioLocked(e.Item, q.states.Hash(e.Item), e.At, q.prios.unwait(e.Item))
	}
	d.arm(now)
}

// unwaitLocked queues what is due and takes item out of the wait, for an Add
// of item: the item runs once, now (kubernetes#126027). It returns the
// priority the item waited with and whether it waited.
func (q *Queue[T]) unwaitLocked(item T) (int, bool) {
	if q.delays.waiting.Len() > 0 {
		return q.unwaitNowLocked(item)
	}
	return 0, false
}

// unwaitNowLocked is unwaitLocked while items wait: out of line, so that
// unwaitLocked inlines.
func (q *Queue[T]) unwaitNowLocked(item T) (int, bool) {
	now := q.nowLocked()
	q.promoteDueAtLocked(now)
	return q.removeWaitingLocked(item, now)
}

// waitLocked makes item wait until at, or until its current ready time if
// that is earlier, with priority prio, or its current priority if that is
// higher. now is the time of the last promotion.
func (q *Queue[T]) waitLocked(item T, at, now int64, prio int) {
	if prio != 0 || q.prios.waitingUsed() {
		q.prios.wait(item, prio, q.delays.waiting.Contains(item))
	}
	q.delays.waiting.PushOrLower(item, at)
	q.delays.arm(now)
}

// removeWaitingLocked takes item out of the wait, if it waits, at time now,
// and returns the priority it waited with and whether it waited.
func (q *Queue[T]) removeWaitingLocked(item T, now int64) (int, bool) {
	d := &q.delays
	if d.waiting.Len() > 0 && d.waiting.Remove(item) {
		d.arm(now)
		return q.prios.unwait(item), true
	}
	return 0, false
}

// arm keeps the timer's invariant: armed, for the earliest ready time,
// exactly while an item waits and the queue runs. now is the time at which
// due items were last promoted, so that the earliest ready time is after it.
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
func (d *delays[T]) arm(now int64) {
	if d.waiting.Len() == 0 || d.frozen {
		d.stop()
		return
	}
	at := d.waiting.MinAt()
	if d.armed && d.armedAt == at {
		return
	}
	wait := time.Duration(at - now)
	if d.timer == nil {
		d.timer = d.clock.AfterFunc(wait, d.fire)
	} else if !d.timer.Reset(wait) {
		select {
		case <-d.timer.C():
		default:
		}
	}
	d.armed, d.armedAt = true, at
}

// stop stops the timer whatever armed says: armed can be false while the
// timer is pending. A stale firing's onTimer clears it; if another onTimer,
// holding a clock reading from before a Step, re-armed the timer in between,
// that re-arm lands after the Step's firing and stays pending. Stop on a
// timer that is not pending does nothing, and the heap empties at most once
// per item, so this costs little.
func (d *delays[T]) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
	d.armed = false
}

// freeze stops the timer for good: the queue is shutting down.
func (d *delays[T]) freeze() {
	d.frozen = true
	d.stop()
}

// onTimerFired is the timer callback. A FakeClock runs it inside Step while
// holding its own lock, and goroutines holding the queue's mutex call the
// clock (Now, Reset): taking the mutex here could deadlock against them. So,
// except on the real clock, whose callbacks run on a goroutine of their own,
// the work is handed to a short-lived goroutine; it ends as soon as it has
// promoted the due items. Nothing is lost if it runs late: Len, Get and the
// adds promote due items themselves.
func (q *Queue[T]) onTimerFired() {
	if q.delays.fireInline {
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
	// Either way, arm re-arms it from scratch if items still wait; if none
	// waits, the timer is stopped even though armed says it is not set, since
	// a stale firing can leave it pending (promoteDueLocked alone would skip
	// an empty heap and keep that clock waiter).
	q.delays.armed = false
	if q.delays.waiting.Len() == 0 {
		q.delays.stop()
		return
	}
	q.promoteDueLocked()
}

// queuedOrWaitingLocked reports whether item is queued (dirty) or waits for
// its delay.
func (q *Queue[T]) queuedOrWaitingLocked(item T) bool {
	st, _ := q.states.Find(q.states.Hash(item), item)
	return st&queueDirty != 0 || q.delays.waiting.Contains(item)
}
