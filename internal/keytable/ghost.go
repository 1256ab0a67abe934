//go:build go1.24

package keytable

import "math/bits"

// ghost remembers the keys that passes dropped lately, so that Insert can
// tell a key that comes back from a new one: bitmaps with one bit set for
// each key recorded, at the place the key's hash picks. A key whose bit is
// set was probably dropped; a key whose bit is clear was not, lately.
//
// It remembers the keys of several passes, not only the last one's: a key
// that comes back once a second to a table whose passes come ten times a
// second was dropped ten passes before. Keys are recorded in one bitmap
// until it holds as many as it is sized for, when it becomes the previous
// one, which Insert still looks in, and the next keys go to a new one: the
// ghost thus remembers at least the last n dropped keys and at most 2n,
// where n is the larger of ghostMinKeys and the entries the table held at
// the pass that began the bitmap, times ghostReach. A key that comes back
// is seen to when fewer than n keys were dropped after it: when the keys
// that come back are up to ghostReach+1 times as many as the table holds
// (KeyedLimiter holds at least the keys used within a token's time; a
// working set nine times that is seen to come back, one a hundred times it
// is not). A new key may be taken for one that came back (see
// ghostBitsPerKey).
type ghost struct {
	cur, prev []uint64
	keys      int // recorded in cur
	// next is the number of keys the next bitmap is sized for. Bitmaps are
	// made when a key is recorded, so that a table that drops nothing has
	// none.
	next int
}

// ghostBitsPerKey is the number of bits of a bitmap of the ghost per key it
// is sized for. With this many, a bitmap that holds all its keys has 22% of
// its bits set (1 - e^-1/4), so that the ghost takes at most 39% of new
// keys for keys that came back (a bit set in either of its bitmaps), and
// less while its bitmaps are filling: a new key comes back less than half
// the time, which is what comeBack's decision asks for.
const ghostBitsPerKey = 4

// sizeFor sets the number of keys the next bitmap is sized for from n, the
// entries its table holds at a pass.
func (g *ghost) sizeFor(n int) { g.next = max(ghostReach*n, ghostMinKeys) }

// start makes the current bitmap the previous one, and a new one, sized
// for g.next keys, the current one. The array of the bitmap forgotten is
// used again when it is large enough and at most twice as large as needed,
// so that a table whose passes keep dropping keys does not allocate
// bitmaps.
func (g *ghost) start() {
	words := (max(g.next, ghostMinKeys)*ghostBitsPerKey + 63) / 64
	next := g.prev
	if cap(next) >= words && cap(next) <= 2*words {
		next = next[:words]
		clear(next)
	} else {
		next = make([]uint64, words)
	}
	g.prev, g.cur, g.keys = g.cur, next, 0
}

// bit returns the word and the bit within it that hash h picks in bitmap
// m: the high half of h×bits, as the index picks a home slot, which needs
// no power of two.
func bit(m []uint64, h uint64) (int, uint64) {
	i, _ := bits.Mul64(h, uint64(len(m))*64)
	return int(i / 64), 1 << (i % 64)
}

// add records the key whose hash is h.
func (g *ghost) add(h uint64) {
	if g.keys >= len(g.cur)*64/ghostBitsPerKey {
		g.start()
	}
	w, b := bit(g.cur, h)
	g.cur[w] |= b
	g.keys++
}

// has reports whether the key whose hash is h may have been recorded.
func (g *ghost) has(h uint64) bool {
	for _, m := range [2][]uint64{g.cur, g.prev} {
		if len(m) != 0 {
			if w, b := bit(m, h); m[w]&b != 0 {
				return true
			}
		}
	}
	return false
}
