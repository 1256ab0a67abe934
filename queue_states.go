//go:build go1.24

package backoff

import (
	"hash/maphash"
	"sync/atomic"
)

// itemStates maps every item a queue knows to its state bits (queueDirty,
// queueProcessing): client-go's dirty and processing sets in one table. An
// item in neither state has no entry.
//
// Why not a Go map: when producers outrun the workers, the table holds the
// whole backlog, far more than the CPU's caches, and every Add (looking up a
// new item) and every Get (updating the item it hands out) misses the cache
// once on it. With a Go map both misses happen while the queue's mutex is
// held, so the queue moves at the speed of one core waiting for memory
// however many cores it has. This table lets Add load the cache line where
// the probe for its item starts before it takes the mutex
// (itemStates.prefetch): the miss then costs a core that holds no lock,
// while another goroutine works under it. Measured with 2 producers and 2
// workers on the 2 cores of the machine of BENCHMARKS.md
// (BenchmarkQueueAddGetDone/mode=2p2w, with -cpuprofile): with a Go map the
// cores were 1.1 busy out of 2, half of the samples on those two misses,
// and an item took about 600 ns; with this table, about 350 ns.
//
// The layout is that of the Backoff's entryTable (backoff_table.go): buckets
// of one control word and seven slots, linear probing over buckets, 7/8 at
// most full. The item's state lives in its control byte, so that Get and
// Done change one word: a full byte is tagFull | state<<5 | the top 5 bits of
// the item's hash. Everything is read and written under the queue's mutex,
// except for the one load in prefetch, and the table is replaced, not grown in
// place, so that a prefetch never reads memory that has been reallocated.
//
// hash/maphash.Comparable, which hashes any comparable value without
// allocating, is new in Go 1.24; queue_states_map.go uses a Go map on older
// toolchains.
type itemStates[T comparable] struct {
	seed maphash.Seed                  // set by init, read without the mutex
	tab  atomic.Pointer[stateTable[T]] // nil while the queue knows no item
	live int                           // entries
	used int                           // slots not empty: entries and deleted slots
}

// stateTable is the storage of an itemStates. Once published, its slice
// header never changes.
type stateTable[T comparable] struct {
	buckets []stateBucket[T] // len is a power of two
	mask    uint64           // len(buckets)-1
}

// stateBucket is one control word and seven slots: one cache line for int
// items. Byte j of ctrl is slot j's: tagEmpty, tagDeleted, or full (see
// itemStates); byte 7 has no slot and is always tagDeleted.
type stateBucket[T comparable] struct {
	ctrl  uint64
	items [bucketSlots]T
}

const (
	// stateShift is where an item's state bits sit in its control byte.
	stateShift = 5
	// stateTagBits keeps, in every byte, what a lookup matches: the full
	// bit and the hash bits, not the state.
	stateTagBits = 0x9f * lsbs
	// slotBytes are the bytes of a control word that have a slot.
	slotBytes = 1<<(8*bucketSlots) - 1
)

// A stateRef is where find found an item: bucket<<3 | slot.
type stateRef int

// stateTag returns the control byte of an item with hash h, without its
// state.
func stateTag(h uint64) uint64 { return tagFull | h>>59 }

// stateOf returns the state bits of slot j, which is full, in ctrl.
func stateOf(ctrl uint64, j int) uint8 { return uint8(ctrl>>(8*j)) >> stateShift & 3 }

// init readies the table; it must run before the queue is shared.
func (s *itemStates[T]) init() { s.seed = maphash.MakeSeed() }

// hash returns item's hash. It needs no lock.
func (s *itemStates[T]) hash(item T) uint64 { return maphash.Comparable(s.seed, item) }

// prefetch loads the control word of the bucket where the probe for hash h
// starts, so that the caller takes its cache miss before it takes the
// queue's mutex rather than under it. It needs no lock.
//
// The load races with the writes made under the mutex, on purpose: the word
// is aligned, the table it belongs to stays allocated while t refers to it,
// and the value only comes back to be thrown away, so the race is harmless;
// norace keeps the race detector from reporting it. prefetch returns the
// value, and is not inlined, only so that the compiler keeps the load.
// Loading atomically instead would need every store to a control word to be
// atomic too, which cost each Add, Get and Done a locked instruction (serial
// Add+Get+Done measured 88 ns against 74).
//
//go:norace
//go:noinline
func (s *itemStates[T]) prefetch(h uint64) uint64 {
	if t := s.tab.Load(); t != nil {
		return t.buckets[h&t.mask].ctrl
	}
	return 0
}

