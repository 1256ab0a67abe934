package levels

import (
	"math/bits"
	"math/rand/v2"
)

// keyIndex finds the keyQueue of a key in a level with fairness: an
// open-addressing table of keyQueue pointers, probed linearly from the
// slot the key's hash picks, at most half full. It does what a
// map[string]*keyQueue would, in about half the instructions per lookup
// (see BenchmarkQueueAddGetDoneFairness), which is what fairness costs an
// Add: the probe compares the hash that each keyQueue keeps before it
// compares the keys, keys leave only all at once (deleteIf), so the table
// has no deleted slots to probe past, and the hash is computed inline (see
// strHash).
//
// The zero value is an empty index.
type keyIndex[E any] struct {
	seed   uint64 // random, so that which keys collide cannot be chosen
	seeded bool
	slots  []*keyQueue[E] // empty, or a power of two long; nil slots are free
	n      int            // keys
}

// minKeySlots is the size of an index's first table.
const minKeySlots = 16

// hash returns the hash of key k, which find and insert take.
func (x *keyIndex[E]) hash(k string) uint64 {
	if !x.seeded {
		x.seed, x.seeded = rand.Uint64(), true
	}
	return strHash(x.seed, k)
}

// strHash returns a hash of s, seeded with seed: each 16 bytes, and the
// last 1 to 16, are mixed into the state by a 64×64→128-bit multiply
// folded to 64 bits. Keys are short (namespaces): hash/maphash.String,
// which goes through three calls into the runtime's hash, costs more than
// the whole probe.
func strHash(seed uint64, s string) uint64 {
	const m1, m2 = 0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9
	h := seed ^ uint64(len(s))*m1
	for len(s) > 16 {
		h = mix(le64(s)^m1, le64(s[8:])^h)
		s = s[16:]
	}
	var a, b uint64
	switch n := len(s); {
	case n >= 8:
		a, b = le64(s), le64(s[n-8:])
	case n >= 4:
		a, b = le32(s), le32(s[n-4:])
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return mix(a^m2, b^h)
}

// mix folds the 128-bit product of a and b to 64 bits.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// le64 returns the first 8 bytes of s as a little-endian number.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// le32 returns the first 4 bytes of s as a little-endian number.
func le32(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

// find returns the keyQueue of k, whose hash is h, or nil.
func (x *keyIndex[E]) find(h uint64, k string) *keyQueue[E] {
	mask := uint64(len(x.slots) - 1)
	if len(x.slots) == 0 {
		return nil
	}
	for i := h & mask; ; i = (i + 1) & mask {
		kq := x.slots[i]
		if kq == nil || kq.hash == h && kq.key == k {
			return kq
		}
	}
}

// insert adds kq, whose key and hash are set and not in x.
func (x *keyIndex[E]) insert(kq *keyQueue[E]) {
	if 2*(x.n+1) > len(x.slots) {
		x.resize(max(minKeySlots, 2*len(x.slots)))
	}
	x.place(kq)
	x.n++
}

// place puts kq in the first free slot of its probe.
func (x *keyIndex[E]) place(kq *keyQueue[E]) {
	mask := uint64(len(x.slots) - 1)
	i := kq.hash & mask
	for x.slots[i] != nil {
		i = (i + 1) & mask
	}
	x.slots[i] = kq
}

// resize moves the keys to a table of size slots.
func (x *keyIndex[E]) resize(size int) {
	old := x.slots
	x.slots = make([]*keyQueue[E], size)
	for _, kq := range old {
		if kq != nil {
			x.place(kq)
		}
	}
}

// deleteIf removes the keys for which drop returns true, and shrinks the
// table to the keys left. O(slots).
func (x *keyIndex[E]) deleteIf(drop func(*keyQueue[E]) bool) {
	for i, kq := range x.slots {
		if kq != nil && drop(kq) {
			x.slots[i] = nil
			x.n--
		}
	}
	size := minKeySlots
	for size < 2*x.n {
		size *= 2
	}
	x.resize(size)
}

// each calls f with every keyQueue, in no particular order.
func (x *keyIndex[E]) each(f func(*keyQueue[E])) {
	for _, kq := range x.slots {
		if kq != nil {
			f(kq)
		}
	}
}
