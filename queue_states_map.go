//go:build !go1.24

package backoff

// itemStates maps every item a queue knows to its state bits. Before Go 1.24
// there is no allocation-free way to hash an arbitrary comparable value
// (hash/maphash.Comparable), so this build uses a Go map and cannot
// prefetch: every cache miss on it happens under the queue's mutex (see
// queue_states.go).
type itemStates[T comparable] struct {
	m    map[T]uint8
	peak int // the most entries m has held since it was made
}

// A stateRef carries nothing in this build: the map is indexed by item.
type stateRef struct{}

func (s *itemStates[T]) init() { s.m = make(map[T]uint8) }

func (s *itemStates[T]) hash(T) uint64 { return 0 }

func (s *itemStates[T]) prefetch(uint64) uint64 { return 0 }

func (s *itemStates[T]) len() int { return len(s.m) }

func (s *itemStates[T]) find(_ uint64, item T) (uint8, stateRef) {
	return s.m[item], stateRef{}
}

func (s *itemStates[T]) set(_ stateRef, item T, st uint8) { s.m[item] = st }

func (s *itemStates[T]) insert(_ uint64, item T, st uint8) {
	s.m[item] = st
	s.peak = max(s.peak, len(s.m))
}

// remove deletes item's entry. A Go map never gives back the memory of its
// peak size, so a map that once held many items is made afresh when it
// empties; a small one is kept, so that a queue that keeps few items
// allocates nothing.
func (s *itemStates[T]) remove(_ stateRef, item T) {
	delete(s.m, item)
	if len(s.m) == 0 && s.peak > queueKeepSize {
		s.m, s.peak = make(map[T]uint8), 0
	}
}
