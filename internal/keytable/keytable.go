// Package keytable maps keys to small values held inline, for owners that
// update a key's value in place on every call (a per-key token bucket):
// no pointer and no allocation per key, and entries that the owner judges
// stale are dropped as the table is used instead of by a sweeper.
//
// A Table is not safe for concurrent use: its owner serialises every call
// with its own lock, except Hash, which needs none.
package keytable

// Stale reports whether key's entry may be dropped (for a token bucket:
// whether it has refilled, so that it is the same as no entry). A Table
// calls it, under its owner's lock, on the entries it looks at in Sweep and
// before it grows; it must not call the Table.
type Stale[K comparable, V any] func(key K, v *V) bool

// comeBack reports whether keys are coming back after passes dropped them:
// whether half or more of the inserts counted were of keys that passes had
// dropped lately (see ghost). It is false until it has counted minSample
// inserts; then it decides, and the counts start again.
//
// A table then sizes itself after each pass (the next pass comes once 0.4
// times as many more entries have been added) for the entries it held
// before the pass while keys come back, and for the entries left
// otherwise. An owner's Stale function may keep what was used since the
// pass before (KeyedLimiter does), so how far apart passes come decides how
// long an unused key is kept: keys that come back make the table grow 1.4
// times per pass until they come back before they are dropped, and stop
// being inserted again; keys that do not (a stream of new keys, each used
// once) hold memory for two passes at most, and the passes do not spread
// out as the stream goes on.
type comeBack struct {
	inserts, returns int
	yes              bool
}

// minSample is the fewest inserts comeBack decides on, so that a small
// table does not decide on the chance of a few keys.
const minSample = 128

// count counts an insert, and whether its key had been dropped lately.
func (c *comeBack) count(returned bool) {
	c.inserts++
	if returned {
		c.returns++
	}
}

// decide updates and returns the decision, at a pass.
func (c *comeBack) decide() bool {
	if c.inserts >= minSample {
		c.yes = c.returns*2 >= c.inserts
		c.inserts, c.returns = 0, 0
	}
	return c.yes
}

// ghostMinKeys is the fewest keys the ghost's bitmap (or, before Go 1.24,
// its map) is sized for: enough that keys coming back to a small table are
// seen even when that table passes many times between their uses.
const ghostMinKeys = 1024

// ghostReach: a bitmap of the ghost (a map before Go 1.24) is sized for
// this many times the entries its table holds, so that the ghost costs
// ghostReach bytes per entry (two bitmaps of ghostBitsPerKey bits per key),
// against the 32 to 40 bytes of the entry itself: a table that holds
// 1/ghostReach of the keys that come back costs, with its ghost, about a
// sixth of what holding them all would.
const ghostReach = 8
