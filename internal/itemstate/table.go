//go:build go1.24

package itemstate

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/retrykit/backoff/internal/tagword"
)

// Table maps items to their states. Its zero value is not usable: call Init.
//
// Why not a Go map: under a backlog the table outgrows the CPU's caches, and
// the lookup of each Add and Get misses the cache once. Prefetch lets the
// caller take that miss before it takes its lock, where it does not stall
// the other cores (see BenchmarkQueueAddGetDone/mode=2p2w).
//
// Layout (see package tagword): buckets of one control word and seven slots,
// linear probing over buckets, at most 7/8 full. An item's state lives in
// its control byte, so that changing it writes one word: a full byte is
// tagword.Full | state<<stateShift | the top 5 bits of the item's hash. The
// storage is replaced, never grown in place, so that a Prefetch never reads
// memory that has been reallocated.
//
// hash/maphash.Comparable, which hashes any comparable value without
// allocating, is new in Go 1.24; table_map.go uses a Go map on older
// toolchains.
type Table[T comparable] struct {
	seed maphash.Seed             // set by Init, read without the owner's lock
	tab  atomic.Pointer[store[T]] // nil while the table has no entry
	live int                      // entries
	used int                      // slots not empty: entries and deleted slots
	// aux holds each slot's aux byte, indexed by Ref: nil until SetAux
	// stores a non-zero byte in the current storage, so that an owner that
	// never uses it pays no memory for it. The byte of a slot that is not
	// full is 0. Prefetch does not read it: it needs no atomic.
	aux []uint8
}

// store is the storage of a Table. Once published, its slice header never
// changes.
type store[T comparable] struct {
	buckets []bucket[T] // len is a power of two
	mask    uint64      // len(buckets)-1
}

// bucket is one control word and seven slots: one cache line for int items.
type bucket[T comparable] struct {
	ctrl  uint64
	items [tagword.Slots]T
}

const (
	// stateShift is where an item's state sits in its control byte.
	stateShift = 5
	// tagBits keeps, in every byte, what a lookup matches: the full bit and
	// the hash bits, not the state.
	tagBits = 0x9f * tagword.Lsbs
)

// A Ref is where Find found an item: bucket<<3 | slot. It is valid until
// the next Insert or Remove.
type Ref int

// tagOf returns the control byte of an item with hash h, without its state.
// Like stateAt, it is a method only so that it inlines where the table is
// instantiated (see package tagword).
func (*Table[T]) tagOf(h uint64) uint64 { return tagword.Full | h>>59 }

// stateAt returns the state of slot j, which is full, in ctrl.
func (*Table[T]) stateAt(ctrl uint64, j int) State { return uint8(ctrl>>(8*j)) >> stateShift & 3 }

// Init readies the table; it must run before the table is shared.
func (s *Table[T]) Init() { s.seed = maphash.MakeSeed() }

// Hash returns item's hash, which the other methods take. It needs no lock.
func (s *Table[T]) Hash(item T) uint64 { return maphash.Comparable(s.seed, item) }

// Prefetch loads the control word of the bucket where the probe for hash h
// starts, so that the caller takes its cache miss before it takes its lock
// rather than under it. It needs no lock.
//
// The load races with the writes made under the owner's lock, on purpose:
// the word is aligned, the storage it belongs to stays allocated while t
// refers to it, and the value is thrown away; norace keeps the race
// detector from reporting it. It returns the value, and is not inlined, only
// so that the compiler keeps the load. An atomic load would need every store
// to a control word to be atomic too, a locked instruction in every Add, Get
// and Done (see BenchmarkQueueAddGetDone).
//
//go:norace
//go:noinline
func (s *Table[T]) Prefetch(h uint64) uint64 {
	if t := s.tab.Load(); t != nil {
		return t.buckets[h&t.mask].ctrl
	}
	return 0
}

// Len returns the number of entries.
func (s *Table[T]) Len() int { return s.live }

// Find returns item's state and where it is, or 0 if item has no entry. h
// is item's hash.
func (s *Table[T]) Find(h uint64, item T) (State, Ref) {
	t := s.tab.Load()
	if t == nil {
		return 0, -1
	}
	tag := s.tagOf(h) * tagword.Lsbs
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		ctrl := b.ctrl
		for m := tagword.ZeroBytes(ctrl&tagBits ^ tag); m != 0; m &= m - 1 {
			if j := tagword.SlotOf(m); b.items[j] == item {
				return s.stateAt(ctrl, j), Ref(int(i)<<3 | j)
			}
		}
		if tagword.EmptySlots(ctrl) != 0 {
			return 0, -1
		}
	}
}

// Set changes the state of the entry that Find found at ref to st (1 to
// MaxState). item is unused here; the Go-map build needs it.
func (s *Table[T]) Set(ref Ref, _ T, st State) {
	b, j := s.at(ref)
	const stateMask = 3 << stateShift
	b.ctrl = b.ctrl&^(stateMask<<(8*j)) | uint64(st)<<(stateShift+8*j)
}

// Remove deletes the entry that Find found at ref. When the table empties,
// a large storage is dropped and a small one kept (see KeepSize).
func (s *Table[T]) Remove(ref Ref, _ T) {
	b, j := s.at(ref)
	var zero T
	b.items[j] = zero // for the garbage collector
	mark := uint64(tagword.Deleted)
	if tagword.EmptySlots(b.ctrl) != 0 {
		// No probe has passed this bucket since the storage was built (it
		// has never been full), so the slot may become empty again.
		mark = tagword.Empty
		s.used--
	}
	b.ctrl = tagword.WithSlotByte(b.ctrl, j, mark)
	if s.aux != nil {
		s.aux[ref] = 0
	}
	if s.live--; s.live == 0 {
		s.clear()
	}
}

