package backoff

import (
	"context"
	"errors"
	"github.com/retrykit/backoff/internal/fifo"
	"github.com/retrykit/backoff/internal/itemstate"
	"github.com/retrykit/backoff/internal/levels"
	"github.com/retrykit/backoff/internal/waitheap"
	"k8s.io/utils/clock"
	"log/slog"
	"reflect"
	"sync"
	"time"
)

// queueConfig holds the options that the queues read. Its zero value is the
// default: no name, slog.Default() as the logger, no metrics.
type queueConfig struct {
	name    string
	logger  *slog.Logger
	metrics QueueMetrics

	priority priorityConfig // priority.go

	itemTimeout time.Duration // WithItemTimeout's; read by RunWorkers (worker.go)
}

// ErrQueueShutDown is the error [Queue.GetContext] returns once the queue is
// shut down and has handed out every queued item.
var ErrQueueShutDown = errors.New("backoff: queue is shut down")

// The state bits of an item the queue knows about. An item in none of these
// states (idle, or only waiting for its delay) has no entry in the states.
const (
	// queueDirty: the item is to be handed out by Get; it sits in the ready
	// FIFO, or, if it is also processing, it joins the FIFO when Done is
	// called. (client-go's "dirty" set.)
	queueDirty itemstate.State = 1 << iota
	// queueProcessing: Get handed the item out and Done was not called yet.
	queueProcessing
)

// Queue is a work queue of items of type T: producers Add items, workers Get
// them, process them and call Done. It is client-go's workqueue
// (workqueue.TypedInterface[T]; its method set is exactly that interface's,
// plus [Queue.GetContext], [Queue.GetWithPriority] and
// [Queue.GetContextWithPriority]):
//
//   - An item is queued at most once: adding an item that is already queued
//     does nothing.
//   - An item is never handed to two workers at once, as long as each worker
//     calls Done once per item it got: adding an item while a worker
//     processes it queues it again when that worker calls Done.
//   - Items are handed out in the order in which they were first added.
//   - After ShutDown, adds are ignored and Get hands out what is still queued,
//     then reports the shutdown.
//
// Every operation takes one mutex for O(1) work; Add, Get and Done allocate
// nothing once the queue has grown to its working size. Memory is given back
// when the queue empties after a burst. An idle queue runs no goroutine.
//
// A Queue is safe for concurrent use by multiple goroutines. Its zero value
// is not usable: create queues with [NewQueue], [NewDelayingQueue] or
// [NewRateLimitingQueue].
type Queue[T comparable] struct {
	mu sync.Mutex
	// cond wakes getters: Signal once per item that joins the FIFO, Broadcast
	// on shutdown and when a GetContext context ends.
	cond sync.Cond
	// drained wakes ShutDownWithDrain callers; it is separate from cond so
	// that a wake-up meant for a getter never goes to a drainer.
	drained sync.Cond

	ready   levels.Levels[readyEntry[T]] // queued items not being processed, by priority, in order
	prios   priorities[T]                // the priorities of items (priority.go)
	states  itemstate.Table[T]           // queueDirty and queueProcessing; no entry means neither
	delays  delays[T]                    // items waiting for their ready time (below)
	parked  parking[T]                   // items held back by Park (park.go)
	starts  map[T]int64                  // when each processing item was handed out; only with metrics
	metrics QueueMetrics                 // nil when there are none
	// prioDepths is set when metrics is a PriorityDepthMetrics
	// (metrics.go).
	prioDepths *priorityDepths
	// delayObs is set when metrics is a DelayMetrics (metrics.go).
	delayObs *delayObserver[T]
	// zero is the ready FIFO of priority 0 without fairness, nil with. It is
	// the queue's one hand-inlined path: pushReadyLocked and popReadyLocked
	// use it instead of the Levels calls, which the compiler does not
	// inline, for the queues that use no priority; it pays in
	// BenchmarkQueueAddGetDone.
	zero  *fifo.Queue[readyEntry[T]]
	clock clock.WithDelayedExecution
	epoch time.Time // clock time 0 of the int64 times of the queue

	wake func() // wakes every getter; the GetContext callback, made once

	shuttingDown bool
	draining     bool // a ShutDownWithDrain waits and no ShutDown has called it off

	name   string
	logger *slog.Logger
}

