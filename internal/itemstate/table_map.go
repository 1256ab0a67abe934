//go:build !go1.24

package itemstate

// Table maps items to their states. Before Go 1.24 there is no
// allocation-free way to hash an arbitrary comparable value
// (hash/maphash.Comparable), so this build uses a Go map and cannot
// prefetch: every cache miss on it happens under the owner's lock.
type Table[T comparable] struct {
	m    map[T]State
	aux  map[T]uint8 // the entries whose aux byte is not 0
	peak int         // the most entries m has held since it was made
}

// A Ref carries nothing in this build: the map is indexed by item.
type Ref struct{}

// Init readies the table; it must run before the table is shared.
func (s *Table[T]) Init() { s.m = make(map[T]State) }

// Hash returns 0: a map hashes by itself.
func (s *Table[T]) Hash(T) uint64 { return 0 }

// Prefetch does nothing in this build.
func (s *Table[T]) Prefetch(uint64) uint64 { return 0 }

// Len returns the number of entries.
func (s *Table[T]) Len() int { return len(s.m) }

// Find returns item's state, or 0 if item has no entry.
func (s *Table[T]) Find(_ uint64, item T) (State, Ref) {
	return s.m[item], Ref{}
}

// Set changes item's state to st (1 to MaxState).
func (s *Table[T]) Set(_ Ref, item T, st State) { s.m[item] = st }

// Insert adds item, which has no entry, with state st (1 to MaxState) and
// aux byte 0.
func (s *Table[T]) Insert(_ uint64, item T, st State) Ref {
	s.m[item] = st
	s.peak = max(s.peak, len(s.m))
	return Ref{}
}

// FindOrInsert is Find, and Insert with state st if item has no entry; it
// returns item's state before the call.
func (s *Table[T]) FindOrInsert(_ uint64, item T, st State) (State, Ref) {
	if old, ok := s.m[item]; ok {
		return old, Ref{}
	}
	return 0, s.Insert(0, item, st)
}

// Aux returns item's aux byte: 0 until SetAux changes it.
func (s *Table[T]) Aux(_ Ref, item T) uint8 {
	if len(s.aux) == 0 {
		return 0
	}
	return s.aux[item]
}

// SetAux sets item's aux byte; item has an entry.
func (s *Table[T]) SetAux(_ Ref, item T, a uint8) {
	if a == 0 {
		delete(s.aux, item)
		return
	}
	if s.aux == nil {
		s.aux = make(map[T]uint8)
	}
	s.aux[item] = a
}

// Remove deletes item's entry. A Go map never gives back the memory of its
// peak size, so a map that once held many items is made afresh when it
// empties; a small one is kept (see KeepSize).
func (s *Table[T]) Remove(_ Ref, item T) {
	delete(s.m, item)
	if len(s.aux) > 0 {
		delete(s.aux, item)
	}
	if len(s.m) == 0 && s.peak > KeepSize {
		s.m, s.peak = make(map[T]State), 0
	}
}

// Slots returns the most entries the map has held since it was made: the
// size of a Go map cannot be observed, and it keeps the memory of its peak.
func (s *Table[T]) Slots() int { return s.peak }
