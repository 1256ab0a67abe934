//go:build go1.24

package keytable

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Hashed reports whether Hash spreads keys (true in this build), so that an
// owner may shard by its low bits.
const Hashed = true

// MaxLen is the most entries a Table holds: an index slot numbers its entry
// in 24 bits (see Table). Insert beyond it panics, so an owner stops adding
// keys at MaxLen as it would at a bound of its own.
const MaxLen = numMask - 1

const (
	// numBits is the width of an entry's number in an index slot; the 8
	// bits above it are the entry's tag.
	numBits = 24
	numMask = 1<<numBits - 1
	// tombstone marks an index slot whose entry was removed while probes
	// may go past it: tag 0 and a number no entry has (entries are numbered
	// 1 to MaxLen in the index).
	tombstone = numMask
	// chunkBits: entries are stored in chunks of 1024, so that adding one
	// never copies the others (only the first chunk grows, by doubling, so
	// that a small table stays small) and the room allocated but not used
	// is less than one chunk.
	chunkBits = 10
	chunkLen  = 1 << chunkBits
	// firstChunkLen is the room of a new table's first chunk.
	firstChunkLen = 8
	// minIndex is the smallest index, in slots.
	minIndex = 8
	// smallIndex: an index array of up to this many slots (4 KiB) is kept
	// by a rebuild that needs less, however much less: a small table whose
	// size swings as entries come and go then allocates nothing.
	smallIndex = 1024
	// The index grows (or is rebuilt after dropping stale entries) when more
	// than 7/8 of its slots are used, and is rebuilt 5/8 used.
	maxLoadNum, maxLoadDen = 7, 8
	rebuildNum, rebuildDen = 8, 5 // slots per entry after a rebuild
	// churnSpare: while entries keep going stale and coming back, up to
	// churnSpare times the chunks in use are kept for reuse, enough for the
	// entries added until the next pass.
	churnSpare = 5
)

// Table maps keys to values of type V, held inline. Its zero value is not
// usable: call Init.
//
// Layout: the entries (key and value) are stored densely, in the order they
// were added, in fixed-size chunks; a separate index, open-addressed and
// probed linearly, holds for every entry one 4-byte slot: 8 bits of its hash
// (the tag) and its number in the dense storage. The reason is the cost of
// touching memory, not of probing: in a large table most of a lookup's time
// is a cache miss and a TLB miss (under nested paging, a two-dimensional
// page walk). The index costs 4.6 to 6.4 bytes per entry, so that the index
// of a million keys fits in a few megabytes, within the caches and the
// TLB's reach, where a table of whole entries (some 40 MB) misses on nearly
// every lookup; the owner can also start loading the index slot before it
// takes its lock (Prefetch), as it cannot usefully do for several lines of
// a group. Keys used in about the order they were added (a batch, a sweep
// over objects, a resync) find their entries next to one another, in lines
// just loaded or prefetched by the hardware. A lookup in random order pays
// the miss on its entry, as any table would.
//
// The bits of a hash are used thus: the top ones pick the home slot, bits 8
// to 15 are the tag, and bits 0 to 7 are left to the owner (its shard), so
// the three do not correlate. The home slot is the high half of
// hash×slots (a multiply, as cheap as a mask), so the index need not be a
// power of two long and can be rebuilt 5/8 used whatever the number of
// entries: rebuilds, and the drops of stale entries that come with them,
// come once per 0.4×entries insertions, not at every doubling.
//
// Entries do not keep their hashes (a string key and a 16-byte value fill a
// 32-byte entry, two to a cache line; a hash would make it 40): rebuilding
// the index and moving an entry hash their keys again, which costs O(1) per
// Insert amortised.
//
// Growth is also when stale entries go: before the index grows, the table
// drops every entry its Stale function approves, closing the gaps in order
// (so the entries left keep the order they were added in), and rebuilds the
// index for the entries left, which may mean shrinking it. That pass is
// O(entries) and comes once per at least 0.4×entries insertions. How large
// the rebuilt index is decides how soon the next pass comes, and so how
// long an entry that goes stale may stay unused before it is dropped: see
// comeBack. To tell keys that come back from new ones, a pass records
// the keys it drops in the ghost, a bitmap of one bit per hash, and Insert
// counts the keys it finds there. Sweep drops entries one at a time
// instead: the last entry moves into the dropped one's place, so the
// storage stays dense without a pass, and its index slot is renumbered (a
// free list would keep the order but leave holes that the pass and Sweep
// would have to skip); the dropped entry's slot becomes a tombstone, or
// empty when no probe can go past it, until the next rebuild.
type Table[K comparable, V any] struct {
	seed   maphash.Seed
	index  []uint32
	chunks [][]entry[K, V]
	live   int // entries, numbered 0 to live−1 in the storage
	used   int // index slots not empty: entries and tombstones
	stale  Stale[K, V]
	cursor int // the entry Sweep looks at next
	maxLen int // MaxLen; lowered by tests
	// spare holds empty full-size chunks that dropStale emptied, for
	// appendEntry to use again: a table whose entries go stale and come back
	// (keys that refill between their calls) then stops allocating and
	// freeing its storage. At most churnSpare times the chunks in use are
	// kept: as many as the entries that come back between two passes fill
	// (see Insert), not the peak of a table that has emptied for good.
	spare [][]entry[K, V]
	// ghost remembers the keys that passes dropped lately.
	ghost ghost
	// comeBack counts the Inserts of keys the ghost remembers, to size the
	// table after a pass.
	comeBack comeBack
	// indexAt and indexLen are the address and length of index, for
	// Prefetch, which takes no lock: each is read and written whole, and a
	// Prefetch that reads one from before a rebuild and one from after it
	// computes a wrong address, which is harmless, since it only asks for
	// a cache line. The address is a uintptr, not a pointer: the garbage
	// collector need not keep an old index alive for it.
	indexAt, indexLen atomic.Uintptr
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
	t.maxLen = MaxLen
}

