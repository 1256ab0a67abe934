package backoff

import (
	"math"
	"sync"
)

// failureCounts is the per-item failure memory of the item limiters
// ([ItemExponentialFailureRateLimiter], [ItemFastSlowRateLimiter]).
//
// client-go keeps a map[T]int and touches it three times per When (read,
// read, write), under a deferred unlock. Here the map takes an item to a slot
// of a slab of entries, so that a When for an item already known is one map
// lookup and an increment, and slots are recycled through a free list, so
// that a steady state of failures and Forgets allocates nothing.
//
// One mutex guards everything: sharding the items over several mutexes by
// a hash of the item lost in BenchmarkItemExponentialWhen, since hashing
// costs more than the lock it saves, and any worker may fail any item. The
// workqueue that calls When holds a single lock of its own anyway.
//
// When bounded (WithMaxTrackedItems), the entries also form a recency list,
// newest first, and a new item makes room by dropping the one whose last
// failure is the oldest: O(1), and the item dropped is the one most likely to
// have succeeded without its caller calling Forget, which is what leaks in
// the first place (kubernetes#138743).
//
// Entry 0 of entries is a sentinel, so that slot 0 means "none" in every link
// and the zero value of an entry is unlinked. Slots are int32 to keep entries
// small; that allows 2^31-1 items tracked at once, tens of gigabytes, far
// beyond any workqueue.
type failureCounts[T comparable] struct {
	mu      sync.Mutex
	slots   map[T]int32 // item → its slot in entries
	entries []failureEntry[T]
	free    int32 // first recycled slot, chained through older; 0 if none
	newest  int32 // head of the recency list; 0 if empty or unbounded
	oldest  int32 // tail of the recency list; 0 if empty or unbounded
	limit   int   // most items kept; 0 means no limit
}

// failureEntry is one item's failure count. newer and older link the recency
// list when the store is bounded; older also chains the free list.
type failureEntry[T comparable] struct {
	item         T
	count        int
	newer, older int32
}

// init makes s an empty store that keeps at most maxItems items, or any
// number if maxItems is 0.
func (s *failureCounts[T]) init(maxItems int) {
	s.slots = make(map[T]int32)
	s.entries = make([]failureEntry[T], 1, 8) // slot 0 is the sentinel
	s.limit = maxItems
}

// record counts one more failure of item and returns the count before it: 0
// the first time, or after a forget or an eviction.
func (s *failureCounts[T]) record(item T) int {
	s.mu.Lock()
	n := s.recordLocked(item)
	s.mu.Unlock()
	return n
}

// count returns the failures of item, 0 if it is not tracked.
func (s *failureCounts[T]) count(item T) int {
	s.mu.Lock()
	n := 0
	if i, ok := s.slots[item]; ok {
		n = s.entries[i].count
	}
	s.mu.Unlock()
	return n
}

// forget drops item.
func (s *failureCounts[T]) forget(item T) {
	s.mu.Lock()
	if i, ok := s.slots[item]; ok {
		delete(s.slots, item)
		s.releaseLocked(i)
	}
	s.mu.Unlock()
}

// len returns the number of items tracked, for tests.
func (s *failureCounts[T]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.slots)
}

func (s *failureCounts[T]) recordLocked(item T) int {
	if i, ok := s.slots[item]; ok {
		e := &s.entries[i]
		n := e.count
		if n < math.MaxInt {
			e.count++
		}
		if s.limit > 0 && s.newest != i {
			s.unlinkLocked(i)
			s.pushNewestLocked(i)
		}
		return n
	}
	if s.limit > 0 && len(s.slots) >= s.limit {
		old := s.oldest
		delete(s.slots, s.entries[old].item)
		s.releaseLocked(old)
	}
	i := s.free
	if i != 0 {
		s.free = s.entries[i].older
	} else {
		i = int32(len(s.entries))
		s.entries = append(s.entries, failureEntry[T]{})
	}
	s.entries[i] = failureEntry[T]{item: item, count: 1}
	s.slots[item] = i
	if s.limit > 0 {
		s.pushNewestLocked(i)
	}
	return 0
}

// releaseLocked unlinks slot i, clears it (so that the item it held can be
// collected) and puts it on the free list. The caller has deleted the map
// entry.
func (s *failureCounts[T]) releaseLocked(i int32) {
	if s.limit > 0 {
		s.unlinkLocked(i)
	}
	s.entries[i] = failureEntry[T]{older: s.free}
	s.free = i
}

func (s *failureCounts[T]) unlinkLocked(i int32) {
	e := &s.entries[i]
	if e.newer != 0 {
		s.entries[e.newer].older = e.older
	} else {
		s.newest = e.older
	}
	if e.older != 0 {
		s.entries[e.older].newer = e.newer
	} else {
		s.oldest = e.newer
	}
	e.newer, e.older = 0, 0
}

func (s *failureCounts[T]) pushNewestLocked(i int32) {
	e := &s.entries[i]
	e.newer, e.older = 0, s.newest
	if s.newest != 0 {
		s.entries[s.newest].newer = i
	} else {
		s.oldest = i
	}
	s.newest = i
}
