package backoff

import (
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

// waitingUsed reports whether some waiting item has a non-zero priority.
func (p *priorities[T]) waitingUsed() bool { return len(p.waiting) > 0 }

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
