package backoff

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// parking holds the parked items of a queue (see [DelayingQueue.Park]). Its
// fields but wakeMu and checks are guarded by the queue's mutex.
//
// A parked item is dirty in the queue's states (Park asks for a run) but is
// not in the ready levels: the queue's invariant "dirty, not processing ⇒
// in the levels" reads "dirty, not processing, not parked ⇒ in the levels".
// The states have no bit left for "parked" (two bits per item), so the
// parked items are this map, which the hot paths consult only behind a
// length check: Done, for a dirty item, and raiseLocked.
type parking[T comparable] struct {
	items map[T]parkedItem
	gen   uint64 // the generation of the last Park

	// wakeMu serialises Wake, which owns checks: the parked items it
	// re-checks, copied under the queue's mutex and checked without it.
	wakeMu sync.Mutex
	checks []parkCheck[T]
}

// parkedItem is what the queue keeps of a parked item.
type parkedItem struct {
	ready func() bool
	gen   uint64 // tells this park from a later one of the same item
	// prio is the priority of its pending run, recorded at shutdown, when
	// the item leaves the states (for TakeWaiting).
	prio int
}

// parkCheck is one parked item that Wake re-checks.
type parkCheck[T comparable] struct {
	item  T
	ready func() bool
	gen   uint64
}

// isParked reports whether item is parked.
func (p *parking[T]) isParked(item T) bool {
	if len(p.items) == 0 {
		return false
	}
	_, ok := p.items[item]
	return ok
}

// current reports whether item is still parked by the Park of generation
// gen.
func (p *parking[T]) current(item T, gen uint64) bool {
	e, ok := p.items[item]
	return ok && e.gen == gen
}

// Park adds item, but holds it back: Get does not hand it out until ready
// returns true at a re-check, or until maxWait has passed, whichever comes
// first. A re-check happens once when Park is called (after the item is
// parked, so that a [DelayingQueue.Wake] that ran just before is not
// missed) and at every Wake.
//
// It is for a controller that has just written an object and must not
// reconcile it again before its informer's cache has seen the write
// (KEP-5647): Park(key, func() bool { return cacheHasSeen(rv) }, 5*time.Second)
// from the reconcile, and Wake from the informer's event handlers. Every
// reconcile of the item then sees a cache at least as new as the write,
// without requeueing on a timer.
//
// While item is parked:
//   - Add, AddAfter, AddRateLimited and AddWithOptions of item do not
//     release it: the run they ask for is the run Park asked for, handed
//     out once item is released (at the highest priority asked for).
//   - If item is being processed, Done does not queue it again; its release
//     does.
//   - If item was queued, it leaves the ready items until it is released.
//   - A delayed add of item (AddAfter, Reschedule) keeps waiting on its own
//     and, when due, joins the held run.
//   - Another Park of item replaces ready and maxWait: the last call wins.
//
// ShutDown and ShutDownWithDrain treat parked items as waiting items: they
// are no longer handed out, ShutDownWithDrain does not wait for them, and
// [DelayingQueue.TakeWaiting] returns them (Parked set).
//
// ready is called without the queue's lock held, possibly from several
// goroutines at once (Park's caller, Wake's), and must not block: a read of
// the informer's cache is what it is for. It may call the queue's methods,
// except Wake. maxWait bounds the hold, in case
// the cache never catches up; a maxWait ≤ 0 does not hold the item at all
// (Park is then Add). Parking costs no goroutine: the queue's one clock
// timer also serves the parked items' maxWait.
//
// Park does nothing once the queue is shutting down, and panics if ready is
// nil.
func (q *DelayingQueue[T]) Park(item T, ready func() bool, maxWait time.Duration) {
	mustNotBeNil("Park", "ready", ready == nil)
	q.mu.Lock()
	if q.shuttingDown {
		q.mu.Unlock()
		return
	}
	now := q.nowLocked()
	q.promoteDueAtLocked(now)
	hash := q.states.Hash(item)
	if maxWait <= 0 {
		q.unparkLocked(item, now)
		q.addLocked(item, hash, 0)
		q.mu.Unlock()
		return
	}
	p := &q.parked
	wasParked := p.isParked(item)
	if p.items == nil {
		p.items = make(map[T]parkedItem)
	}
	p.gen++
	gen := p.gen
	p.items[item] = parkedItem{ready: ready, gen: gen}
	q.delays.held.Set(item, int64(addDuration(time.Duration(now), maxWait)))
	if !wasParked {
		q.holdLocked(item, hash)
	}
	q.delays.arm(now)
	q.mu.Unlock()

	if ready() {
		q.mu.Lock()
		if !q.shuttingDown && p.current(item, gen) {
			q.unparkLocked(item, q.nowLocked())
		}
		q.mu.Unlock()
	}
}

