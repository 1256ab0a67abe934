//go:build go1.24

package waitheap

import (
	"fmt"
	"hash/maphash"
	"math/bits"
)

// index maps a waiting item to its position in the Heap. It is an
// open-addressing hash table with linear probing whose slots hold heap
// positions, not items: the item is read from the heap entry, and each entry
// records its slot, so that moving an entry in the heap updates the table in
// O(1) without hashing.
//
// A slot is one word: the low bits (as many as the table has slots, shift)
// hold 1 + the position of its entry, 0 for an empty slot, and the high bits
// the top bits of the item's hash, its tag. A probe reads only the words and
// looks at a heap entry only when the tag matches, so a lookup of a new item
// touches one cache line of words rather than a random entry per occupied
// slot on its path, and a push writes one word. The entry keeps its slot
// number and its tag in the same layout, so that moving the entry rewrites
// its word with a store and no load.
//
// Why not a Go map from item to position: this table costs 4 bytes per
// slot, at most 3/4 full, a fraction of a map's slots and control bytes (see
// BenchmarkDelayingQueueBytesPerWaitingItem). hash/maphash.Comparable, which
// hashes any comparable value without allocating, is new in Go 1.24;
// index_map.go uses a Go map on older toolchains.
type index[T comparable] struct {
	seed  maphash.Seed
	words []uint32 // 0 is empty; else tag | 1 + the position of its entry
	mask  uint32   // len(words) - 1: the position bits of a word
	shift uint     // log2(len(words))

	touched uint32 // what touch loaded, kept so that its loads are not dropped
}

// indexMinSlots is the smallest table: eight slots, 32 bytes.
const indexMinSlots = 8

// hashOf returns item's hash. It must not be called before the table
// exists: the seed is made with it (see prepare).
func (x *index[T]) hashOf(item T) uint64 { return maphash.Comparable(x.seed, item) }

// split returns the slot where the probe for an item of hash hv starts, and
// the item's tag: its hash's top 32-shift bits, in the high bits of a word.
func (x *index[T]) split(hv uint64) (home uint32, tag uint32) {
	return uint32(hv) & x.mask, uint32(hv>>(32+x.shift)) << x.shift
}

// prepare makes the table, and with it the seed, if there is none yet.
func (x *index[T]) prepare(h *Heap[T]) {
	if x.words == nil {
		x.rebuild(h, indexMinSlots)
	}
}

// probe is where a lookup that missed ended: the free slot in which the
// item would be placed, and its tag. It saves push a second probe.
type probe struct {
	slot uint32
	tag  uint32
	ok   bool // false if the table has no slots yet
}

// find returns the position of item in h, or -1.
func (x *index[T]) find(h *Heap[T], item T) int {
	p, _ := x.lookup(h, item)
	return p
}

// lookup returns the position of item in h, or -1 and where the probe for
// it ended.
func (x *index[T]) lookup(h *Heap[T], item T) (int, probe) {
	if len(x.words) == 0 {
		return -1, probe{}
	}
	return x.lookupHashed(h, item, x.hashOf(item))
}

// lookupHashed is lookup for an item whose hash (hashOf) is hv. The table
// must exist.
func (x *index[T]) lookupHashed(h *Heap[T], item T, hv uint64) (int, probe) {
	mask := x.mask
	i, tag := x.split(hv)
	for {
		w := x.words[i]
		if w == 0 {
			return -1, probe{i, tag, true}
		}
		if w&^mask == tag {
			if p := int(w&mask) - 1; h.entry(p).Item == item {
				return p, probe{}
			}
		}
		i = (i + 1) & mask
	}
}

// touch loads the word where the probe of each hash of hvs starts, all
// before the first probe, so that their cache misses overlap instead of
// coming one after another (BenchmarkAddAfter in bench/). A plain load is
// what Go offers; the sum is kept so that the loads are not dropped.
func (x *index[T]) touch(hvs []uint64) {
	var sum uint32
	for _, hv := range hvs {
		sum += x.words[uint32(hv)&x.mask]
	}
	x.touched = sum
}

// insert indexes the new entry at position pos, which lookup missed with
// probe pr, growing the table when it would be more than 3/4 full.
func (x *index[T]) insert(h *Heap[T], pos int, pr probe) {
	if h.n*4 > len(x.words)*3 {
		x.rebuild(h, x.grown()) // places pos too
		return
	}
	x.words[pr.slot] = pr.tag | uint32(pos+1)
	h.entry(pos).slot = pr.tag | pr.slot
}