// readyEntry is an item in the ready FIFO.
type readyEntry[T comparable] struct {
	item T
	at   int64  // when the item joined the FIFO, since the epoch (read only with metrics)
	hash uint64 // the item's hash in the states, which Get needs under the lock
	gen  uint32 // tells a raised item's stale entries from its current one (priority.go)
}

// NewQueue returns an empty, running queue. It reads [WithClock] (for
// metrics), [WithMetrics], [WithName] and [WithLogger]. It starts no
// goroutine.
func NewQueue[T comparable](opts ...Option) *Queue[T] {
	q := new(Queue[T])
	q.init(newConfig(opts))
	return q
}

// init prepares a zero Queue, in place: the timer callback refers to q, so a
// Queue must not move after init.
func (q *Queue[T]) init(cfg config) {
	q.cond.L = &q.mu
	q.drained.L = &q.mu
	q.states.Init()
	q.initPriorities(cfg.queue.priority)
	q.zero = q.ready.Zero()
	q.clock = cfg.clock
	q.epoch = cfg.clock.Now()
	q.delays.init(cfg.clock, q.onTimerFired)
	q.wake = q.wakeGetters
	q.name = cfg.queue.name
	q.logger = cfg.queue.logger
	if m := cfg.queue.metrics; m != nil {
		if _, nop := m.(NopQueueMetrics); !nop {
			q.metrics = m
			q.prioDepths = newPriorityDepths(m)
			q.delayObs = newDelayObserver[T](m)
			q.starts = make(map[T]int64)
			m.TrackProcessing(q.processingTimes)
		}
	}
}

// initPriorities reads the options about priorities (priority.go).
func (q *Queue[T]) initPriorities(cfg priorityConfig) {
	q.prios.maxReadyWait = int64(cfg.maxReadyWait)
	if cfg.fairKey == nil {
		return
	}
	key, ok := cfg.fairKey.(func(T) string)
	if !ok {
		// The types, not values: %T of a zero T would print <nil> for an
		// interface T.
		item := reflect.TypeOf((*T)(nil)).Elem()
		badArgument("WithFairness", "key must be a func("+item.String()+") string for this queue", reflect.TypeOf(cfg.fairKey))
	}
	q.ready.Init(func(e readyEntry[T]) string { return key(e.item) })
	q.ready.SetCurrent(q.prios.isCurrent)
	if cfg.maxReadyWait > 0 {
		q.ready.TrackOldest()
	}
}

// Add queues item, unless it is already queued or the queue is shutting
// down. If item is being processed, it is queued when Done is called for it.
//
// If item waits in a delaying queue (from AddAfter or AddRateLimited), Add
// takes it out of the wait and queues it now: the item runs once, now. This
// fixes kubernetes#126027, where client-go queued it now and left the
// waiting copy to run it a second time later.
func (q *Queue[T]) Add(item T) {
	hash := q.states.Hash(item)
	_ = q.states.Prefetch(hash) // the cache miss on item's state, before the lock
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	q.addLocked(item, hash, 0)
}

// addLocked queues item, whose hash is hash, now, at priority prio: an item
// that waited is taken out of the wait (kubernetes#126027) and keeps the
// higher of prio and the priority it waited with. The clock is read only if
// something waits, or for the join time (see joinTimeLocked).
func (q *Queue[T]) addLocked(item T, hash uint64, prio int) {
	if q.delays.waiting.Len() > 0 {
		now := q.nowLocked()
		q.promoteDueAtLocked(now)
		if p, waited := q.removeWaitingLocked(item, now); waited {
			prio = max(prio, p)
		}
	}
	q.enqueueLocked(item, hash, q.joinTimeLocked(), prio)
}

