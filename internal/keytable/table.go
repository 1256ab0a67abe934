//go:build go1.24

package keytable

import (
	"hash/maphash"
	"math/bits"
	"unsafe"

	"github.com/retrykit/backoff/internal/tagword"
)

// Hashed reports whether Hash spreads keys (true in this build), so that an
// owner may shard by its low bits.
const Hashed = true

// Table maps keys to values of type V, held inline. Its zero value is not
// usable: call Init.
//
// Layout (see package tagword): groups of one control word and seven
// entries, probed linearly from the group the hash picks, at most 7/8 of the
// slots used (entries and deleted slots). An entry's value is updated
// through the pointer Find returns, so a hit costs one lookup, not a lookup
// and a store as with a Go map.
//
// The number of groups is any positive integer, not a power of two: the
// home group is the high half of hash×groups (a multiply, as cheap as a
// mask), so the table can grow by half rather than double, and sits between
// 4/7 and 7/8 full instead of between 7/16 and 7/8. The bits of a hash are
// used thus: the top ones pick the group, bits 8 to 14 are the tag in the
// control byte, and bits 0 to 7 are left to the owner (its shard), so the
// three do not correlate.
//
// Growth is also when stale entries go: before the table grows it drops
// every entry its Stale function approves, then rebuilds for the entries
// left, which may mean shrinking. That pass is O(slots) and comes once per
// at least 7/8−4/7 ≈ 0.3 × slots insertions, so it costs O(1) per Insert.
// Deleted slots (Sweep's) are tombstones until then; a backward shift is not
// possible with groups filled first-free, and the rebuild clears them.
type Table[K comparable, V any] struct {
	seed   maphash.Seed
	groups []group[K, V]
	stale  Stale[K, V]
	live   int // entries
	used   int // slots not empty: entries and deleted slots
	cursor int // the group Sweep looks at next
	sink   uint64
}

// touch loads one word from every cache line of the size bytes at p and
// returns their xor, so that the loads are not dropped: reading the home
// group's lines all at once makes the miss on the entry's line overlap the
// miss on the control word, instead of following it.
func touch(p unsafe.Pointer, size uintptr) uint64 {
	x := uint64(0)
	for off := uintptr(0); off < size; off += 64 {
		x ^= *(*uint64)(unsafe.Add(p, off))
	}
	return x ^ *(*uint64)(unsafe.Add(p, size-8))
}

type group[K comparable, V any] struct {
	ctrl    uint64
	entries [tagword.Slots]entry[K, V]
}

type entry[K comparable, V any] struct {
	key K
	val V
}

// Seed is what Hash is computed from: tables that share keys' hashes
// (shards of one owner) are built with the same Seed.
type Seed = maphash.Seed

// NewSeed returns a random Seed.
func NewSeed() Seed { return maphash.MakeSeed() }

// Init readies the table, with the seed of its hashes and the function that
// says which entries may go. It must run before the table is shared.
func (t *Table[K, V]) Init(seed Seed, stale Stale[K, V]) {
	t.seed = seed
	t.stale = stale
}

// Hash returns key's hash, which the other methods take. It needs no lock.
func (t *Table[K, V]) Hash(key K) uint64 { return maphash.Comparable(t.seed, key) }

// home returns the group where the probe for hash h starts.
func (t *Table[K, V]) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(t.groups)))
	return int(hi)
}

// tagOf returns the control byte of a key with hash h. A method only so that
// it inlines where the table is instantiated (see package tagword).
func (*Table[K, V]) tagOf(h uint64) uint64 { return tagword.Full | h>>8&0x7f }

// Len returns the number of entries.
func (t *Table[K, V]) Len() int { return t.live }

// Slots returns the number of slots of the table's storage: its memory.
func (t *Table[K, V]) Slots() int { return len(t.groups) * tagword.Slots }

