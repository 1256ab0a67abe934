//go:build go1.24

package itemstate

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff/internal/tagword"
)

// long reports whether the long mode is on (BACKOFF_LONG=1): CI runs the
// model tests once at full length, without -race.
func long() bool { return os.Getenv("BACKOFF_LONG") == "1" }

// collidingItems returns n ints whose hashes in s share their low 6 bits and
// their tag: in a table of up to 64 buckets they all start probing at one
// bucket, and every one of them matches the others' tags.
func collidingItems(s *Table[int], n int) []int {
	var items []int
	for i := 0; len(items) < n; i++ {
		if h := s.Hash(i); h&63 == 0 && h>>59 == 0b10101 {
			items = append(items, i)
		}
	}
	return items
}

// checkStates verifies s against model: every item of model has its state,
// no other item is found, and the counts match the control bytes.
func checkStates(t *testing.T, s *Table[int], model map[int]State, others []int) {
	t.Helper()
	require.Equal(t, len(model), s.Len())
	for item, st := range model {
		if got, _ := s.Find(s.Hash(item), item); got != st {
			t.Fatalf("item %d: state %d, want %d", item, got, st)
		}
	}
	for _, item := range others {
		if _, ok := model[item]; !ok {
			if got, _ := s.Find(s.Hash(item), item); got != 0 {
				t.Fatalf("item %d has no entry, found state %d", item, got)
			}
		}
	}
	tab := s.tab.Load()
	if tab == nil {
		require.Zero(t, s.used)
		return
	}
	full, notEmpty := 0, 0
	for i := range tab.buckets {
		ctrl := tab.buckets[i].ctrl
		if ctrl>>56 != tagword.Deleted {
			t.Fatalf("bucket %d: byte 7 is %#x, not deleted", i, ctrl>>56)
		}
		for j := range tagword.Slots {
			switch b := ctrl >> (8 * j) & 0xff; {
			case b&tagword.Full != 0:
				full++
				notEmpty++
			case b == tagword.Deleted:
				notEmpty++
			case b != tagword.Empty:
				t.Fatalf("bucket %d slot %d: byte %#x", i, j, b)
			}
		}
	}
	require.Equal(t, s.live, full, "live counts the full slots")
	require.Equal(t, s.used, notEmpty, "used counts the full and deleted slots")
	require.LessOrEqual(t, s.used*tagword.MaxLoadDen, len(tab.buckets)*tagword.Slots*tagword.MaxLoadNum, "at most 7/8 used")
}

// modelRun drives a Table and a map with the same operations and checks the
// table against the map: long probe sequences (half the items collide in one
// bucket with one tag), full buckets, deleted slots reused, rebuilds, and the
// storage dropped or cleared when it empties. Each operation is two bytes:
// an item (an index into the items) and the state it should get (0
// removes), whose upper bits are the aux byte it should get: a removed and
// re-inserted item's aux byte is 0 again. A third kind, when the item byte
// is 0xff, removes every item.
type modelRun struct {
	s     Table[int]
	items []int
	model map[int]State
	aux   map[int]uint8 // the items whose aux byte is not 0
}

// newModelRun returns a run over n colliding and n ordinary items.
func newModelRun(n int) *modelRun {
	r := &modelRun{model: map[int]State{}, aux: map[int]uint8{}}
	r.s.Init()
	r.items = collidingItems(&r.s, n)
	for i := range n {
		r.items = append(r.items, -1-i) // ordinary hashes
	}
	return r
}

func (r *modelRun) step(t *testing.T, step int, which, want byte) {
	s := &r.s
	if which == 0xff {
		// Empty it: the storage is kept and cleared if small, dropped if
		// large.
		for item := range r.model {
			_, ref := s.Find(s.Hash(item), item)
			s.Remove(ref, item)
			delete(r.model, item)
		}
		clear(r.aux)
		checkStates(t, s, r.model, r.items)
		return
	}
	item := r.items[int(which)%len(r.items)]
	h := s.Hash(item)
	st, ref := s.Find(h, item)
	if st != r.model[item] {
		t.Fatalf("step %d: item %d has state %d, want %d", step, item, st, r.model[item])
	}
	if st != 0 && s.Aux(ref, item) != r.aux[item] {
		t.Fatalf("step %d: item %d has aux %d, want %d", step, item, s.Aux(ref, item), r.aux[item])
	}
	aux := want >> 2
	switch w := want % (MaxState + 1); {
	case st == 0 && w != 0:
		if step%2 == 0 {
			ref = s.Insert(h, item, w)
		} else {
			var old State
			old, ref = s.FindOrInsert(h, item, w)
			require.Zero(t, old, "FindOrInsert of item %d, which has no entry", item)
		}
		require.Zero(t, s.Aux(ref, item), "a new entry's aux byte")
		s.SetAux(ref, item, aux)
		r.model[item] = w
	case st != 0 && w == 0:
		s.Remove(ref, item)
		delete(r.model, item)
		aux = 0
	case st != 0:
		if old, at := s.FindOrInsert(h, item, w); old != st || at != ref {
			t.Fatalf("step %d: FindOrInsert of item %d = %d at %v, want %d at %v (Find's)", step, item, old, at, st, ref)
		}
		s.Set(ref, item, w)
		s.SetAux(ref, item, aux)
		r.model[item] = w
	}
	if aux == 0 || r.model[item] == 0 {
		delete(r.aux, item)
	} else {
		r.aux[item] = aux
	}
	if step%7 == 0 || len(r.model) == 0 {
		checkStates(t, s, r.model, r.items)
		for item, a := range r.aux {
			_, ref := s.Find(s.Hash(item), item)
			require.Equal(t, a, s.Aux(ref, item), "item %d's aux byte", item)
		}
	}
}

