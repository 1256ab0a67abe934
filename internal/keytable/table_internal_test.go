//go:build go1.24

package keytable

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff/internal/tagword"
)

type val struct {
	n     int
	stale bool
}

func newTable() *Table[int, val] {
	t := new(Table[int, val])
	t.Init(NewSeed(), func(_ int, v *val) bool { return v.stale })
	return t
}

// checkCounts verifies the control words against live and used, and that
// every group keeps its spare byte deleted.
func checkCounts(t *testing.T, tab *Table[int, val]) {
	t.Helper()
	full, notEmpty := 0, 0
	for i := range tab.groups {
		ctrl := tab.groups[i].ctrl
		require.Equal(t, uint64(tagword.Deleted), ctrl>>56, "group %d: spare byte", i)
		for j := range tagword.Slots {
			switch b := ctrl >> (8 * j) & 0xff; {
			case b&tagword.Full != 0:
				full++
				notEmpty++
			case b == tagword.Deleted:
				notEmpty++
			}
		}
	}
	require.Equal(t, tab.live, full)
	require.Equal(t, tab.used, notEmpty)
}

// TestGrowthKeepsTheLoad: the table is never more than 7/8 used, and a
// rebuilt one is at most 4/7 full, so a slot of 33 bytes (string keys and
// a 16-byte value) costs at most 58 bytes per entry.
func TestGrowthKeepsTheLoad(t *testing.T) {
	tab := newTable()
	slots := 0
	for k := range 200_000 {
		tab.Insert(tab.Hash(k), k, val{n: k})
		if tab.used*8 > tab.Slots()*7 {
			t.Fatalf("after %d inserts: %d of %d slots used", k+1, tab.used, tab.Slots())
		}
		if tab.Slots() != slots {
			slots = tab.Slots()
			require.LessOrEqual(t, tab.live*7, slots*4, "rebuilt for %d entries", tab.live)
			if k > 100 {
				require.GreaterOrEqual(t, tab.live*49, slots*24, "grew by about half, not double")
			}
		}
	}
	checkCounts(t, tab)
}

// TestProbesWrapAround: keys whose home is the last group spill into the
// first one, and stay found after some of them are swept.
func TestProbesWrapAround(t *testing.T) {
	tab := newTable()
	for k := range 43 { // just rebuilt to 11 groups, room for 24 more
		tab.Insert(tab.Hash(-1-k), -1-k, val{n: -1})
	}
	n := len(tab.groups)
	var keys []int
	for k := 0; len(keys) < 2*tagword.Slots; k++ {
		if tab.home(tab.Hash(k)) == n-1 {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	require.Equal(t, n, len(tab.groups), "no rebuild")
	for _, k := range keys {
		require.NotNil(t, tab.Find(tab.Hash(k), k), "key %d", k)
	}
	// The last group is full: its keys spilled over the end, to the first.
	assert.Zero(t, tagword.EmptySlots(tab.groups[n-1].ctrl)&tagword.SlotBytes)
	for _, k := range keys[:tagword.Slots] {
		tab.Find(tab.Hash(k), k).stale = true
	}
	for range n {
		tab.Sweep(1)
	}
	checkCounts(t, tab)
	for i, k := range keys {
		assert.Equal(t, i < tagword.Slots, tab.Find(tab.Hash(k), k) == nil, "key %d", k)
	}
	// Dropped from a group that has been full: tombstones, counted as used.
	assert.Greater(t, tab.used, tab.live)
}
