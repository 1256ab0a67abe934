package backoff

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBucketTagHelpers(t *testing.T) {
	tags := newBucketTags | uint64(0x85)<<8 | uint64(tagDeleted)<<16 | uint64(0x85)<<24 | uint64(0x90)<<32
	m := matching(tags, 0x85)
	assert.NotZero(t, m&(0x80<<8), "slot 1 matches")
	assert.NotZero(t, m&(0x80<<24), "slot 3 matches")
	assert.Zero(t, m&(0x80<<32|0x80<<16|0x80<<56), "deleted, other tags and the spare byte never match")
	assert.Equal(t, 0, slotOf(emptySlots(tags)), "slot 0 is the lowest empty slot")
	assert.Equal(t, 5, slotOf(emptySlots(tags&^0xff|0x85)), "then slot 5, once slot 0 is full")
	assert.Equal(t, 3, slotOf(0x80<<24))
	assert.Zero(t, emptySlots(newBucketTags|0x8181818181818181&^(0xff<<56)), "seven full slots")
	assert.Zero(t, emptySlots(newBucketTags|0x0101010101010101&^(0xff<<56)), "seven deleted slots")
}

// TestEntryTableAgainstAMap inserts and removes ids at random, many with the
// same bucket and tag, and checks after every step that the table finds
// exactly the ids a map holds.
func TestEntryTableAgainstAMap(t *testing.T) {
	seed := maphash.MakeSeed()
	// Half the ids hash to one bucket with one tag: long probe sequences,
	// full buckets and many tag matches that are not the id.
	hash := func(id string) uint64 {
		h := maphash.String(seed, id)
		if h&1 == 0 {
			h = 0xab<<56 | 0x100
		}
		return h
	}
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[string]*entry{}
	var table *entryTable
	for step := range 5_000 {
		id := fmt.Sprint("id", rng.IntN(300))
		if e, ok := model[id]; ok {
			table.remove(hash(id), e)
			delete(model, id)
		} else {
			if table.full() {
				table = table.rebuilt(len(model)+1, hash)
			}
			e := &entry{id: id}
			table.insert(hash(id), e)
			model[id] = e
		}
		require.Equal(t, len(model), tableLen(table), "step %d", step)
		for i := range 300 {
			id := fmt.Sprint("id", i)
			require.Same(t, model[id], table.find(hash(id), id), "step %d: %s", step, id)
		}
	}
	assert.Less(t, table.used, len(table.buckets)*bucketSlots, "an empty slot remains")
}

func TestEntryTableSize(t *testing.T) {
	assert.Nil(t, (*entryTable)(nil).find(1, "x"))
	assert.True(t, (*entryTable)(nil).full())
	for _, n := range []int{1, 7, 100, 12_345} {
		tbl := newEntryTable(n)
		slots := len(tbl.buckets) * bucketSlots
		assert.GreaterOrEqual(t, slots, 2*n, "at most half full when rebuilt for %d", n)
		assert.Less(t, slots, 4*n+2*bucketSlots, "not oversized for %d", n)
	}
}
