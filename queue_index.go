//go:build go1.24

package backoff

import "hash/maphash"

// waitIndex maps a waiting item to its position in the waitHeap. It is an
// open-addressing hash table with linear probing whose slots hold heap
// positions, not items: the item is read from the heap entry, and each entry
// records its slot, so that moving an entry in the heap updates the table in
// O(1) without hashing.
//
// That layout is what keeps a waiting int item at about 36 bytes: a Go map
// from item to position costs 16-byte slots plus control bytes, about 38
// bytes per item at a million items on its own, while this table costs 4
// bytes per slot, at most 3/4 full. hash/maphash.Comparable, which hashes
// any comparable value without allocating, is new in Go 1.24;
// queue_index_map.go uses a Go map on older toolchains.
type waitIndex[T comparable] struct {
	seed  maphash.Seed
	slots []uint32 // 0 is empty; p > 0 is the heap entry at position p-1
}

// waitIndexMinSlots is the smallest table: eight slots, 32 bytes.
const waitIndexMinSlots = 8

// home returns the slot where the probe for item starts.
func (x *waitIndex[T]) home(item T) int {
	return int(maphash.Comparable(x.seed, item) & uint64(len(x.slots)-1))
}

// find returns the position of item in es, or -1.
func (x *waitIndex[T]) find(es []waitEntry[T], item T) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := len(x.slots) - 1
	for i := x.home(item); ; i = (i + 1) & mask {
		p := x.slots[i]
		if p == 0 {
			return -1
		}
		if es[p-1].item == item {
			return int(p - 1)
		}
	}
}

// insert indexes the new entry es[pos], growing the table when it would be
// more than 3/4 full.
func (x *waitIndex[T]) insert(es []waitEntry[T], pos int) {
	if len(es)*4 > len(x.slots)*3 {
		x.rebuild(es, max(2*len(x.slots), waitIndexMinSlots))
		return
	}
	x.place(es, pos)
}

// place puts es[pos] in the first free slot of its probe sequence.
func (x *waitIndex[T]) place(es []waitEntry[T], pos int) {
	mask := len(x.slots) - 1
	i := x.home(es[pos].item)
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = uint32(pos + 1)
	es[pos].slot = uint32(i)
}

// moved records that the entry now at es[pos] has moved there.
func (x *waitIndex[T]) moved(es []waitEntry[T], pos int) {
	x.slots[es[pos].slot] = uint32(pos + 1)
}

// remove unindexes es[pos], which is still in place. It closes the gap by
// shifting later entries of the probe run back, so lookups never meet
// tombstones and the table needs no periodic cleaning.
func (x *waitIndex[T]) remove(es []waitEntry[T], pos int) {
	mask := len(x.slots) - 1
	hole := int(es[pos].slot)
	for j := (hole + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		p := x.slots[j]
		k := x.home(es[p-1].item)
		// The entry at j may fill the hole unless its home lies cyclically
		// in (hole, j]: it would then become unreachable from its home.
		if (hole < j && (k <= hole || k > j)) || (hole > j && k <= hole && k > j) {
			x.slots[hole] = p
			es[p-1].slot = uint32(hole)
			hole = j
		}
	}
	x.slots[hole] = 0
}

// shrink rebuilds a table that is less than 1/16 full at half its maximum
// load, so that the table follows the heap down after a burst.
func (x *waitIndex[T]) shrink(es []waitEntry[T]) {
	if len(x.slots) > waitIndexMinSlots && len(es)*16 < len(x.slots) {
		size := waitIndexMinSlots
		for len(es)*8 > size*3 {
			size *= 2
		}
		x.rebuild(es, size)
	}
}

// rebuild replaces the table with one of size slots (a power of two) holding
// every entry of es.
func (x *waitIndex[T]) rebuild(es []waitEntry[T], size int) {
	if x.slots == nil {
		x.seed = maphash.MakeSeed()
	}
	x.slots = make([]uint32, size)
	for pos := range es {
		x.place(es, pos)
	}
}
