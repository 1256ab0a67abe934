package tagword

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHelpers(t *testing.T) {
	word := NewBucket | uint64(0x85)<<8 | uint64(Deleted)<<16 | uint64(0x85)<<24 | uint64(0x90)<<32
	m := Matching(word, 0x85)
	assert.NotZero(t, m&(0x80<<8), "slot 1 matches")
	assert.NotZero(t, m&(0x80<<24), "slot 3 matches")
	assert.Zero(t, m&(0x80<<32|0x80<<16|0x80<<56), "deleted, other tags and the spare byte never match")
	assert.Equal(t, 0, SlotOf(EmptySlots(word)), "slot 0 is the lowest empty slot")
	assert.Equal(t, 5, SlotOf(EmptySlots(word&^0xff|0x85)), "then slot 5, once slot 0 is full")
	assert.Equal(t, 3, SlotOf(uint64(0x80<<24)))
	assert.Zero(t, EmptySlots(NewBucket|0x8181818181818181&^(0xff<<56)), "seven full slots")
	assert.Zero(t, EmptySlots(NewBucket|0x0101010101010101&^(0xff<<56)), "seven deleted slots")
	assert.Equal(t, uint64(0x80<<8|0x80<<24|0x80<<32), FullSlots(word), "the full slots, not the spare byte")
	assert.Equal(t, uint64(0x85)<<8|NewBucket|0x77<<16, WithSlotByte(NewBucket|uint64(0x85)<<8, 2, 0x77))
}

func TestBucketsFor(t *testing.T) {
	for _, n := range []int{0, 1, 7, 100, 12_345} {
		b := BucketsFor(n)
		assert.Zero(t, b&(b-1), "a power of two for %d", n)
		assert.GreaterOrEqual(t, b*Slots, 2*n, "at most half full for %d", n)
		assert.Less(t, b*Slots, 4*n+2*Slots, "not oversized for %d", n)
	}
}
