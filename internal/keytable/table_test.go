package keytable_test

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff/internal/keytable"
)

// val is the test's value: a payload, and whether the entry may go.
type val struct {
	n     int
	stale bool
}

func newTable() *keytable.Table[int, val] {
	t := new(keytable.Table[int, val])
	t.Init(keytable.NewSeed(), func(_ int, v *val) bool { return v.stale })
	return t
}

// check verifies t against model: an entry that is not stale is found with
// its value, a stale one is found with its value or is gone (then it leaves
// the model), a key outside the model is not found, and Len counts what is
// found.
func check(t *testing.T, tab *keytable.Table[int, val], model map[int]val, keyRange int) {
	t.Helper()
	found := 0
	for k := range keyRange {
		v := tab.Find(tab.Hash(k), k)
		want, ok := model[k]
		switch {
		case !ok && v != nil:
			t.Fatalf("key %d has no entry, found %+v", k, *v)
		case ok && v == nil && !want.stale:
			t.Fatalf("key %d lost, though not stale", k)
		case ok && v == nil:
			delete(model, k)
		case ok && *v != want:
			t.Fatalf("key %d: %+v, want %+v", k, *v, want)
		case ok:
			found++
		}
	}
	require.Equal(t, found, tab.Len())
}

// TestTableModel runs random inserts, in-place updates, stale marks and
// sweeps against a Go map, over a key range small enough that keys come back
// after they were dropped.
func TestTableModel(t *testing.T) {
	seeds := uint64(4)
	if os.Getenv("BACKOFF_LONG") == "1" {
		seeds = 100
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 7))
		tab := newTable()
		model := map[int]val{}
		const keyRange = 3000
		for op := range 20_000 {
			k := rng.IntN(keyRange)
			h := tab.Hash(k)
			v := tab.Find(h, k)
			_, inModel := model[k]
			switch {
			case v == nil && inModel:
				require.True(t, model[k].stale, "seed %d op %d: key %d lost", seed, op, k)
				delete(model, k)
				fallthrough
			case v == nil:
				nv := val{n: op, stale: rng.IntN(3) == 0}
				p := tab.Insert(h, k, nv)
				require.Equal(t, nv, *p)
				model[k] = nv // the insert may have dropped stale entries: check forgets those
			default:
				// Updated in place, as the limiter updates a bucket.
				v.n, v.stale = op, rng.IntN(3) == 0
				model[k] = *v
			}
			if op%97 == 0 {
				tab.Sweep(1 + rng.IntN(3))
			}
			if op%1000 == 0 {
				check(t, tab, model, keyRange)
			}
		}
		check(t, tab, model, keyRange)
	}
}

// TestTableSweepGoesRound: successive Sweeps visit every entry, so that
// enough of them drop every stale one.
func TestTableSweepGoesRound(t *testing.T) {
	tab := newTable()
	for k := range 10_000 {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	for k := 0; k < 10_000; k += 2 {
		tab.Find(tab.Hash(k), k).stale = true
	}
	dropped := 0
	for range tab.Slots()/7 + 1 {
		dropped += tab.Sweep(1)
	}
	assert.Equal(t, 5000, dropped)
	assert.Equal(t, 5000, tab.Len())
	for k := range 10_000 {
		assert.Equal(t, k%2 == 0, tab.Find(tab.Hash(k), k) == nil, "key %d", k)
	}
	assert.Zero(t, tab.Sweep(1000), "nothing stale is left")
}

// TestTableDropsStaleBeforeGrowing: a table whose entries all went stale
// makes room for new ones instead of growing.
func TestTableDropsStaleBeforeGrowing(t *testing.T) {
	tab := newTable()
	for k := range 10_000 {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	for k := range 10_000 {
		tab.Find(tab.Hash(k), k).stale = true
	}
	slots := tab.Slots()
	for k := 10_000; k < 20_000; k++ {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	assert.LessOrEqual(t, tab.Slots(), slots, "no growth: the stale entries made room")
	assert.Less(t, tab.Len(), 20_000, "stale entries were dropped")
	for k := 10_000; k < 20_000; k++ {
		require.NotNil(t, tab.Find(tab.Hash(k), k), "key %d", k)
	}
}

// TestTableFindAndUpdateAllocateNothing: the limiter's hot path.
func TestTableFindAndUpdateAllocateNothing(t *testing.T) {
	tab := newTable()
	for k := range 1000 {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	k := 0
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		tab.Find(tab.Hash(k), k).n++
		k = (k + 1) % 1000
	}))
}