// Wake re-checks every parked item: those whose ready function now returns
// true are released, and queued (or, if being processed, queued when Done
// is called). Call it whenever what the ready functions read may have
// moved: from an informer's event handlers, for a controller. The ready
// functions run without the queue's lock held; Wake calls do not overlap.
// Wake does nothing once the queue is shutting down.
func (q *DelayingQueue[T]) Wake() {
	p := &q.parked
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	q.mu.Lock()
	if q.shuttingDown || len(p.items) == 0 {
		q.mu.Unlock()
		return
	}
	checks := p.checks[:0]
	for item, e := range p.items {
		checks = append(checks, parkCheck[T]{item: item, ready: e.ready, gen: e.gen})
	}
	p.checks = checks
	q.mu.Unlock()
	defer clear(checks) // let the items and functions be collected

	n := 0
	for _, c := range checks {
		if c.ready() {
			checks[n] = c
			n++
		}
	}
	if n == 0 {
		return
	}
	// Released in the order they were parked, not the map's: a Wake that
	// releases many items queues them as their Park calls came.
	slices.SortFunc(checks[:n], func(a, b parkCheck[T]) int { return cmp.Compare(a.gen, b.gen) })
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	now := q.nowLocked()
	for _, c := range checks[:n] {
		if p.current(c.item, c.gen) {
			q.unparkLocked(c.item, now)
		}
	}
}

// Parked reports whether item is parked: added with Park and not released
// yet.
func (q *DelayingQueue[T]) Parked(item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.promoteDueLocked()
	return q.parked.isParked(item)
}

// holdLocked marks item, whose hash is hash and which has just been parked
// (it was not before), dirty without queueing it; a queued item leaves the
// ready levels.
func (q *DelayingQueue[T]) holdLocked(item T, hash uint64) {
	st, ref := q.states.FindOrInsert(hash, item, queueDirty)
	switch {
	case st&queueDirty == 0:
		if st != 0 {
			q.states.Set(ref, item, st|queueDirty) // processing: Done holds it
		}
		if q.metrics != nil {
			q.metrics.IncAdds()
		}
	case st&queueProcessing == 0:
		// Queued: its entry goes stale, as a raised item's old entry does
		// (see priorities), and no new one is pushed until the release.
		cur := q.pendingLocked(ref, item)
		q.prios.raise(item)
		q.ready.MarkStale(cur, readyEntry[T]{item: item})
		q.prios.pushed(item) // a new generation: no entry in the levels is current
		if q.metrics != nil {
			q.setDepthLocked()
			if q.prioDepths != nil {
				q.prioDepths.add(cur, -1)
			}
		}
	}
}

// unparkLocked releases item, if it is parked, at time now: its held run is
// queued, unless it is being processed (Done queues it then).
func (q *Queue[T]) unparkLocked(item T, now int64) {
	p := &q.parked
	if !p.isParked(item) {
		return
	}
	delete(p.items, item)
	if q.delays.held.Len() > 0 && q.delays.held.Remove(item) {
		q.delays.arm(now)
	}
	q.releaseLocked(item, now)
}

// releaseLocked queues the held run of item, which has just left the parked
// items, at time now.
func (q *Queue[T]) releaseLocked(item T, now int64) {
	hash := q.states.Hash(item)
	st, ref := q.states.Find(hash, item)
	if st&queueDirty == 0 || st&queueProcessing != 0 {
		return
	}
	at := int64(0)
	if q.metrics != nil || q.prios.maxReadyWait != 0 {
		at = now
	}
	q.pushReadyLocked(item, hash, at, q.pendingLocked(ref, item))
}

// detachParkedLocked takes the held runs of the parked items out of the
// states, keeping their priorities: at shutdown, where they become waiting
// items (ShutDownWithDrain does not wait for them) that stay parked for
// TakeWaiting, and in TakeWaiting, which takes them. A second call changes
// nothing: no parked item is dirty any more.
func (q *Queue[T]) detachParkedLocked() {
	p := &q.parked
	for item, e := range p.items {
		st, ref := q.states.Find(q.states.Hash(item), item)
		if st&queueDirty == 0 {
			continue
		}
		e.prio = q.pendingLocked(ref, item)
		p.items[item] = e
		q.takePendingLocked(ref, item)
		if st&queueProcessing != 0 {
			q.states.Set(ref, item, queueProcessing)
		} else {
			q.states.Remove(ref, item)
		}
	}
}
