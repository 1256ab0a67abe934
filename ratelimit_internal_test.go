package backoff

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// checkFailureCounts verifies the store's invariants: the map and the slab
// agree, the recency list (when bounded) holds exactly the tracked items in
// the order of want, newest first, and the free list holds only cleared
// slots.
func checkFailureCounts(t *testing.T, s *failureCounts[int], want []int, counts map[int]int) {
	t.Helper()
	if len(s.slots) != len(counts) {
		t.Fatalf("%d items tracked, want %d", len(s.slots), len(counts))
	}
	for item, n := range counts {
		i, ok := s.slots[item]
		if !ok || s.entries[i].item != item || s.entries[i].count != n {
			t.Fatalf("item %d: tracked %v, entry %+v, want count %d", item, ok, s.entries[i], n)
		}
	}
	inUse := map[int32]bool{}
	for _, i := range s.slots {
		inUse[i] = true
	}
	free := 0
	for i := s.free; i != 0; i = s.entries[i].older {
		if inUse[i] || s.entries[i] != (failureEntry[int]{older: s.entries[i].older}) {
			t.Fatalf("free slot %d is in use (%v) or not cleared: %+v", i, inUse[i], s.entries[i])
		}
		free++
	}
	require.Equal(t, len(s.entries)-1, free+len(s.slots), "every slot but the sentinel is free or in use")
	if s.limit == 0 {
		require.Zero(t, s.newest)
		require.Zero(t, s.oldest)
		return
	}
	var order []int
	prev := int32(0)
	for i := s.newest; i != 0; i = s.entries[i].older {
		if s.entries[i].newer != prev {
			t.Fatalf("back link of slot %d is %d, want %d", i, s.entries[i].newer, prev)
		}
		order = append(order, s.entries[i].item)
		prev = i
	}
	require.Equal(t, prev, s.oldest)
	if !slices.Equal(want, order) {
		t.Fatalf("recency order, newest first: got %v, want %v", order, want)
	}
}

// TestFailureCountsModel drives the store with random operations and
// compares it with a plain model: a map of counts and a recency slice.
func TestFailureCountsModel(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{0, 1, 2, 7} {
		rng := rand.New(rand.NewPCG(1, uint64(limit)))
		var s failureCounts[int]
		s.init(limit)
		counts := map[int]int{}
		var recency []int // newest first
		touch := func(item int) {
			recency = slices.DeleteFunc(recency, func(x int) bool { return x == item })
			recency = append([]int{item}, recency...)
		}
		drop := func(item int) {
			recency = slices.DeleteFunc(recency, func(x int) bool { return x == item })
			delete(counts, item)
		}
		for range 2000 {
			item := rng.IntN(12)
			switch op := rng.IntN(10); {
			case op < 6:
				if _, ok := counts[item]; !ok && limit > 0 && len(counts) == limit {
					drop(recency[len(recency)-1])
				}
				require.Equal(t, counts[item], s.record(item))
				counts[item]++
				touch(item)
			case op < 8:
				s.forget(item)
				drop(item)
			default:
				require.Equal(t, counts[item], s.count(item))
			}
			if limit == 0 {
				recency = nil
			}
			checkFailureCounts(t, &s, recency, counts)
		}
		assert.Equal(t, len(counts), s.len())
		if limit > 0 {
			assert.LessOrEqual(t, len(s.entries)-1, limit, "slots are recycled, not appended")
		}
	}
}

func TestFailureCountsReleaseClearsItem(t *testing.T) {
	var s failureCounts[*int]
	s.init(0)
	item := new(int)
	s.record(item)
	s.forget(item)
	for _, e := range s.entries {
		assert.Nil(t, e.item, "a forgotten item is not kept reachable")
	}
}

// TestRateLimiterSteadyStateAllocations checks the claim of the doc
// comments: once the slab has grown, failing and forgetting allocate nothing.
func TestRateLimiterSteadyStateAllocations(t *testing.T) {
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "ns/item-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	l := DefaultControllerRateLimiter[string](WithMaxTrackedItems(50), WithRequeueJitter(0.1))
	for _, k := range keys {
		l.When(k)
	}
	n := 0
	allocs := testing.AllocsPerRun(1000, func() {
		k := keys[n%len(keys)]
		n++
		l.When(k)
		_ = l.NumRequeues(k)
		if n%3 == 0 {
			l.Forget(k)
		}
	})
	assert.Zero(t, allocs)
	var d time.Duration
	fs := NewItemFastSlowRateLimiter[int](time.Millisecond, time.Second, 2)
	allocs = testing.AllocsPerRun(1000, func() { d += fs.When(n % 10); n++ })
	assert.Zero(t, allocs)
}

// TestFailureCountsSaturate: an item's failure count stops at math.MaxInt
// instead of wrapping to a negative count. (Reaching it takes 2^63 failures;
// the test sets the count next to it.)
func TestFailureCountsSaturate(t *testing.T) {
	var s failureCounts[int]
	s.init(0)
	s.record(1)
	s.entries[s.slots[1]].count = math.MaxInt - 1
	assert.Equal(t, math.MaxInt-1, s.record(1), "the count before the failure")
	assert.Equal(t, math.MaxInt, s.count(1), "the last failure that counts")
	assert.Equal(t, math.MaxInt, s.record(1))
	assert.Equal(t, math.MaxInt, s.count(1), "a failure beyond math.MaxInt does not wrap the count")
}
