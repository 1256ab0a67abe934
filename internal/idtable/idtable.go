// Package idtable is the index of a sharded store from string id to entry:
// an open-addressing hash table that readers search without any lock, while
// one lock of the owner's serialises every change.
//
// How readers stay safe without a lock:
//   - A slot's entry is stored before the tag that marks the slot full, and
//     a bucket's tags are one word, loaded and stored atomically. A reader
//     that sees a full tag therefore also sees its entry, unless the entry
//     has been removed since, which leaves nil.
//   - Removed slots are marked deleted rather than empty, so that a probe
//     never stops early; they are not reused, and disappear when the table
//     is rebuilt.
//   - The table never grows in place: a rebuild makes a new table, which
//     the owner publishes with one atomic store. A reader still probing the
//     old one finds every entry that was in it; an entry it misses was added
//     concurrently with the search, and the owner's slow path, under its
//     lock, finds it in the new table.
//   - It is the owner's part to make a lookup in a stale table correct: the
//     Backoff marks a removed entry dead, under the entry's own lock, before
//     it leaves the table, and whoever finds a dead entry looks again under
//     the shard's lock.
package idtable

import (
	"sync/atomic"

	"github.com/retrykit/backoff/internal/tagword"
)

// Entry is what the table indexes: a pointer to a struct with an id that
// never changes.
type Entry[E any] interface {
	*E
	// TableID returns the entry's id. It must not change while the entry is
	// in a table.
	TableID() string
}

// Table is the index from id to entry. Why not a Go map: a Go map cannot be
// read while another goroutine writes it, so every lookup would take the
// owner's lock, and on a multi-core machine the lock word then moves between
// the cores on almost every call (see the next-floor rows of BenchmarkFloor
// in bench/).
//
// A nil *Table is an empty table that Find and Full accept.
type Table[E any, P Entry[E]] struct {
	buckets []bucket[E] // len is a power of two
	mask    uint64      // len(buckets)-1
	used    int         // slots not empty, deleted ones included; under the owner's lock
}

// A bucket is one cache line: a word of tags (see package tagword) and the
// entries of seven slots. A probe loads the tags and dereferences only the
// slots whose tag matches 7 bits of the hash, so a lookup almost always
// touches this line and the entry it looks for, nothing else; 7/8 full
// buckets keep the table small, which decides how often that line misses
// the cache (BenchmarkBackoffNext).
type bucket[E any] struct {
	tags  atomic.Uint64
	slots [tagword.Slots]atomic.Pointer[E]
}

// New returns an empty table with room for n entries at most half full.
func New[E any, P Entry[E]](n int) *Table[E, P] {
	size := tagword.BucketsFor(n)
	t := &Table[E, P]{buckets: make([]bucket[E], size), mask: uint64(size - 1)}
	for i := range t.buckets {
		t.buckets[i].tags.Store(tagword.NewBucket)
	}
	return t
}

// start returns the first bucket to probe for hash h. The owner picks a
// shard by the low 8 bits of h, which are the same for every id of a shard
// (at most 256 shards), so the table starts from the bits above them; the tag
// comes from the top 7 bits.
func (t *Table[E, P]) start(h uint64) uint64 { return (h >> 8) & t.mask }

// tagOf returns the tag of a slot that holds an id with hash h. It is a
// method only so that it inlines where the table is instantiated (see
// package tagword).
func (*Table[E, P]) tagOf(h uint64) uint64 { return tagword.Full | h>>57 }

// Find returns the entry of id, whose hash is h, or nil. t may be nil. It
// takes no lock; the entry it returns may have been removed meanwhile.
func (t *Table[E, P]) Find(h uint64, id string) *E {
	if t == nil {
		return nil
	}
	tag := t.tagOf(h)
	for i := t.start(h); ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		tags := b.tags.Load()
		for m := tagword.Matching(tags, tag); m != 0; m &= m - 1 {
			// nil if the entry was removed after tags was loaded
			if e := b.slots[tagword.SlotOf(m)].Load(); e != nil && P(e).TableID() == id {
				return e
			}
		}
		if tagword.EmptySlots(tags) != 0 {
			return nil
		}
	}
}

// Full reports whether one more entry would load t beyond its limit: the
// owner must then insert into Rebuilt instead. A nil table is full.
func (t *Table[E, P]) Full() bool {
	return t == nil || (t.used+1)*tagword.MaxLoadDen > len(t.buckets)*tagword.Slots*tagword.MaxLoadNum
}

// Insert adds e, whose id has hash h and is not in t, in the first empty
// slot of its probe sequence: a lookup stops at the first bucket with an
// empty slot, so e must not go further. t must not be full. Under the
// owner's lock; e's fields must be final, as readers may find it at once.
func (t *Table[E, P]) Insert(h uint64, e *E) {
	for i := t.start(h); ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		tags := b.tags.Load()
		empty := tagword.EmptySlots(tags)
		if empty == 0 {
			continue
		}
		j := tagword.SlotOf(empty) // the lowest empty slot
		b.slots[j].Store(e)        // before its tag: see the package doc
		b.tags.Store(tags | t.tagOf(h)<<(8*j))
		t.used++
		return
	}
}

// Remove marks the slot of e, whose id has hash h, deleted. e must be in t.
// Under the owner's lock.
func (t *Table[E, P]) Remove(h uint64, e *E) {
	tag := t.tagOf(h)
	for i := t.start(h); ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		tags := b.tags.Load()
		for m := tagword.Matching(tags, tag); m != 0; m &= m - 1 {
			if j := tagword.SlotOf(m); b.slots[j].Load() == e {
				b.tags.Store(tagword.WithSlotByte(tags, j, tagword.Deleted))
				b.slots[j].Store(nil) // after the tag, for the garbage collector
				return
			}
		}
		if tagword.EmptySlots(tags) != 0 {
			panic("backoff: internal error: removing an entry that is not in its table")
		}
	}
}

// Rebuilt returns a new table holding t's entries (t may be nil), sized for
// n entries; n must be at least their number. hash returns the hash of an
// id. Under the owner's lock; the owner publishes the new table.
func (t *Table[E, P]) Rebuilt(n int, hash func(id string) uint64) *Table[E, P] {
	nt := New[E, P](n)
	if t == nil {
		return nt
	}
	for i := range t.buckets {
		b := &t.buckets[i]
		for j := range b.slots {
			if e := b.slots[j].Load(); e != nil {
				nt.Insert(hash(P(e).TableID()), e)
			}
		}
	}
	return nt
}

// Len returns the number of entries, for tests: O(size).
func (t *Table[E, P]) Len() int {
	n := 0
	if t != nil {
		for i := range t.buckets {
			for j := range t.buckets[i].slots {
				if t.buckets[i].slots[j].Load() != nil {
					n++
				}
			}
		}
	}
	return n
}

// Slots returns the number of slots of t, and how many of them are not
// empty (entries and deleted slots), for tests.
func (t *Table[E, P]) Slots() (slots, used int) {
	if t == nil {
		return 0, 0
	}
	return len(t.buckets) * tagword.Slots, t.used
}
