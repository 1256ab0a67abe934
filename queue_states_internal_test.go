//go:build go1.24

package backoff

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collidingItems returns n ints whose hashes in s share their low 6 bits and
// their tag: in a table of up to 64 buckets they all start probing at one
// bucket, and every one of them matches the others' tags.
func collidingItems(s *itemStates[int], n int) []int {
	var items []int
	for i := 0; len(items) < n; i++ {
		if h := s.hash(i); h&63 == 0 && h>>59 == 0b10101 {
			items = append(items, i)
		}
	}
	return items
}

// checkStates verifies s against model: every item of model has its state,
// no other item is found, and the counts match the control bytes.
func checkStates(t *testing.T, s *itemStates[int], model map[int]uint8, others []int) {
	t.Helper()
	require.Equal(t, len(model), s.len())
	for item, st := range model {
		got, _ := s.find(s.hash(item), item)
		require.Equal(t, st, got, "item %d", item)
	}
	for _, item := range others {
		if _, ok := model[item]; !ok {
			got, _ := s.find(s.hash(item), item)
			require.Zero(t, got, "item %d has no entry", item)
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
		require.Equal(t, uint64(tagDeleted), ctrl>>56, "byte 7 stays deleted")
		for j := range bucketSlots {
			switch b := ctrl >> (8 * j) & 0xff; {
			case b&tagFull != 0:
				full++
				notEmpty++
			case b == tagDeleted:
				notEmpty++
			default:
				require.Equal(t, uint64(tagEmpty), b)
			}
		}
	}
	require.Equal(t, s.live, full, "live counts the full slots")
	require.Equal(t, s.used, notEmpty, "used counts the full and deleted slots")
	require.LessOrEqual(t, s.used*maxLoadDen, len(tab.buckets)*bucketSlots*maxLoadNum, "at most 7/8 used")
}

// TestItemStatesAgainstAMap adds, updates and removes items at random, half
// of them colliding in one bucket with one tag, and checks the table against
// a map after every step: long probe sequences, full buckets, deleted slots
// reused, rebuilds, and the table dropped or cleared when it empties.
func TestItemStatesAgainstAMap(t *testing.T) {
	var s itemStates[int]
	s.init()
	items := collidingItems(&s, 150)
	for i := range 150 {
		items = append(items, -1-i) // ordinary hashes
	}
	rng := rand.New(rand.NewPCG(5, 6))
	model := map[int]uint8{}
	for step := range 20_000 {
		item := items[rng.IntN(len(items))]
		h := s.hash(item)
		st, ref := s.find(h, item)
		require.Equal(t, model[item], st, "step %d", step)
		switch want := uint8(rng.IntN(4)); {
		case st == 0 && want != 0:
			s.insert(h, item, want)
			model[item] = want
		case st != 0 && want == 0:
			s.remove(ref, item)
			delete(model, item)
		case st != 0:
			s.set(ref, item, want)
			model[item] = want
		}
		if step%7 == 0 || len(model) == 0 {
			checkStates(t, &s, model, items)
		}
		if step == 10_000 {
			// Empty it: the table is kept and cleared if small, dropped
			// if large.
			for item := range model {
				_, ref := s.find(s.hash(item), item)
				s.remove(ref, item)
				delete(model, item)
			}
			checkStates(t, &s, model, items)
		}
	}
}

func TestItemStatesDropsALargeTableWhenEmptyAndKeepsASmallOne(t *testing.T) {
	var s itemStates[int]
	s.init()
	fill := func(n int) {
		for i := range n {
			s.insert(s.hash(i), i, queueDirty)
		}
	}
	empty := func(n int) {
		for i := range n {
			_, ref := s.find(s.hash(i), i)
			s.remove(ref, i)
		}
	}
	fill(10)
	small := s.tab.Load()
	empty(10)
	assert.Same(t, small, s.tab.Load(), "a small table is kept")
	fill(10)
	assert.Same(t, small, s.tab.Load(), "and reused")
	empty(10)

	fill(queueKeepSize)
	require.Greater(t, len(s.tab.Load().buckets)*bucketSlots, queueKeepSize)
	empty(queueKeepSize)
	assert.Nil(t, s.tab.Load(), "a large table is dropped")
	assert.Zero(t, s.used)
}

// TestItemStatesRebuildsWhenDeletedSlotsFillIt churns through many items
// while few are live: deleted slots must not grow the table.
func TestItemStatesRebuildsWhenDeletedSlotsFillIt(t *testing.T) {
	var s itemStates[int]
	s.init()
	const live = 100
	for i := range live {
		s.insert(s.hash(i), i, queueDirty)
	}
	size := len(s.tab.Load().buckets)
	for i := live; i < 100_000; i++ {
		s.insert(s.hash(i), i, queueDirty)
		_, ref := s.find(s.hash(i-live), i-live)
		s.remove(ref, i-live)
	}
	assert.Equal(t, live, s.len())
	assert.LessOrEqual(t, len(s.tab.Load().buckets), size, "the table did not grow")
}

// TestItemStatesPrefetchDuringChanges calls prefetch, without the lock, while
// another goroutine changes and rebuilds the table under it. prefetch must
// never fault or read out of bounds; run it with -race, which must stay
// quiet about the one load that races on purpose and report any other.
func TestItemStatesPrefetchDuringChanges(t *testing.T) {
	var s itemStates[int]
	s.init()
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
			_ = s.prefetch(s.hash(i))
		}
	}()
	for round := range 20 {
		mu.Lock()
		for i := range 2000 {
			s.insert(s.hash(i), i, queueDirty)
		}
		for i := range 2000 {
			_, ref := s.find(s.hash(i), i)
			s.remove(ref, i)
		}
		mu.Unlock()
		require.Zero(t, s.len(), "round %d", round)
	}
	close(done)
	wg.Wait()
}
