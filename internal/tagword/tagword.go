// Package tagword reads and writes the control word of a hash-table bucket:
// a uint64 that holds one tag byte per slot, so that one load and a few
// arithmetic operations compare a hash's tag with every slot of the bucket
// at once. The tables of the queue's item states (internal/itemstate) and of
// the Backoff's entries share this layout.
//
// The helpers are generic over ~uint64 only so that the compiler inlines
// them into the generic tables wherever those are instantiated, even in a
// package that does not import this one: it carries the body of a generic
// function into every package that uses it, and the body of an ordinary
// one only into packages that import its package.
//
// A bucket has Slots slots, slot j in byte j of its word; byte 7 has no slot
// and always holds Deleted, which neither matches a tag nor counts as empty.
// A slot's byte is Empty, Deleted, or Full with 7 bits of the item's hash.
package tagword

import "math/bits"

const (
	// Slots is the number of slots of a bucket.
	Slots = 7
	// Empty marks a slot that has never been used since the table was
	// built or cleared: it ends every probe sequence that reaches it.
	Empty = 0x00
	// Deleted marks a slot whose item was removed: probes go past it.
	Deleted = 0x01
	// Full is the bit of a slot that holds an item.
	Full = 0x80

	// NewBucket is the word of an empty bucket: seven empty slots and the
	// byte without a slot.
	NewBucket = uint64(Deleted) << (8 * Slots)

	// SlotBytes are the bytes of a word that have a slot.
	SlotBytes = 1<<(8*Slots) - 1

	// A table is rebuilt before more than MaxLoadNum/MaxLoadDen of its slots
	// are used; a rebuilt table is at most half full.
	MaxLoadNum, MaxLoadDen = 7, 8

	// Lsbs is the low bit of every byte.
	Lsbs = 0x0101010101010101
	// Msbs is the high bit of every byte.
	Msbs = 0x8080808080808080
)

// BucketsFor returns the number of buckets of a table built for n entries:
// the smallest power of two whose slots hold them at most half full.
func BucketsFor(n int) int {
	size := 1
	for size*Slots < 2*n {
		size <<= 1
	}
	return size
}

// ZeroBytes returns a mask with the high bit set in each byte of x that may
// be zero: every byte that is zero is set, and the lowest such byte is exact;
// a byte above a zero one may be set too (a borrow).
func ZeroBytes[W ~uint64](x W) W { return (x - Lsbs) &^ x & Msbs }

// Matching returns the bytes of word that may equal tag (see ZeroBytes): a
// false match is ruled out by the caller's comparison of keys.
func Matching[W ~uint64](word, tag W) W { return ZeroBytes(word ^ tag*Lsbs) }

// EmptySlots returns the Empty bytes of word (see ZeroBytes); its lowest set
// byte is exactly the lowest empty slot. A bucket with an empty slot ends
// every probe sequence that reaches it.
func EmptySlots[W ~uint64](word W) W { return ZeroBytes(word) }

// FullSlots returns the high bit of every slot byte of word that is Full.
func FullSlots[W ~uint64](word W) W { return word & Msbs & SlotBytes }

// SlotOf returns the slot whose byte carries the lowest bit set in m.
func SlotOf[W ~uint64](m W) int { return bits.TrailingZeros64(uint64(m)) / 8 }

// WithSlotByte returns word with slot j's byte replaced by b.
func WithSlotByte[W ~uint64](word W, j int, b W) W {
	return word&^(0xff<<(8*j)) | b<<(8*j)
}