// enqueueLocked is the one way into the ready levels but Done's: it marks
// item, whose hash is hash, dirty with a pending run at priority prio, and,
// unless it is being processed (Done queues it then), pushes it to the level
// of prio with join time at. An item that is already dirty keeps the higher
// of its two priorities, and one that is queued and rises moves to the end
// of its new level.
//
// A queue that uses no priority takes the first branches only: no pending
// priority is looked up while none is set (pendingN is 0).
func (q *Queue[T]) enqueueLocked(item T, hash uint64, at int64, prio int) {
	st, ref := q.states.FindOrInsert(hash, item, queueDirty)
	if st&queueDirty != 0 {
		if prio != 0 || q.prios.pendingN > 0 {
			q.raiseLocked(item, hash, at, prio, st, ref)
		}
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

// raiseLocked is enqueueLocked for an item that is already dirty, in state
// st at ref: its pending run rises to prio if that is higher.
func (q *Queue[T]) raiseLocked(item T, hash uint64, at int64, prio int, st itemstate.State, ref itemstate.Ref) {
	cur := q.pendingLocked(ref, item)
	if prio <= cur {
		return
	}
	q.setPendingLocked(ref, item, prio)
	if st&queueProcessing != 0 || q.parked.isParked(item) {
		return // Done, or the release from Park, queues it at prio
	}
	// Queued at a lower priority: its entry goes stale, and a new one joins
	// the end of the new level.
	if q.prioDepths != nil {
		q.prioDepths.add(cur, -1)
	}
	q.prios.raise(item)
	q.ready.MarkStale(cur, readyEntry[T]{item: item})
	q.pushReadyLocked(item, hash, at, prio)
}

// pushReadyLocked appends item, whose hash is hash, to the FIFO of priority
// prio with join time at, and wakes one getter.
func (q *Queue[T]) pushReadyLocked(item T, hash uint64, at int64, prio int) {
	e := readyEntry[T]{item: item, at: at, hash: hash}
	if q.prios.stale > 0 {
		e.gen = q.prios.pushed(item)
	}
	if prio == 0 && q.zero != nil {
		q.zero.Push(e) // Push(0, e) without its calls: see zero
	} else {
		q.ready.Push(prio, e)
	}
	if q.metrics != nil {
		q.setDepthLocked()
		if q.prioDepths != nil {
			q.prioDepths.add(prio, 1)
		}
	}
	q.cond.Signal()
}

// joinTimeLocked returns the time at which an item that joins the FIFO now
// joins it: the clock's time with metrics, which measure queue latency from
// it, and with WithMaxReadyWait, which ages ready items from it; 0
// otherwise, so that the clock is not read for nothing.
func (q *Queue[T]) joinTimeLocked() int64 {
	if q.metrics == nil && q.prios.maxReadyWait == 0 {
		return 0
	}
	return q.clockTimeLocked()
}

// clockTimeLocked is nowLocked, kept out of line so that joinTimeLocked,
// called by every Add and Done, inlines.
//
//go:noinline
func (q *Queue[T]) clockTimeLocked() int64 { return q.nowLocked() }

// addWithOptions is AddWithOptions; limiter is nil for a DelayingQueue, and
// budget is the zero gate for it and without WithRetryBudget. A rate-limited
// add asks the budget as AddRateLimited does (see budgetGate.requeueDelay).
// It returns what became of the last item's requeue (for RunWorkers, which
// adds one item).
func (q *Queue[T]) addWithOptions(o AddOptions, limiter RateLimiter[T], budget budgetGate, items []T) (r requeue) {
	immediate := o.After <= 0 && (!o.RateLimited || limiter == nil)
	if immediate && len(items) == 1 {
		_ = q.states.Prefetch(q.states.Hash(items[0])) // as Add does, for the common call
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return requeue{}
	}
	if immediate {
		// Add at a priority, which is no retry.
		for _, item := range items {
			q.addLocked(item, q.states.Hash(item), o.Priority)
		}
		return requeue{}
	}
	now := q.nowLocked()
	q.promoteDueAtLocked(now)
	for _, item := range items {
		if q.queuedOrWaitingLocked(item) {
			// Its pending run absorbs this one, as in controller-runtime's
			// priority queue: the earlier ready time, the higher priority.
			q.raisePendingLocked(item, o, now)
			r = requeue{pending: true}
			continue
		}
		r = requeue{delay: o.After}
		if o.RateLimited && limiter != nil {
			r.delay, r.refused = budget.requeueDelay(limiter, limiter.When(item))
			q.noteRefusalLocked(r.refused)
			if o.After > 0 {
				r.delay = min(r.delay, o.After)
			}
		}
		q.addAfterAtLocked(item, r.delay, now, o.Priority) // counts a retry, as AddAfter
	}
	return r
}

// addAfterLocked is AddAfter on a running queue whose due items have been
// queued at time now (queueDueLocked or promoteDueAtLocked). It leaves the
// timer armed for the earliest ready time, so that its caller need not arm
// it before: one arm per AddAfter instead of two.
func (q *Queue[T]) addAfterLocked(item T, d time.Duration, now int64) {
	q.addAfterAtLocked(item, d, now, 0)
}

// addAfterAtLocked is addAfterLocked at priority prio.
func (q *Queue[T]) addAfterAtLocked(item T, d time.Duration, now int64, prio int) {
	if d <= 0 {
		if p, waited := q.removeWaitingLocked(item, now); waited {
			prio = max(prio, p) // removeWaitingLocked armed the timer
		} else {
			q.delays.arm(now)
		}
		q.enqueueLocked(item, q.states.Hash(item), now, prio)
	} else {
		q.waitLocked(item, int64(addDuration(time.Duration(now), d)), now, prio)
	}
	if q.metrics != nil {
		q.metrics.IncRetries()
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
	hash := q.states.Hash(item)
	if st, _ := q.states.Find(hash, item); st&queueDirty != 0 {
		q.enqueueLocked(item, hash, now, o.Priority)
	}
}

// queuedOrWaitingLocked reports whether item is queued (dirty) or waits for
// its delay.
func (q *Queue[T]) queuedOrWaitingLocked(item T) bool {
	st, _ := q.states.Find(q.states.Hash(item), item)
	return st&queueDirty != 0 || q.delays.waiting.Contains(item)
}

// Len returns the number of queued items that are not being processed: the
// number of items Get can hand out without blocking. Items that wait for a
// delay, and items being processed that will be queued again by Done, are not
// counted. Len is informational: another goroutine may change the queue
// before the caller acts on it.
//
// An item whose delay has passed counts at once, even if the timer that
// moves it to the FIFO has not run yet: with a FakeClock, Len sees an item as
// soon as Step passes its ready time.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.promoteDueLocked()
	return q.readyLenLocked()
}

// readyLenLocked returns the number of items Get can hand out: the entries
// of the levels that are not stale.
func (q *Queue[T]) readyLenLocked() int {
	return q.ready.Len() - q.prios.stale
}

// setDepthLocked reports the depth to the metrics, which must not be nil.
func (q *Queue[T]) setDepthLocked() {
	q.metrics.SetDepth(q.readyLenLocked())
}

// Get blocks until it can hand out an item, and returns it. The caller must
// call Done(item) when it has finished processing it. After ShutDown, Get
// hands out the items still queued, then returns shutdown true (and the zero
// T) at once; the caller should then stop.
//
// Get blocks for as long as the queue is empty and running, even if its
// caller no longer wants an item; [Queue.GetContext] stops waiting when a
// context ends.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	item, _, err := q.get(context.Background())
	return item, err != nil
}

// GetContext is [Queue.Get] with a context: it returns the context's cause
// (context.Cause) if ctx is done before an item can be handed out, without
// taking an item and without shutting the queue down; and it returns
// [ErrQueueShutDown] where Get reports shutdown. If ctx is already done,
// GetContext returns at once, even if items are queued. On error the item is
// the zero T and the caller must not call Done.
//
// client-go has no such method (kubernetes#131185): there, a worker blocked
// in Get can be released only by shutting the whole queue down.
func (q *Queue[T]) GetContext(ctx context.Context) (item T, err error) {
	item, _, err = q.get(ctx)
	return item, err
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

// get is Get and GetContext. For Get, ctx is Background, which is never
// done: the wait then registers nothing on ctx.
func (q *Queue[T]) get(ctx context.Context) (item T, prio int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var stop func() bool // unregisters the context callback, once registered
	for {
		if ctx.Err() != nil {
			if q.readyLenLocked() > 0 {
				// A Signal meant for some getter may have woken this one;
				// pass it on rather than lose it.
				q.cond.Signal()
			}
			if stop != nil {
				stop()
			}
			return item, 0, context.Cause(ctx)
		}
		q.promoteDueLocked()
		if q.readyLenLocked() > 0 || q.shuttingDown {
			break
		}
		if stop == nil && ctx.Done() != nil {
			// The callback takes mu before it broadcasts, so it cannot run
			// between the check of ctx.Err above and Wait below: the wake-up
			// cannot be lost.
			stop = context.AfterFunc(ctx, q.wake)
		}
		q.cond.Wait()
	}
	if stop != nil {
		stop()
	}
	if q.readyLenLocked() == 0 {
		return item, 0, ErrQueueShutDown
	}
	e, prio := q.popReadyLocked()
	// With a backlog, item's state has left the caches: this is Get's one
	// cache miss, under the lock.
	_, ref := q.states.Find(e.hash, e.item)
	q.states.Set(ref, e.item, queueProcessing) // dirty is cleared: a new Add queues it again
	if prio != 0 {
		q.takePendingLocked(ref, e.item) // the run it was pending for is this one
	}
	if q.metrics != nil {
		now := q.nowLocked()
		q.starts[e.item] = now
		q.setDepthLocked()
		if q.prioDepths != nil {
			q.prioDepths.add(prio, -1)
		}
		q.metrics.ObserveLatency(time.Duration(now - e.at))
	}
	return e.item, prio, nil
}

// popReadyLocked is the one place that picks the next ready item: it takes
// that item's current entry out of the levels and returns it with its
// priority. The highest priority goes first, unless WithMaxReadyWait finds
// an item overdue; within a priority, FIFO, or round-robin across keys with
// WithFairness. Stale entries (see priorities) are dropped on the way. An
// item must be ready.
func (q *Queue[T]) popReadyLocked() (e readyEntry[T], prio int) {
	for {
		switch {
		case q.zero != nil && q.ready.OnlyZero():
			e, prio = q.zero.Pop(), 0 // only priority 0 holds entries: Pop without its calls (see zero)
		case q.prios.maxReadyWait > 0:
			e, prio = q.popOverdueLocked()
		default:
			e, prio = q.ready.Pop()
		}
		if q.prios.stale == 0 {
			return e, prio // every entry is current: no lookup
		}
		if q.prios.popped(&e) {
			if q.readyLenLocked() == 0 {
				q.dropStaleLocked()
			}
			return e, prio
		}
	}
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

// dropStaleLocked empties the levels, which hold only stale entries, so
// that the items they refer to are not kept until the next Get.
func (q *Queue[T]) dropStaleLocked() {
	q.ready.Clear(func(e readyEntry[T]) { q.prios.popped(&e) })
}

// wakeGetters wakes every goroutine blocked in Get, so that those whose
// context has ended return.
func (q *Queue[T]) wakeGetters() {
	q.mu.Lock()
	q.cond.Broadcast()
	q.mu.Unlock()
}

// pendingLocked returns the priority of the pending run of item, which is
// dirty and was found at ref.
func (q *Queue[T]) pendingLocked(ref itemstate.Ref, item T) int {
	if q.prios.pendingN == 0 {
		return 0
	}
	switch id := q.states.Aux(ref, item); id {
	case 0:
		return 0
	case overflowID:
		return q.prios.overflow[item]
	default:
		return q.prios.ids[id-1].prio
	}
}

// setPendingLocked sets the priority of the pending run of item, which has
// an entry at ref.
func (q *Queue[T]) setPendingLocked(ref itemstate.Ref, item T, prio int) {
	if q.prios.pendingN > 0 {
		if id := q.states.Aux(ref, item); id != 0 {
			q.prios.release(item, id)
		}
	}
	id := uint8(0)
	if prio != 0 {
		id = q.prios.idFor(prio)
		if id == overflowID {
			q.prios.setOverflow(item, prio)
		}
		q.prios.pendingN++
	}
	q.states.SetAux(ref, item, id)
}

// addPendingLocked is setPendingLocked for an item that is not dirty, whose
// aux byte is therefore 0, and a priority prio that is not 0.
func (q *Queue[T]) addPendingLocked(ref itemstate.Ref, item T, prio int) {
	id := q.prios.idFor(prio)
	if id == overflowID {
		q.prios.setOverflow(item, prio)
	}
	q.prios.pendingN++
	q.states.SetAux(ref, item, id)
}

// takePendingLocked is setPendingLocked(ref, item, 0), for Get: the item
// is handed out for the run that was pending.
func (q *Queue[T]) takePendingLocked(ref itemstate.Ref, item T) {
	id := q.states.Aux(ref, item)
	if id == 0 {
		return
	}
	q.prios.release(item, id)
	q.states.SetAux(ref, item, 0)
}

// Done marks item as processed. If it was added again while it was being
// processed, Done queues it again (even after ShutDown). Done of an item that
// is not being processed (never handed out, or done since Get last handed it
// out) does nothing; client-go would queue a second copy of it if it was
// dirty (kubernetes#141079).
//
// The queue knows items, not runs: Done(item) ends the processing of item,
// whichever Get handed it out. A second Done(item) for one run, made after
// Get has handed item out again, ends that later run's processing: the
// next Get may then hand item to another worker while the later run is still
// in progress. Call Done exactly once for each item Get hands out;
// client-go behaves the same.
func (q *Queue[T]) Done(item T) {
	hash := q.states.Hash(item) // Get has just loaded item's state: no prefetch
	q.mu.Lock()
	defer q.mu.Unlock()
	// Items that became due before this Done are queued before the item it
	// may queue again.
	q.promoteDueLocked()
	st, ref := q.states.Find(hash, item)
	if st&queueProcessing == 0 {
		return
	}
	now := q.joinTimeLocked()
	if q.metrics != nil {
		q.metrics.ObserveWorkDuration(time.Duration(now - q.starts[item]))
		delete(q.starts, item)
	}
	if st&queueDirty != 0 {
		q.states.Set(ref, item, queueDirty)
		if q.parked.isParked(item) {
			return // its release from Park queues it
		}
		q.pushReadyLocked(item, hash, now, q.pendingLocked(ref, item))
		return
	}
	q.states.Remove(ref, item) // gives the memory of a burst back when it empties
	if q.states.Len() == 0 && q.draining {
		q.drained.Broadcast()
	}
}

// ShutDown stops the queue: from now on adds are ignored, Get hands out the
// items still queued and then reports shutdown, and the workers blocked in
// Get wake up. Items whose delay has passed are queued first; items still
// waiting for their delay stay where they are, and
// [DelayingQueue.TakeWaiting] returns them. ShutDown also ends the wait of
// every ShutDownWithDrain in progress. It does not block, and calling it
// again does nothing.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutDownLocked()
	if q.draining {
		q.draining = false
		q.drained.Broadcast()
	}
}

// ShutDownWithDrain shuts the queue down like [Queue.ShutDown], then waits
// until every item that was queued or being processed has been handed out
// and marked Done, including the items that Done queues again. Workers must
// therefore keep calling Get and Done until Get reports shutdown, or
// ShutDownWithDrain blocks forever. A ShutDown call, from another goroutine,
// ends the wait at once.
//
// client-go's ShutDownWithDrain waits only until no item is being processed,
// so it may return while items are still queued (kubernetes#141079).
func (q *Queue[T]) ShutDownWithDrain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutDownLocked()
	q.draining = true
	for q.draining && q.states.Len() > 0 {
		q.drained.Wait()
	}
}

func (q *Queue[T]) shutDownLocked() {
	if q.shuttingDown {
		return
	}
	q.promoteDueLocked()
	q.shuttingDown = true
	q.delays.freeze()
	q.detachParkedLocked()
	q.cond.Broadcast()
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain has been called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// nowLocked returns the clock's time as nanoseconds since the queue's epoch.
// A clock set back before the epoch (a FakeClock can be) reads as the epoch.
func (q *Queue[T]) nowLocked() int64 {
	// Since, not Now().Sub: on the real clock it reads only the monotonic
	// clock, which costs less (BenchmarkDelayingQueueAddAfter).
	return int64(max(q.clock.Since(q.epoch), 0))
}

// processingTimes is the probe that QueueMetrics.TrackProcessing receives.
func (q *Queue[T]) processingTimes() (unfinished, longest time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.nowLocked()
	for _, start := range q.starts {
		d := time.Duration(max(now-start, 0))
		unfinished = addDuration(unfinished, d)
		longest = max(longest, d)
	}
	return unfinished, longest
}

// The options of the queues; WithMetrics is in metrics.go.

// WithName names a queue. The name is attached, as the attribute "queue", to
// what [RunWorkers] logs about the queue's items; the empty name (the
// default) attaches nothing.
func WithName(name string) Option {
	return nameOption(optionName, name)
}

// WithLogger makes [RunWorkers] log the failures of a queue's items (handler
// errors, permanent errors, panics) to l instead of slog.Default(). To
// silence it, pass a logger whose handler discards records. The queue itself
// never logs.
//
// WithLogger panics if l is nil.
func WithLogger(l *slog.Logger) Option {
	mustNotBeNil("WithLogger", "l", l == nil)
	return valueOption(optionLogger, l)
}

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
	// held holds the parked items (park.go) by the time at which their
	// maxWait ends: the timer serves them too.
	held  waitheap.Heap[T]
	clock clock.WithDelayedExecution

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
	if q.delays.waiting.Len() > 0 || q.delays.held.Len() > 0 {
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
	if !q.delays.frozen {
		q.queueDueLocked(now)
		q.delays.arm(now)
	}
}

// queueDueLocked is promoteDueAtLocked without setting the timer, for a
// caller that sets it afterwards (addAfterLocked) before it unlocks the
// queue; the queue must not be shutting down.
func (q *Queue[T]) queueDueLocked(now int64) {
	d := &q.delays
	for {
		// The earlier of the next ready time and the next end of a park
		// goes first; on a tie, the ready time.
		waitDue := d.waiting.Len() > 0 && d.waiting.MinAt() <= now
		if d.held.Len() > 0 && d.held.MinAt() <= now && (!waitDue || d.held.MinAt() < d.waiting.MinAt()) {
			e := d.held.PopMin()
			delete(q.parked.items, e.Item)
			q.releaseLocked(e.Item, e.At)
			continue
		}
		if !waitDue {
			break
		}
		// The item joined the FIFO at its ready time, however late this
		// promotion runs: queue latency counts from there.
		e := d.waiting.PopMin()
		if q.delayObs != nil {
			q.delayObs.ready(e.Item, e.At)
		}
		q.enqueueLocked(e.Item, q.states.Hash(e.Item), e.At, q.prios.unwait(e.Item))
	}
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
	if q.delayObs != nil {
		q.delayObs.waits(item, now)
	}
}

// removeWaitingLocked takes item out of the wait, if it waits, at time now,
// and returns the priority it waited with and whether it waited.
func (q *Queue[T]) removeWaitingLocked(item T, now int64) (int, bool) {
	d := &q.delays
	if d.waiting.Len() > 0 && d.waiting.Remove(item) {
		d.arm(now)
		if q.delayObs != nil {
			q.delayObs.ready(item, now)
		}
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
	if (d.waiting.Len() == 0 && d.held.Len() == 0) || d.frozen {
		d.stop()
		return
	}
	at := d.nextAt()
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

// nextAt returns the earliest time at which a waiting item is due or a
// park ends; something must wait or be parked.
func (d *delays[T]) nextAt() int64 {
	switch {
	case d.held.Len() == 0:
		return d.waiting.MinAt()
	case d.waiting.Len() == 0:
		return d.held.MinAt()
	}
	return min(d.waiting.MinAt(), d.held.MinAt())
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
	if q.delays.waiting.Len() == 0 && q.delays.held.Len() == 0 {
		q.delays.stop()
		return
	}
	q.promoteDueLocked()
}