// len returns the number of entries.
func (s *itemStates[T]) len() int { return s.live }

// find returns item's state and where it is, or 0 if item has no entry. h
// is item's hash.
func (s *itemStates[T]) find(h uint64, item T) (uint8, stateRef) {
	t := s.tab.Load()
	if t == nil {
		return 0, -1
	}
	tag := stateTag(h) * lsbs
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		ctrl := b.ctrl
		for m := zeroBytes(ctrl&stateTagBits ^ tag); m != 0; m &= m - 1 {
			if j := slotOf(m); b.items[j] == item {
				return stateOf(ctrl, j), stateRef(int(i)<<3 | j)
			}
		}
		if emptySlots(ctrl) != 0 {
			return 0, -1
		}
	}
}

// set changes the state of the entry that find found at ref to st (not 0).
// item is unused: the map build needs it.
func (s *itemStates[T]) set(ref stateRef, _ T, st uint8) {
	b, j := s.at(ref)
	const stateMask = 3 << stateShift
	b.ctrl = b.ctrl&^(stateMask<<(8*j)) | uint64(st)<<(stateShift+8*j)
}

// remove deletes the entry that find found at ref.
func (s *itemStates[T]) remove(ref stateRef, _ T) {
	b, j := s.at(ref)
	var zero T
	b.items[j] = zero // for the garbage collector
	mark := uint64(tagDeleted)
	if emptySlots(b.ctrl) != 0 {
		// No probe has passed this bucket since the table was built (it
		// has never been full), so the slot may become empty again.
		mark = tagEmpty
		s.used--
	}
	b.ctrl = withSlotByte(b.ctrl, j, mark)
	if s.live--; s.live == 0 {
		s.clear()
	}
}

// at returns the bucket and the slot of ref.
func (s *itemStates[T]) at(ref stateRef) (*stateBucket[T], int) {
	return &s.tab.Load().buckets[ref>>3], int(ref & 7)
}

// clear empties a table that has no entry left: a large one is dropped (the
// memory of a burst goes back), a small one is kept so that a queue that
// keeps few items allocates nothing, and its deleted slots are made empty.
func (s *itemStates[T]) clear() {
	t := s.tab.Load()
	switch {
	case len(t.buckets)*bucketSlots > queueKeepSize:
		s.tab.Store(nil)
	case s.used > 0:
		for i := range t.buckets {
			t.buckets[i].ctrl = newBucketTags
		}
	}
	s.used = 0
}

// insert adds item, which has hash h and no entry, with state st (not 0).
func (s *itemStates[T]) insert(h uint64, item T, st uint8) {
	t := s.tab.Load()
	if t == nil || (s.used+1)*maxLoadDen > len(t.buckets)*bucketSlots*maxLoadNum {
		t = s.rebuild(s.live + 1)
	}
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		ctrl := b.ctrl
		// The first slot that is not full on item's probe sequence: find
		// stopped at this bucket or a later one.
		free := ^ctrl & msbs & slotBytes
		if free == 0 {
			continue
		}
		j := slotOf(free)
		if ctrl>>(8*j)&0xff == tagEmpty {
			s.used++
		}
		b.items[j] = item
		b.ctrl = withSlotByte(ctrl, j, stateTag(h)|uint64(st)<<stateShift)
		s.live++
		return
	}
}

// rebuild publishes a table with room for n entries at most half full,
// holding every entry of the current one, and returns it.
func (s *itemStates[T]) rebuild(n int) *stateTable[T] {
	size := bucketsFor(n)
	nt := &stateTable[T]{buckets: make([]stateBucket[T], size), mask: uint64(size - 1)}
	for i := range nt.buckets {
		nt.buckets[i].ctrl = newBucketTags
	}
	old := s.tab.Load()
	s.tab.Store(nt)
	s.live, s.used = 0, 0
	if old != nil {
		for i := range old.buckets {
			b := &old.buckets[i]
			ctrl := b.ctrl
			for m := ctrl & msbs & slotBytes; m != 0; m &= m - 1 {
				j := slotOf(m)
				s.insert(s.hash(b.items[j]), b.items[j], stateOf(ctrl, j))
			}
		}
	}
	return nt
}