// Hash returns key's hash, which the other methods take. It needs no lock.
func (t *Table[K, V]) Hash(key K) uint64 { return maphash.Comparable(t.seed, key) }

// Prefetch starts loading, without waiting for it, the index slot where
// Find's probe for hash h will start, so that the owner's other work before
// Find (reading the clock, taking its lock) overlaps the memory access. It
// needs no lock, reads no slot and may run while the index is rebuilt: then
// it loads a line of the old index, or of no index, which does no harm.
func (t *Table[K, V]) Prefetch(h uint64) {
	if n := t.indexLen.Load(); n != 0 {
		hi, _ := bits.Mul64(h, uint64(n))
		prefetch(t.indexAt.Load() + uintptr(hi)*4)
	}
}

// tagOf returns the tag of a hash, in place in an index slot.
func tagOf(h uint64) uint32 { return uint32(h>>8) & 0xff << numBits }

// Len returns the number of entries.
func (t *Table[K, V]) Len() int { return t.live }

// Slots returns the number of slots of the index, which sets the table's
// size: the entries' storage follows the entries.
func (t *Table[K, V]) Slots() int { return len(t.index) }

// home returns the index slot where the probe for hash h starts.
func (t *Table[K, V]) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(t.index)))
	return int(hi)
}

// next returns the index slot after i, wrapping round.
func (t *Table[K, V]) next(i int) int {
	if i++; i == len(t.index) {
		return 0
	}
	return i
}

// at returns entry number n of the storage.
func (t *Table[K, V]) at(n int) *entry[K, V] {
	return &t.chunks[n>>chunkBits][n&(chunkLen-1)]
}

// Find returns key's value, or nil if key has no entry. h is key's hash. The
// pointer is valid until the next Insert or Sweep.
func (t *Table[K, V]) Find(h uint64, key K) *V {
	if len(t.index) == 0 {
		return nil
	}
	tag := tagOf(h)
	for i := t.home(h); ; i = t.next(i) {
		s := t.index[i]
		if s == 0 {
			return nil
		}
		if s&^numMask == tag && s != tombstone {
			if e := t.at(int(s&numMask) - 1); e.key == key {
				return &e.val
			}
		}
	}
}

// Passes reports whether the next Insert first passes over the table:
// judges every entry with the Stale function, drops those it approves and
// rebuilds the index. An owner whose Stale function depends on when passes
// happen (keep what was used since the last one) asks before it inserts.
func (t *Table[K, V]) Passes() bool {
	return (t.used+1)*maxLoadDen > len(t.index)*maxLoadNum
}

// Insert adds key, which has hash h and no entry, with value v, and returns
// a pointer to its value, valid until the next Insert or Sweep. It may first
// drop stale entries and rebuild the index (see Table). It panics if the
// table holds MaxLen entries after that.
func (t *Table[K, V]) Insert(h uint64, key K, v V) *V {
	if t.Passes() {
		t.pass()
	}
	if t.live >= t.maxLen {
		panic("keytable: Insert into a table of MaxLen entries")
	}
	t.comeBack.count(t.ghost.has(h))
	n := t.live
	t.place(h, n)
	t.live++
	e := t.appendEntry(n)
	*e = entry[K, V]{key: key, val: v}
	return &e.val
}

// pass drops the stale entries, remembering their keys in the ghost, and
// rebuilds the index for the entries left, or for those it held if keys
// come back (see comeBack).
func (t *Table[K, V]) pass() {
	before := t.live
	if !t.comeBack.yes {
		// While the table grows for keys that come back, the ghost keeps
		// the size it had: it is there to see them come back, which it
		// did at that size.
		t.ghost.sizeFor(before)
	}
	t.dropStale()
	n := t.live + 1
	if t.comeBack.decide() {
		n = max(n, before)
	}
	t.rebuild(n)
}

// place writes the slot of entry n, whose key has hash h, in the first slot
// of h's probe sequence that holds no entry.
func (t *Table[K, V]) place(h uint64, n int) {
	i := t.home(h)
	for t.index[i] != 0 && t.index[i] != tombstone {
		i = t.next(i)
	}
	if t.index[i] == 0 {
		t.used++
	}
	t.index[i] = tagOf(h) | uint32(n+1)
}