// Find returns key's value, or nil if key has no entry. h is key's hash. The
// pointer is valid until the next Insert or Sweep.
func (t *Table[K, V]) Find(h uint64, key K) *V {
	n := len(t.groups)
	if n == 0 {
		return nil
	}
	tag := t.tagOf(h)
	i := t.home(h)
	t.sink = touch(unsafe.Pointer(&t.groups[i]), unsafe.Sizeof(t.groups[i]))
	for {
		g := &t.groups[i]
		ctrl := g.ctrl
		for m := tagword.Matching(ctrl, tag) & tagword.SlotBytes; m != 0; m &= m - 1 {
			if e := &g.entries[tagword.SlotOf(m)]; e.key == key {
				return &e.val
			}
		}
		if tagword.EmptySlots(ctrl) != 0 {
			return nil
		}
		if i++; i == n {
			i = 0
		}
	}
}

// Insert adds key, which has hash h and no entry, with value v, and returns
// a pointer to its value, valid until the next Insert or Sweep. It may first
// drop stale entries and rebuild the storage (see Table).
func (t *Table[K, V]) Insert(h uint64, key K, v V) *V {
	if (t.used+1)*tagword.MaxLoadDen > t.Slots()*tagword.MaxLoadNum {
		t.dropStale()
		t.rebuild(t.live + 1)
	}
	n := len(t.groups)
	for i := t.home(h); ; {
		g := &t.groups[i]
		ctrl := g.ctrl
		// The first slot that is not full on key's probe sequence: Find
		// stops at this group or a later one.
		if free := ^ctrl & tagword.Msbs & tagword.SlotBytes; free != 0 {
			j := tagword.SlotOf(free)
			if ctrl>>(8*j)&0xff == tagword.Empty {
				t.used++
			}
			g.entries[j] = entry[K, V]{key: key, val: v}
			g.ctrl = tagword.WithSlotByte(ctrl, j, t.tagOf(h))
			t.live++
			return &g.entries[j].val
		}
		if i++; i == n {
			i = 0
		}
	}
}

// Sweep looks at the entries of up to groups groups, from where the last
// Sweep stopped, drops the stale ones and returns how many it dropped.
// Calls that follow one another visit every entry in turn.
func (t *Table[K, V]) Sweep(groups int) int {
	n := len(t.groups)
	dropped := 0
	for range min(groups, n) {
		if t.cursor >= n {
			t.cursor = 0
		}
		dropped += t.sweepGroup(&t.groups[t.cursor])
		t.cursor++
	}
	return dropped
}

// sweepGroup drops the stale entries of g.
func (t *Table[K, V]) sweepGroup(g *group[K, V]) int {
	dropped := 0
	for m := tagword.FullSlots(g.ctrl); m != 0; m &= m - 1 {
		j := tagword.SlotOf(m)
		if !t.stale(g.entries[j].key, &g.entries[j].val) {
			continue
		}
		g.entries[j] = entry[K, V]{} // for the garbage collector
		mark := uint64(tagword.Deleted)
		if tagword.EmptySlots(g.ctrl) != 0 {
			// A group with an empty slot has never been full, so no probe
			// has gone past it: the slot may be empty again.
			mark = tagword.Empty
			t.used--
		}
		g.ctrl = tagword.WithSlotByte(g.ctrl, j, mark)
		t.live--
		dropped++
	}
	return dropped
}

// dropStale drops every stale entry.
func (t *Table[K, V]) dropStale() {
	for i := range t.groups {
		t.sweepGroup(&t.groups[i])
	}
}

// rebuild moves the entries into new storage with room for n entries at
// most 4/7 full (n/4+1 groups), dropping deleted slots.
func (t *Table[K, V]) rebuild(n int) {
	old := t.groups
	t.groups = make([]group[K, V], n/4+1)
	for i := range t.groups {
		t.groups[i].ctrl = tagword.NewBucket
	}
	t.live, t.used, t.cursor = 0, 0, 0
	for i := range old {
		g := &old[i]
		for m := tagword.FullSlots(g.ctrl); m != 0; m &= m - 1 {
			e := &g.entries[tagword.SlotOf(m)]
			t.Insert(t.Hash(e.key), e.key, e.val)
		}
	}
}
