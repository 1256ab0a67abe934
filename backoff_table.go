package backoff

import (
	"math/bits"
	"sync/atomic"
)

// entryTable is a shard's index from id to entry: an open-addressing hash
// table with linear probing that readers search without any lock, while the
// shard's lock serialises every change.
//
// Why not a Go map: a Go map cannot be read while another goroutine writes
// it, so every Next would take the shard's lock, and on a multi-core machine
// the lock word then moves between the cores on almost every call. Measured
// on the machine of BENCHMARKS.md, that transfer, not waiting for the lock,
// was half the cost of a parallel Next over 100,000 ids (the next-floor rows
// of BenchmarkFloor in bench/: 99 ns with striped locks against 51 ns
// without). With this table, a Next for an id that already has an entry
// writes nothing but its own entry.
//
// How readers stay safe without a lock:
//   - A slot's entry is stored before the tag that marks the slot full, and
//     a bucket's tags are one word, loaded and stored atomically. A reader
//     that sees a full tag therefore also sees its entry, unless the entry
//     has been removed since, which leaves nil.
//   - Removed slots are marked deleted rather than empty, so that a probe
//     never stops early; they are not reused, and disappear when the table
//     is rebuilt.
//   - The table never grows in place: a rebuild makes a new table and
//     publishes it with one atomic store. A reader still probing the old one
//     finds every entry that was in it; an entry it misses was added
//     concurrently with the search, and the caller's slow path, under the
//     lock, finds it in the new table.
//   - A removed entry is marked dead, under its own lock, before it leaves
//     the table, and whoever finds a dead entry looks again under the shard's
//     lock. That is what makes a lookup in a stale table correct.
type entryTable struct {
	buckets []tableBucket // len is a power of two
	mask    uint64        // len(buckets)-1
	used    int           // slots not empty, deleted ones included; under the shard lock
}

// A tableBucket is one cache line: a word of tags and the entries of seven
// slots. A probe loads the tags, and dereferences only the slots whose tag
// matches 7 bits of the hash, so a lookup almost always touches this line
// and the entry it looks for, nothing else. Measured at 100,000 ids, this
// line is the one cache miss that Next cannot avoid, and the table's size
// decides how often it misses: 16-byte slots of (hash, pointer), at most 3/4
// full, made Next 10% slower than this layout at 7/8.
type tableBucket struct {
	// tags holds one byte per slot, slot j in byte j: tagEmpty, tagDeleted,
	// or tagFull|7 bits of the id's hash. Byte 7 has no slot and is always
	// tagDeleted, which neither matches a hash nor counts as empty.
	tags  atomic.Uint64
	slots [bucketSlots]atomic.Pointer[entry]
}

const (
	bucketSlots = 7
	tagEmpty    = 0x00
	tagDeleted  = 0x01
	tagFull     = 0x80

	// newBucketTags is the tags of an empty bucket: seven empty slots and
	// the byte without a slot.
	newBucketTags = uint64(tagDeleted) << (8 * bucketSlots)

	// A table is rebuilt before more than maxLoadNum/maxLoadDen of its slots
	// are used; a rebuilt table is at most half full.
	maxLoadNum, maxLoadDen = 7, 8

	lsbs = 0x0101010101010101 // the low bit of every byte
	msbs = 0x8080808080808080 // the high bit of every byte
)

// newEntryTable returns an empty table with room for n entries at most half
// full.
func newEntryTable(n int) *entryTable {
	size := bucketsFor(n)
	t := &entryTable{buckets: make([]tableBucket, size), mask: uint64(size - 1)}
	for i := range t.buckets {
		t.buckets[i].tags.Store(newBucketTags)
	}
	return t
}

// bucketsFor returns the number of buckets of a table built for n entries:
// the smallest power of two whose slots hold them at most half full.
func bucketsFor(n int) int {
	size := 1
	for size*bucketSlots < 2*n {
		size <<= 1
	}
	return size
}

// start returns the first bucket to probe for hash h. The shard was chosen by
// the low bits of h, which are the same for every id of the shard, so the
// table starts from the bits above them (maxShards is 256 = 2⁸); the tag
// comes from the top 7 bits.
func (t *entryTable) start(h uint64) uint64 { return (h >> 8) & t.mask }