// indexQuadrupleBelow: a table of fewer slots grows fourfold, a larger one
// twofold. A queue that fills from empty rehashes every entry at each
// growth; growing fourfold while the table is small (64 KiB at most) halves
// those rehashes where they are a large part of an AddAfter's cost (see
// BenchmarkAddAfterSmall in bench/), for at most 48 KiB of slots more, and
// leaves large tables, where memory per item counts, at twofold.
const indexQuadrupleBelow = 1 << 12

// grown returns the size of the table after the next growth.
func (x *index[T]) grown() int {
	if len(x.words) < indexQuadrupleBelow {
		return max(4*len(x.words), indexMinSlots)
	}
	return 2 * len(x.words)
}

// place puts the entry at position pos, whose item's hash is hv, in the
// first free slot of its probe sequence.
func (x *index[T]) place(h *Heap[T], pos int, hv uint64) {
	mask := x.mask
	i, tag := x.split(hv)
	for x.words[i] != 0 {
		i = (i + 1) & mask
	}
	x.words[i] = tag | uint32(pos+1)
	h.entry(pos).slot = tag | i
}

// moved records that the entry now at position pos has moved there.
func (x *index[T]) moved(h *Heap[T], pos int) {
	s := h.entry(pos).slot
	x.words[s&x.mask] = s&^x.mask | uint32(pos+1)
}

// remove unindexes the entry at position pos, which is still in place. It
// closes the gap by shifting later entries of the probe run back, so
// lookups never meet tombstones and the table needs no periodic cleaning.
func (x *index[T]) remove(h *Heap[T], pos int) {
	mask := x.mask
	hole := h.entry(pos).slot & mask
	for j := (hole + 1) & mask; x.words[j] != 0; j = (j + 1) & mask {
		e := h.entry(int(x.words[j]&mask) - 1)
		k, _ := x.split(x.hashOf(e.Item))
		// The entry at j may fill the hole unless its home lies cyclically
		// in (hole, j]: it would then become unreachable from its home.
		if (hole < j && (k <= hole || k > j)) || (hole > j && k <= hole && k > j) {
			x.words[hole] = x.words[j]
			e.slot = e.slot&^mask | hole
			hole = j
		}
	}
	x.words[hole] = 0
}

// shrink rebuilds a table that is less than 1/16 full at half its maximum
// load, so that the table follows the heap down after a burst.
func (x *index[T]) shrink(h *Heap[T]) {
	if len(x.words) > indexMinSlots && h.n*16 < len(x.words) {
		size := indexMinSlots
		for h.n*8 > size*3 {
			size *= 2
		}
		x.rebuild(h, size)
	}
}

// rebuildBatch is how many entries rebuild hashes before it places them.
const rebuildBatch = 32

// rebuild replaces the table with one of size slots (a power of two) holding
// every entry of h. It places the entries in heap order, hashing a batch of
// them before placing it, so that the processor overlaps the batch's cache
// misses in the new table (BenchmarkAddAfter in bench/).
func (x *index[T]) rebuild(h *Heap[T], size int) {
	if x.words == nil {
		x.seed = maphash.MakeSeed()
	}
	x.words = make([]uint32, size)
	x.mask = uint32(size - 1)
	x.shift = uint(bits.TrailingZeros(uint(size)))
	var hv [rebuildBatch]uint64
	for base := 0; base < h.n; base += rebuildBatch {
		n := min(rebuildBatch, h.n-base)
		for k := range n {
			hv[k] = x.hashOf(h.entry(base + k).Item)
		}
		x.touch(hv[:n])
		for k := range n {
			x.place(h, base+k, hv[k])
		}
	}
}

// check returns an error unless the table has one slot per entry, each
// entry records its slot and tag, each slot has its item's tag, and the
// table is at most 3/4 full.
func (x *index[T]) check(h *Heap[T]) error {
	used := 0
	for s, w := range x.words {
		if w == 0 {
			continue
		}
		used++
		p := int(w & x.mask)
		if p == 0 || p > h.n || h.entry(p-1).slot != w&^x.mask|uint32(s) {
			return fmt.Errorf("index: slot %d points at position %d, which does not record it", s, p-1)
		}
		if _, tag := x.split(x.hashOf(h.entry(p - 1).Item)); tag != w&^x.mask {
			return fmt.Errorf("index: slot %d has tag %#x, its item hashes to %#x", s, w&^x.mask, tag)
		}
	}
	if used != h.n {
		return fmt.Errorf("index: %d slots used for %d entries", used, h.n)
	}
	if h.n*4 > len(x.words)*3 {
		return fmt.Errorf("index: %d entries in %d slots", h.n, len(x.words))
	}
	return nil
}

// size returns the number of slots of the table.
func (x *index[T]) size() int { return len(x.words) }
