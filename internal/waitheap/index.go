//go:build go1.24

package waitheap

import (
	"fmt"
	"hash/maphash"
)

// index maps a waiting item to its position in the Heap. It is an
// open-addressing hash table with linear probing whose slots hold heap
// positions, not items: the item is read from the heap entry, and each entry
// records its slot, so that moving an entry in the heap updates the table in
// O(1) without hashing.
//
// Beside each slot, a tag byte holds 7 bits of the item's hash (and a set
// high bit; 0 means empty). A probe reads only the dense tag array and looks
// at a heap entry only when the tag matches, 1 time in 128 for another item,
// so a lookup of a new item touches one cache line of tags rather than a
// random entry per occupied slot on its path.
//
// Why not a Go map from item to position: this table costs 5 bytes per slot,
// at most 3/4 full, a fraction of a map's slots and control bytes (see
// BenchmarkDelayingQueueBytesPerWaitingItem). hash/maphash.Comparable, which
// hashes any comparable value without allocating, is new in Go 1.24;
// index_map.go uses a Go map on older toolchains.
type index[T comparable] struct {
	seed  maphash.Seed
	tags  []uint8  // 0 is empty; else 0x80 | the top 7 bits of the item's hash
	slots []uint32 // for a used slot, 1 + the position of its heap entry
}

// indexMinSlots is the smallest table: eight slots, 40 bytes.
const indexMinSlots = 8

// hash returns the slot where the probe for item starts, and its tag.
func (x *index[T]) hash(item T) (home int, tag uint8) {
	return x.split(x.hashOf(item))
}

// hashOf returns item's hash. It must not be called before the table
// exists: the seed is made with it (see prepare).
func (x *index[T]) hashOf(item T) uint64 { return maphash.Comparable(x.seed, item) }

// split returns the slot where the probe for an item of hash hv starts, and
// the item's tag.
func (x *index[T]) split(hv uint64) (home int, tag uint8) {
	return int(hv & uint64(len(x.slots)-1)), uint8(hv>>57) | 0x80
}

// prepare makes the table, and with it the seed, if there is none yet.
func (x *index[T]) prepare(h *Heap[T]) {
	if x.slots == nil {
		x.rebuild(h, indexMinSlots)
	}
}

// probe is where a lookup that missed ended: the free slot in which the
// item would be placed, and its tag. It saves push a second probe.
type probe struct {
	slot int // -1 if the table has no slots yet
	tag  uint8
}

// find returns the position of item in h, or -1.
func (x *index[T]) find(h *Heap[T], item T) int {
	p, _ := x.lookup(h, item)
	return p
}

// lookup returns the position of item in h, or -1 and where the probe for
// it ended.
func (x *index[T]) lookup(h *Heap[T], item T) (int, probe) {
	if len(x.slots) == 0 {
		return -1, probe{slot: -1}
	}
	return x.lookupHashed(h, item, x.hashOf(item))
}

// lookupHashed is lookup for an item whose hash (hashOf) is hv. The table
// must exist.
func (x *index[T]) lookupHashed(h *Heap[T], item T, hv uint64) (int, probe) {
	mask := len(x.slots) - 1
	i, tag := x.split(hv)
	for {
		t := x.tags[i]
		if t == 0 {
			return -1, probe{i, tag}
		}
		if t == tag {
			if p := int(x.slots[i]) - 1; h.entry(p).Item == item {
				return p, probe{}
			}
		}
		i = (i + 1) & mask
	}
}

// insert indexes the new entry at position pos, which lookup missed with
// probe pr, growing the table when it would be more than 3/4 full.
func (x *index[T]) insert(h *Heap[T], pos int, pr probe) {
	if h.n*4 > len(x.slots)*3 {
		x.rebuild(h, max(2*len(x.slots), indexMinSlots)) // places pos too
		return
	}
	x.tags[pr.slot] = pr.tag
	x.slots[pr.slot] = uint32(pos + 1)
	h.entry(pos).slot = uint32(pr.slot)
}

