package idtable

import (
	"fmt"
	"hash/maphash"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFullAtTheLoadLimit fills a table of 8 buckets (56 slots): it takes
// exactly 49 entries, 7/8 of its slots, before Full says the next one must
// go into a rebuilt table; a table that took more could end with no empty
// slot, and a lookup of a missing id would then never end.
func TestFullAtTheLoadLimit(t *testing.T) {
	seed := maphash.MakeSeed()
	table := New[testEntry](28)
	slots, _ := table.Slots()
	require.Equal(t, 56, slots, "New(28) is at most half full: 8 buckets of 7 slots")
	inserted := 0
	for ; !table.Full(); inserted++ {
		require.Less(t, inserted, slots, "Full never said so")
		id := fmt.Sprint("id", inserted)
		table.Insert(maphash.String(seed, id), &testEntry{id: id})
	}
	assert.Equal(t, 49, inserted, "entries taken before Full")
	_, used := table.Slots()
	assert.Equal(t, 49, used)
}