// appendEntry makes room for entry n, the one after the last, and returns
// it.
func (t *Table[K, V]) appendEntry(n int) *entry[K, V] {
	c := n >> chunkBits
	if c == len(t.chunks) {
		switch {
		case c == 0:
			t.chunks = append(t.chunks, make([]entry[K, V], 0, firstChunkLen))
		case len(t.spare) > 0:
			t.chunks = append(t.chunks, t.spare[len(t.spare)-1])
			t.spare[len(t.spare)-1] = nil
			t.spare = t.spare[:len(t.spare)-1]
		default:
			t.chunks = append(t.chunks, make([]entry[K, V], 0, chunkLen))
		}
	}
	chunk := t.chunks[c]
	if len(chunk) == cap(chunk) {
		// Only the first chunk, while the table is small.
		chunk = append(make([]entry[K, V], 0, min(2*cap(chunk), chunkLen)), chunk...)
	}
	t.chunks[c] = chunk[:len(chunk)+1]
	return &t.chunks[c][len(chunk)]
}

// slotOf returns the index slot of entry n, whose key has hash h.
func (t *Table[K, V]) slotOf(h uint64, n int) int {
	i := t.home(h)
	for t.index[i]&numMask != uint32(n+1) {
		i = t.next(i)
	}
	return i
}

// Sweep looks at up to groups×7 entries (as many as groups of seven slots
// hold), from where the last Sweep stopped, drops the stale ones and
// returns how many it dropped. Calls that follow one another visit every
// entry in turn.
func (t *Table[K, V]) Sweep(groups int) int {
	dropped := 0
	for range min(groups*7, t.live) {
		if t.cursor >= t.live {
			t.cursor = 0
		}
		e := t.at(t.cursor)
		if t.stale(e.key, &e.val) {
			t.remove(t.cursor) // the last entry moved here: look at it next
			dropped++
		} else {
			t.cursor++
		}
	}
	return dropped
}

// remove drops entry n, moving the last entry into its place.
func (t *Table[K, V]) remove(n int) {
	e := t.at(n)
	i := t.slotOf(t.Hash(e.key), n)
	if t.index[t.next(i)] == 0 {
		// A probe that reaches i stops at the next slot anyway: i may be
		// empty again.
		t.index[i] = 0
		t.used--
	} else {
		t.index[i] = tombstone
	}
	last := t.live - 1
	if n != last {
		l := t.at(last)
		j := t.slotOf(t.Hash(l.key), last)
		t.index[j] = t.index[j]&^numMask | uint32(n+1)
		*e = *l
	}
	c := last >> chunkBits
	t.chunks[c][len(t.chunks[c])-1] = entry[K, V]{} // for the garbage collector
	t.chunks[c] = t.chunks[c][:len(t.chunks[c])-1]
	t.live--
}

// dropStale drops every stale entry, keeping the others in their order. The
// index is left stale: the caller rebuilds it.
func (t *Table[K, V]) dropStale() {
	kept := 0
	for n := range t.live {
		e := t.at(n)
		if t.stale(e.key, &e.val) {
			t.ghost.add(t.Hash(e.key))
			continue
		}
		if kept != n {
			*t.at(kept) = *e
		}
		kept++
	}
	if kept == t.live {
		return
	}
	for n := kept; n < t.live; n++ {
		*t.at(n) = entry[K, V]{} // for the garbage collector
	}
	// Keep the chunks that hold entries, and the first one.
	chunks := max((kept+chunkLen-1)>>chunkBits, 1)
	for c := range t.chunks {
		switch {
		case c >= chunks:
			if len(t.spare) < churnSpare*chunks {
				t.spare = append(t.spare, t.chunks[c][:0]) // cleared above
			}
			t.chunks[c] = nil
		case c == chunks-1:
			t.chunks[c] = t.chunks[c][:kept-c<<chunkBits]
		}
	}
	t.chunks = t.chunks[:chunks]
	t.live = kept
	t.cursor = 0
}

// rebuild makes an index with room for n entries, 5/8 used, and indexes
// the entries.
func (t *Table[K, V]) rebuild(n int) {
	size := max(n*rebuildNum/rebuildDen, minIndex)
	if c := cap(t.index); c >= size && (c <= 2*size || c <= smallIndex) {
		// The index is made from the entries, not from itself, so its
		// array is cleared and used again: while entries come and go,
		// passes ask for about the same size each time. Prefetch may
		// meanwhile compute an address in it, which is harmless: it reads
		// no slot.
		t.index = t.index[:size]
		clear(t.index)
	} else {
		t.index = make([]uint32, size)
	}
	t.used = 0
	for m := range t.live {
		t.place(t.Hash(t.at(m).key), m)
	}
	t.indexAt.Store(uintptr(unsafe.Pointer(&t.index[0])))
	t.indexLen.Store(uintptr(len(t.index)))
}