// at returns the bucket and the slot of ref.
func (s *Table[T]) at(ref Ref) (*bucket[T], int) {
	return &s.tab.Load().buckets[ref>>3], int(ref & 7)
}

// clear empties a table that has no entry left: large storage is dropped,
// small storage is kept with its deleted slots made empty.
func (s *Table[T]) clear() {
	t := s.tab.Load()
	switch {
	case len(t.buckets)*tagword.Slots > KeepSize:
		s.tab.Store(nil)
		s.aux = nil
	case s.used > 0:
		for i := range t.buckets {
			t.buckets[i].ctrl = tagword.NewBucket
		}
	}
	s.used = 0
}

// Insert adds item, which has hash h and no entry, with state st (1 to
// MaxState) and aux byte 0, and returns where it is.
func (s *Table[T]) Insert(h uint64, item T, st State) Ref {
	t := s.tab.Load()
	if t == nil || (s.used+1)*tagword.MaxLoadDen > len(t.buckets)*tagword.Slots*tagword.MaxLoadNum {
		t = s.rebuild(s.live + 1)
	}
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		ctrl := b.ctrl
		// The first slot that is not full on item's probe sequence: Find
		// stopped at this bucket or a later one.
		free := ^ctrl & tagword.Msbs & tagword.SlotBytes
		if free == 0 {
			continue
		}
		j := tagword.SlotOf(free)
		s.fill(b, j, h, item, st)
		return Ref(int(i)<<3 | j)
	}
}

// fill puts item, with hash h and state st, in slot j of b, a slot that is
// not full (empty, or deleted).
func (s *Table[T]) fill(b *bucket[T], j int, h uint64, item T, st State) {
	if b.ctrl>>(8*j)&0xff == tagword.Empty {
		s.used++
	}
	b.items[j] = item
	b.ctrl = tagword.WithSlotByte(b.ctrl, j, s.tagOf(h)|uint64(st)<<stateShift)
	s.live++
}

// FindOrInsert is Find, and Insert with state st (1 to MaxState) if item
// has no entry: it returns item's state before the call (0 if it had no
// entry, and now has st) and where it is. One probe instead of two, for an
// owner that adds an item whether or not it knows it (a queue's Add).
func (s *Table[T]) FindOrInsert(h uint64, item T, st State) (State, Ref) {
	t := s.tab.Load()
	if t == nil {
		return 0, s.Insert(h, item, st)
	}
	tag := s.tagOf(h) * tagword.Lsbs
	free := Ref(-1) // the first slot that is not full on the probe: Insert's
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		ctrl := b.ctrl
		for m := tagword.ZeroBytes(ctrl&tagBits ^ tag); m != 0; m &= m - 1 {
			if j := tagword.SlotOf(m); b.items[j] == item {
				return s.stateAt(ctrl, j), Ref(int(i)<<3 | j)
			}
		}
		if free < 0 {
			if f := ^ctrl & tagword.Msbs & tagword.SlotBytes; f != 0 {
				free = Ref(int(i)<<3 | tagword.SlotOf(f))
			}
		}
		if tagword.EmptySlots(ctrl) != 0 {
			break
		}
	}
	if (s.used+1)*tagword.MaxLoadDen > len(t.buckets)*tagword.Slots*tagword.MaxLoadNum {
		return 0, s.Insert(h, item, st) // rebuilds first
	}
	s.fill(&t.buckets[free>>3], int(free&7), h, item, st)
	return 0, free
}

// rebuild publishes storage with room for n entries at most half full,
// holding every entry of the current one, and returns it.
func (s *Table[T]) rebuild(n int) *store[T] {
	size := tagword.BucketsFor(n)
	nt := &store[T]{buckets: make([]bucket[T], size), mask: uint64(size - 1)}
	for i := range nt.buckets {
		nt.buckets[i].ctrl = tagword.NewBucket
	}
	old, oldAux := s.tab.Load(), s.aux
	s.tab.Store(nt)
	s.live, s.used, s.aux = 0, 0, nil
	if oldAux != nil {
		s.aux = make([]uint8, size<<3)
	}
	if old != nil {
		for i := range old.buckets {
			b := &old.buckets[i]
			ctrl := b.ctrl
			for m := tagword.FullSlots(ctrl); m != 0; m &= m - 1 {
				j := tagword.SlotOf(m)
				ref := s.Insert(s.Hash(b.items[j]), b.items[j], s.stateAt(ctrl, j))
				if oldAux != nil {
					s.aux[ref] = oldAux[i<<3|j]
				}
			}
		}
	}
	return nt
}

// Aux returns the aux byte of the entry that Find or Insert returned at
// ref: a byte the owner keeps next to an item's state, 0 until SetAux
// changes it. item is unused here; the Go-map build needs it.
func (s *Table[T]) Aux(ref Ref, _ T) uint8 {
	if s.aux == nil {
		return 0
	}
	return s.aux[ref]
}

// SetAux sets the aux byte of the entry that Find or Insert returned at
// ref. The first non-zero byte allocates one byte per slot of the
// storage; the entry's removal sets its byte back to 0.
func (s *Table[T]) SetAux(ref Ref, _ T, a uint8) {
	if s.aux == nil {
		if a == 0 {
			return
		}
		s.aux = make([]uint8, len(s.tab.Load().buckets)<<3) // a Ref is bucket<<3 | slot
	}
	s.aux[ref] = a
}

// Slots returns the number of slots the table's storage holds: its memory,
// for tests that check that a burst's memory goes back.
func (s *Table[T]) Slots() int {
	if t := s.tab.Load(); t != nil {
		return len(t.buckets) * tagword.Slots
	}
	return 0
}