// tagOf returns the tag of a slot that holds an id with hash h.
func tagOf(h uint64) uint64 { return tagFull | h>>57 }

// zeroBytes returns a mask with the high bit set in each byte of x that may
// be zero: every byte that is zero is set, and the lowest such byte is exact;
// a byte above a zero one may be set too (a borrow).
func zeroBytes(x uint64) uint64 { return (x - lsbs) &^ x & msbs }

// matching returns the bytes of tags that may equal tag (see zeroBytes): a
// false match is ruled out by the caller's comparison of ids.
func matching(tags, tag uint64) uint64 { return zeroBytes(tags ^ tag*lsbs) }

// emptySlots returns the tagEmpty bytes of tags (see zeroBytes); its lowest
// set byte is exactly the lowest empty slot. A bucket with an empty slot
// ends every probe sequence that reaches it.
func emptySlots(tags uint64) uint64 { return zeroBytes(tags) }

// slotOf returns the slot whose tag byte carries the lowest bit set in m.
func slotOf(m uint64) int { return bits.TrailingZeros64(m) / 8 }

// withSlotByte returns tags with slot j's byte replaced by b.
func withSlotByte(tags uint64, j int, b uint64) uint64 { return tags&^(0xff<<(8*j)) | b<<(8*j) }

// find returns the entry of id, whose hash is h, or nil. t may be nil (an
// empty shard). It takes no lock; the entry it returns may be dead.
func (t *entryTable) find(h uint64, id string) *entry {
	if t == nil {
		return nil
	}
	tag := tagOf(h)
	for i := t.start(h); ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		tags := b.tags.Load()
		for m := matching(tags, tag); m != 0; m &= m - 1 {
			// nil if the entry was removed after tags was loaded
			if e := b.slots[slotOf(m)].Load(); e != nil && e.id == id {
				return e
			}
		}
		if emptySlots(tags) != 0 {
			return nil
		}
	}
}

// full reports whether one more entry would load t beyond its limit.
func (t *entryTable) full() bool {
	return t == nil || (t.used+1)*maxLoadDen > len(t.buckets)*bucketSlots*maxLoadNum
}

// insert adds e, whose id has hash h and is not in t, in the first empty
// slot of its probe sequence: a lookup stops at the first bucket with an
// empty slot, so e must not go further. t must not be full. Under the shard
// lock.
func (t *entryTable) insert(h uint64, e *entry) {
	for i := t.start(h); ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		tags := b.tags.Load()
		empty := emptySlots(tags)
		if empty == 0 {
			continue
		}
		j := slotOf(empty)  // the lowest empty slot
		b.slots[j].Store(e) // before its tag: see entryTable
		b.tags.Store(tags | tagOf(h)<<(8*j))
		t.used++
		return
	}
}

// remove marks the slot of e, whose id has hash h, deleted. Under the shard
// lock.
func (t *entryTable) remove(h uint64, e *entry) {
	tag := tagOf(h)
	for i := t.start(h); ; i = (i + 1) & t.mask {
		b := &t.buckets[i]
		tags := b.tags.Load()
		for m := matching(tags, tag); m != 0; m &= m - 1 {
			if j := slotOf(m); b.slots[j].Load() == e {
				b.tags.Store(withSlotByte(tags, j, tagDeleted))
				b.slots[j].Store(nil) // after the tag, for the garbage collector
				return
			}
		}
		if emptySlots(tags) != 0 {
			panic("backoff: internal error: removing an entry that is not in its table")
		}
	}
}

// rebuilt returns a new table holding t's entries (t may be nil), sized for
// n entries; n must be at least their number. hash returns the hash of an
// id. Under the shard lock.
func (t *entryTable) rebuilt(n int, hash func(id string) uint64) *entryTable {
	nt := newEntryTable(n)
	if t == nil {
		return nt
	}
	for i := range t.buckets {
		b := &t.buckets[i]
		for j := range b.slots {
			if e := b.slots[j].Load(); e != nil {
				nt.insert(hash(e.id), e)
			}
		}
	}
	return nt
}
