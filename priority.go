package backoff

import (
	"context"
	"fmt"
	"github.com/retrykit/backoff/internal/itemstate"
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
	return valueOption(optionFairness, key)
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
	return durationOption(optionMaxReadyWait, d)
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
	q.addWithOptions(o, nil, budgetGate{}, items)
}

// addWithOptions is AddWithOptions; limiter is nil for a DelayingQueue, and
// budget is the zero gate for it and without WithRetryBudget. A rate-limited
// add asks the budget as AddRateLimited does (see budgetGate.requeueDelay).
func (q *Queue[T]) addWithOptions(o AddOptions, limiter RateLimiter[T], budget budgetGate, items []T) {
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
			d = budget.requeueDelay(limiter, limiter.When(item))
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

// priorities holds what a queue knows about priorities beyond its levels.
// A queue whose items all have priority 0 keeps it empty, and then pays one
// or two counter checks per call.
//
// The priority of a dirty item's pending run lives next to its state: its
// aux byte in the states is the id of that priority (0 for priority 0), so
// that a non-zero priority costs no map operation (see
// BenchmarkQueueAddGetDonePriorities). The ids intern the priorities in use;
// a queue with more distinct priorities pending at once than there are ids
// keeps the rest in a map.
//
// An item whose priority rises while it is queued is pushed again at its new
// level, and its old entry stays where it is, stale: Get skips it. The items
// with stale entries are in raised, whose generation numbers tell an item's
// current entry from its stale ones.
type priorities[T comparable] struct {
	ids      []prioID  // ids[i] is the priority of aux byte i+1
	pendingN int       // dirty items whose pending priority is not 0
	overflow map[T]int // pending priorities of the items whose aux byte is overflowID

	raised  map[T]raisedItem // the items with stale entries
	lastGen uint32           // the generation of the last entry pushed for a raised item
	stale   int              // stale entries in the levels

	// waiting holds the non-zero priorities of the items that wait for
	// their ready time.
	waiting map[T]int

	maxReadyWait int64 // nanoseconds; 0 means strict priority
}

// prioID is one interned priority: refs dirty items have it pending. An id
// whose refs are 0 keeps its priority until another priority needs the id.
type prioID struct {
	prio int
	refs int
}

// maxPrioIDs is the number of aux byte values that name an interned
// priority; overflowID says "see overflow".
const (
	maxPrioIDs       = 254
	overflowID uint8 = 255
)

// raisedItem is what priorities knows of an item with stale entries.
type raisedItem struct {
	gen   uint32 // the generation of its current entry
	stale int    // its stale entries
}

// used reports whether some dirty item has a non-zero pending priority or
// some entry is stale: then an Add at priority 0 cannot take the fast path.
func (p *priorities[T]) used() bool { return p.pendingN > 0 || p.stale > 0 }

// waitingUsed reports whether some waiting item has a non-zero priority.
func (p *priorities[T]) waitingUsed() bool { return len(p.waiting) > 0 }

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

// release gives back the id of the pending priority of item, which is not
// 0.
func (p *priorities[T]) release(item T, id uint8) {
	if id == overflowID {
		delete(p.overflow, item)
	} else {
		p.ids[id-1].refs--
	}
	p.pendingN--
}

// setOverflow records prio as the pending priority of item, whose aux byte
// is overflowID.
func (p *priorities[T]) setOverflow(item T, prio int) {
	if p.overflow == nil {
		p.overflow = make(map[T]int)
	}
	p.overflow[item] = prio
}

// idFor returns the id of prio, which is not 0, counting one more
// reference to it, or overflowID if every id is taken by another priority.
// Priorities are few: a linear scan.
func (p *priorities[T]) idFor(prio int) uint8 {
	unused := -1
	for i := range p.ids {
		if p.ids[i].prio == prio {
			p.ids[i].refs++
			return uint8(i + 1)
		}
		if unused < 0 && p.ids[i].refs == 0 {
			unused = i
		}
	}
	if unused < 0 {
		if len(p.ids) == maxPrioIDs {
			return overflowID
		}
		unused = len(p.ids)
		p.ids = append(p.ids, prioID{})
	}
	p.ids[unused] = prioID{prio: prio, refs: 1}
	return uint8(unused + 1)
}

// raise records that item's current entry goes stale: a new one is about
// to be pushed.
func (p *priorities[T]) raise(item T) {
	if p.raised == nil {
		p.raised = make(map[T]raisedItem)
	}
	m := p.raised[item]
	m.stale++
	p.raised[item] = m
	p.stale++
}

// pushed returns the generation of an entry of item about to be pushed: 0
// unless item has stale entries, and else a generation no entry in the
// levels has.
func (p *priorities[T]) pushed(item T) uint32 {
	if len(p.raised) == 0 {
		return 0
	}
	m, ok := p.raised[item]
	if !ok {
		return 0
	}
	if p.lastGen++; p.lastGen == 0 {
		p.lastGen = 1 // 0 is the generation of the entries of other items
	}
	m.gen = p.lastGen
	p.raised[item] = m
	return m.gen
}

// isCurrent reports whether e is its item's current entry.
func (p *priorities[T]) isCurrent(e readyEntry[T]) bool {
	if len(p.raised) == 0 {
		return true
	}
	m, ok := p.raised[e.item]
	return !ok || e.gen == m.gen
}

// popped records that e was taken out of the levels, and reports whether it
// is its item's current entry.
func (p *priorities[T]) popped(e *readyEntry[T]) bool {
	if len(p.raised) == 0 {
		return true
	}
	m, ok := p.raised[e.item]
	if !ok || e.gen == m.gen {
		return true
	}
	p.stale--
	if m.stale--; m.stale == 0 {
		delete(p.raised, e.item)
	} else {
		p.raised[e.item] = m
	}
	return false
}

// wait records that item waits with priority prio, or its current waiting
// priority if it already waits (waits) and that is higher.
func (p *priorities[T]) wait(item T, prio int, waits bool) {
	if waits {
		prio = max(prio, p.waiting[item])
	}
	if prio == 0 {
		delete(p.waiting, item)
		return
	}
	if p.waiting == nil {
		p.waiting = make(map[T]int)
	}
	p.waiting[item] = prio
}

// unwait forgets item's waiting priority, which it returns: the item no
// longer waits.
func (p *priorities[T]) unwait(item T) int {
	if len(p.waiting) == 0 {
		return 0
	}
	prio, ok := p.waiting[item]
	if ok {
		delete(p.waiting, item)
	}
	return prio
}