// place puts the entry at position pos in the first free slot of its probe
// sequence.
func (x *index[T]) place(h *Heap[T], pos int) {
	mask := len(x.slots) - 1
	e := h.entry(pos)
	i, tag := x.hash(e.Item)
	for x.tags[i] != 0 {
		i = (i + 1) & mask
	}
	x.tags[i] = tag
	x.slots[i] = uint32(pos + 1)
	e.slot = uint32(i)
}

// moved records that the entry now at position pos has moved there.
func (x *index[T]) moved(h *Heap[T], pos int) {
	x.slots[h.entry(pos).slot] = uint32(pos + 1)
}

// remove unindexes the entry at position pos, which is still in place. It
// closes the gap by shifting later entries of the probe run back, so
// lookups never meet tombstones and the table needs no periodic cleaning.
func (x *index[T]) remove(h *Heap[T], pos int) {
	mask := len(x.slots) - 1
	hole := int(h.entry(pos).slot)
	for j := (hole + 1) & mask; x.tags[j] != 0; j = (j + 1) & mask {
		e := h.entry(int(x.slots[j]) - 1)
		k, _ := x.hash(e.Item)
		// The entry at j may fill the hole unless its home lies cyclically
		// in (hole, j]: it would then become unreachable from its home.
		if (hole < j && (k <= hole || k > j)) || (hole > j && k <= hole && k > j) {
			x.tags[hole], x.slots[hole] = x.tags[j], x.slots[j]
			e.slot = uint32(hole)
			hole = j
		}
	}
	x.tags[hole], x.slots[hole] = 0, 0
}

// shrink rebuilds a table that is less than 1/16 full at half its maximum
// load, so that the table follows the heap down after a burst.
func (x *index[T]) shrink(h *Heap[T]) {
	if len(x.slots) > indexMinSlots && h.n*16 < len(x.slots) {
		size := indexMinSlots
		for h.n*8 > size*3 {
			size *= 2
		}
		x.rebuild(h, size)
	}
}

// rebuild replaces the table with one of size slots (a power of two) holding
// every entry of h. It places the entries in heap order, the simplest of the
// orders that measured equally fast (BenchmarkDelayingQueueAddAfter).
func (x *index[T]) rebuild(h *Heap[T], size int) {
	if x.slots == nil {
		x.seed = maphash.MakeSeed()
	}
	x.tags = make([]uint8, size)
	x.slots = make([]uint32, size)
	for pos := 0; pos < h.n; pos++ {
		x.place(h, pos)
	}
}

// check returns an error unless the table has one slot per entry, each
// entry records its slot, each slot has its item's tag, and the table is at
// most 3/4 full.
func (x *index[T]) check(h *Heap[T]) error {
	used := 0
	for s, p := range x.slots {
		if (x.tags[s] == 0) != (p == 0) {
			return fmt.Errorf("index: slot %d has tag %#x and position %d", s, x.tags[s], int(p)-1)
		}
		if p == 0 {
			continue
		}
		used++
		if int(p) > h.n || h.entry(int(p)-1).slot != uint32(s) {
			return fmt.Errorf("index: slot %d points at position %d, which does not record it", s, p-1)
		}
		if _, tag := x.hash(h.entry(int(p) - 1).Item); tag != x.tags[s] {
			return fmt.Errorf("index: slot %d has tag %#x, its item hashes to %#x", s, x.tags[s], tag)
		}
	}
	if used != h.n {
		return fmt.Errorf("index: %d slots used for %d entries", used, h.n)
	}
	if h.n*4 > len(x.slots)*3 {
		return fmt.Errorf("index: %d entries in %d slots", h.n, len(x.slots))
	}
	return nil
}

// size returns the number of slots of the table.
func (x *index[T]) size() int { return len(x.slots) }
