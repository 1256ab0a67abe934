//go:build !go1.24

package keytable

import "math"

// Hashed reports whether Hash spreads keys: false in this build, whose Hash
// is always 0, so an owner keeps one shard.
const Hashed = false

// MaxLen is the most entries a Table holds: in this build, as many as a
// slice can.
const MaxLen = math.MaxInt

// Table maps keys to values of type V. Before Go 1.24 there is no
// allocation-free way to hash an arbitrary comparable value
// (hash/maphash.Comparable), so this build keeps the entries in a slice,
// which gives Find a pointer to update in place, and a Go map from key to
// index. Its zero value is not usable: call Init.
//
// Stale entries are dropped, all of them, before the slice grows, and by
// Sweep; a dropped entry is replaced by the last one, so the slice stays
// dense. After a pass the slice is sized as the go1.24 build sizes its
// index (see comeBack), with the keys dropped lately held in two maps
// instead of bitmaps.
type Table[K comparable, V any] struct {
	index    map[K]int
	entries  []entry[K, V]
	stale    Stale[K, V]
	cursor   int // the entry Sweep looks at next
	comeBack comeBack
	// dropped and droppedBefore hold the keys that passes dropped lately:
	// keys go to dropped until it holds ghostSize, when it becomes
	// droppedBefore and a new one starts.
	dropped, droppedBefore map[K]struct{}
	ghostSize              int
}

// groupSize is the number of entries Sweep counts as one group, as many as
// a group of the go1.24 build holds.
const groupSize = 7

type entry[K comparable, V any] struct {
	key K
	val V
}

// Seed is what Hash is computed from; nothing in this build.
type Seed struct{}

// NewSeed returns a Seed.
func NewSeed() Seed { return Seed{} }

// Init readies the table, with the seed of its hashes and the function that
// says which entries may go. It must run before the table is shared.
func (t *Table[K, V]) Init(_ Seed, stale Stale[K, V]) {
	t.index = make(map[K]int)
	t.stale = stale
}

// Hash returns 0: a map hashes by itself.
func (t *Table[K, V]) Hash(K) uint64 { return 0 }

// Prefetch does nothing in this build.
func (t *Table[K, V]) Prefetch(uint64) {}

// Len returns the number of entries.
func (t *Table[K, V]) Len() int { return len(t.entries) }

// Slots returns the capacity of the entries' slice.
func (t *Table[K, V]) Slots() int { return cap(t.entries) }

// Find returns key's value, or nil if key has no entry. The pointer is
// valid until the next Insert or Sweep.
func (t *Table[K, V]) Find(_ uint64, key K) *V {
	if i, ok := t.index[key]; ok {
		return &t.entries[i].val
	}
	return nil
}

// Passes reports whether the next Insert first passes over the table,
// dropping the stale entries: whether the slice is full.
func (t *Table[K, V]) Passes() bool { return len(t.entries) == cap(t.entries) }

// Insert adds key, which has no entry, with value v, and returns a pointer
// to its value, valid until the next Insert or Sweep. Before the slice
// grows it drops the stale entries.
func (t *Table[K, V]) Insert(_ uint64, key K, v V) *V {
	if t.Passes() {
		before := len(t.entries)
		if !t.comeBack.yes {
			t.ghostSize = max(ghostReach*before, ghostMinKeys)
		}
		for i := 0; i < len(t.entries); {
			if e := &t.entries[i]; t.stale(e.key, &e.val) {
				t.remember(e.key)
				t.drop(i)
			} else {
				i++
			}
		}
		// Room for 1.4 times n entries, as the go1.24 build's index.
		n := len(t.entries) + 1
		if t.comeBack.decide() {
			n = max(n, before)
		}
		t.entries = append(make([]entry[K, V], 0, n*7/5+1), t.entries...)
	}
	_, dropped := t.dropped[key]
	_, droppedBefore := t.droppedBefore[key]
	t.comeBack.count(dropped || droppedBefore)
	t.index[key] = len(t.entries)
	t.entries = append(t.entries, entry[K, V]{key: key, val: v})
	return &t.entries[len(t.entries)-1].val
}

// Sweep looks at up to groups×7 entries, from where the last Sweep stopped,
// drops the stale ones and returns how many it dropped.
func (t *Table[K, V]) Sweep(groups int) int {
	dropped := 0
	for range min(groups*groupSize, len(t.entries)) {
		if t.cursor >= len(t.entries) {
			t.cursor = 0
		}
		if t.dropIfStale(t.cursor) {
			dropped++ // the last entry moved here: look at it next
		} else {
			t.cursor++
		}
	}
	return dropped
}

// remember records key as dropped by a pass.
func (t *Table[K, V]) remember(key K) {
	if t.dropped == nil || len(t.dropped) >= t.ghostSize {
		t.droppedBefore, t.dropped = t.dropped, make(map[K]struct{})
	}
	t.dropped[key] = struct{}{}
}

// dropIfStale drops entry i if it is stale, moving the last entry into its
// place, and reports whether it did.
func (t *Table[K, V]) dropIfStale(i int) bool {
	if e := &t.entries[i]; !t.stale(e.key, &e.val) {
		return false
	}
	t.drop(i)
	return true
}

// drop drops entry i, moving the last entry into its place.
func (t *Table[K, V]) drop(i int) {
	e := &t.entries[i]
	delete(t.index, e.key)
	last := len(t.entries) - 1
	if i != last {
		*e = t.entries[last]
		t.index[e.key] = i
	}
	t.entries[last] = entry[K, V]{} // for the garbage collector
	t.entries = t.entries[:last]
}
