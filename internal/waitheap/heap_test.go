package waitheap_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff/internal/waitheap"
)

func TestHeapAPI(t *testing.T) {
	var h waitheap.Heap[string]
	assert.Zero(t, h.Len())
	h.PushOrLower("b", 20)
	h.PushOrLower("a", 20) // ties: set after b
	h.PushOrLower("c", 30)
	h.PushOrLower("c", 40) // later: ignored
	assert.Equal(t, 3, h.Len(), "a small heap applies each call at once; Len counts items")
	assert.Equal(t, int64(20), h.MinAt())
	assert.False(t, h.Contains("x"))
	assert.Equal(t, 3, h.Len())
	h.PushOrLower("c", 10) // earlier: wins
	assert.Equal(t, int64(10), h.MinAt())
	assert.True(t, h.Contains("a"))
	assert.True(t, h.Remove("a"))
	assert.False(t, h.Remove("a"))
	require.NoError(t, h.Check())
	e := h.PopMin()
	assert.Equal(t, "c", e.Item)
	assert.Equal(t, int64(10), e.At)
	e = h.PopMin()
	assert.Equal(t, "b", e.Item)
	assert.Equal(t, int64(20), e.At)
	assert.Zero(t, h.Len())
}

// TestHeapContainsAndRemoveTheEarliest: the earliest item sits at heap
// position 0, which Contains and Remove must count as a position.
func TestHeapContainsAndRemoveTheEarliest(t *testing.T) {
	var h waitheap.Heap[string]
	h.PushOrLower("early", 10)
	h.PushOrLower("late", 20)
	assert.True(t, h.Contains("early"), "the earliest item waits")
	assert.True(t, h.Remove("early"), "Remove of the earliest item")
	assert.False(t, h.Contains("early"))
	assert.Equal(t, 1, h.Len())
	assert.Equal(t, int64(20), h.MinAt())
	assert.Equal(t, "late", h.PopMin().Item)
}

// BenchmarkPushOrLowerPopMin keeps 10,000 items waiting, and makes one more
// wait and takes the earliest out.
func BenchmarkPushOrLowerPopMin(b *testing.B) {
	var h waitheap.Heap[int]
	for i := range 10_000 {
		h.PushOrLower(i, int64(i))
	}
	b.ReportAllocs()
	for i := range b.N {
		h.PushOrLower(10_000+i, int64(10_000+i))
		h.PopMin()
	}
}

// TestHeapSetMovesEitherWay: Set moves a waiting item later as well as
// earlier, pushes one that does not wait, and counts it as set last among
// equal times; At reports the time.
func TestHeapSetMovesEitherWay(t *testing.T) {
	var h waitheap.Heap[string]
	h.PushOrLower("a", 10)
	h.PushOrLower("b", 20)
	h.PushOrLower("c", 30)
	h.Set("a", 25) // later, which PushOrLower would ignore
	at, ok := h.At("a")
	assert.True(t, ok)
	assert.Equal(t, int64(25), at)
	assert.Equal(t, int64(20), h.MinAt())
	h.Set("c", 5)  // earlier
	h.Set("d", 20) // new, ties with b: after it
	h.Set("b", 20) // same time, set again: after d
	require.NoError(t, h.Check())
	var order []string
	for h.Len() > 0 {
		order = append(order, h.PopMin().Item)
	}
	assert.Equal(t, []string{"c", "d", "b", "a"}, order)
	_, ok = h.At("a")
	assert.False(t, ok, "a no longer waits")
}

// BenchmarkPushOrLowerFill fills heaps of n items from empty with random
// ready times, a new heap every n calls: the path of a delaying queue's
// AddAfter, below and above the size from which PushOrLower batches.
func BenchmarkPushOrLowerFill(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			ats := make([]int64, 1<<16)
			for i := range ats {
				ats[i] = rng.Int64N(1 << 40)
			}
			b.ReportAllocs()
			h := new(waitheap.Heap[int])
			for i := range b.N {
				if i%n == 0 && i > 0 {
					h = new(waitheap.Heap[int])
				}
				h.PushOrLower(i%n, ats[i&(len(ats)-1)])
			}
		})
	}
}