// TestTableAgainstAMap runs random operations through modelRun: 5,000 by
// default, 100,000 in the long mode.
func TestTableAgainstAMap(t *testing.T) {
	steps := 5_000
	if long() {
		steps = 100_000
	}
	r := newModelRun(150)
	rng := rand.New(rand.NewPCG(5, 6))
	for step := range steps {
		which := byte(rng.IntN(len(r.items)))
		if step == steps/2 {
			which = 0xff
		}
		r.step(t, step, which, byte(rng.IntN(256)))
	}
	checkStates(t, &r.s, r.model, r.items)
}

// FuzzTable runs the fuzzer's operations through modelRun.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 1, 0, 0, 200, 3, 0xff, 0, 7, 1})
	f.Add([]byte{1, 1, 2, 1, 3, 1, 4, 1, 5, 1, 6, 1, 7, 1, 8, 1, 1, 0, 2, 0, 3, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		r := newModelRun(24) // fewer colliding items: they take long to find
		for k := 0; k+1 < len(ops); k += 2 {
			r.step(t, k/2, ops[k], ops[k+1])
		}
		checkStates(t, &r.s, r.model, r.items)
	})
}

func TestTableDropsALargeStorageWhenEmptyAndKeepsASmallOne(t *testing.T) {
	var s Table[int]
	s.Init()
	fill := func(n int) {
		for i := range n {
			s.Insert(s.Hash(i), i, 1)
		}
	}
	empty := func(n int) {
		for i := range n {
			_, ref := s.Find(s.Hash(i), i)
			s.Remove(ref, i)
		}
	}
	fill(10)
	small := s.tab.Load()
	empty(10)
	assert.Same(t, small, s.tab.Load(), "a small table is kept")
	fill(10)
	assert.Same(t, small, s.tab.Load(), "and reused")
	empty(10)

	fill(KeepSize)
	require.Greater(t, s.Slots(), KeepSize)
	empty(KeepSize)
	assert.Nil(t, s.tab.Load(), "a large table is dropped")
	assert.Zero(t, s.Slots())
	assert.Zero(t, s.used)
}

// TestTableRebuildsWhenDeletedSlotsFillIt churns through many items while few
// are live: deleted slots must not grow the table.
func TestTableRebuildsWhenDeletedSlotsFillIt(t *testing.T) {
	var s Table[int]
	s.Init()
	const live = 100
	for i := range live {
		s.Insert(s.Hash(i), i, 1)
	}
	size := s.Slots()
	for i := live; i < 100_000; i++ {
		s.Insert(s.Hash(i), i, 1)
		_, ref := s.Find(s.Hash(i-live), i-live)
		s.Remove(ref, i-live)
	}
	assert.Equal(t, live, s.Len())
	assert.LessOrEqual(t, s.Slots(), size, "the table did not grow")
}

// TestTablePrefetchDuringChanges calls Prefetch, without the lock, while
// another goroutine changes and rebuilds the table under it. Prefetch must
// never fault or read out of bounds; run it with -race, which must stay
// quiet about the one load that races on purpose and report any other.
func TestTablePrefetchDuringChanges(t *testing.T) {
	var s Table[int]
	s.Init()
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			_ = s.Prefetch(s.Hash(i))
		}
	}()
	for round := range 20 {
		mu.Lock()
		for i := range 2000 {
			s.Insert(s.Hash(i), i, 1)
		}
		for i := range 2000 {
			_, ref := s.Find(s.Hash(i), i)
			s.Remove(ref, i)
		}
		mu.Unlock()
		require.Zero(t, s.Len(), "round %d", round)
	}
	close(done)
	wg.Wait()
}
