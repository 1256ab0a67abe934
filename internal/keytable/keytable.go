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
