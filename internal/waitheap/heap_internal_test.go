package waitheap

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// long reports whether the long mode is on (BACKOFF_LONG=1): CI runs the
// model tests once at full length, without -race.
func long() bool { return os.Getenv("BACKOFF_LONG") == "1" }

// checkWaitHeap fails t unless h keeps its invariants (see Heap.Check).
func checkWaitHeap[T comparable](t testing.TB, h *Heap[T]) {
	t.Helper()
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
}

// refEntry is the reference model's view of a waiting item.
type refEntry struct {
	At  int64
	seq int
}

// refMin returns the item the reference model pops first.
func refMin(ref map[int]refEntry) int {
	best, found := 0, false
	for item, e := range ref {
		if !found || e.At < ref[best].At || (e.At == ref[best].At && e.seq < ref[best].seq) {
			best, found = item, true
		}
	}
	return best
}

func TestWaitHeapMatchesReference(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			var h Heap[int]
			ref := map[int]refEntry{}
			seq := 0
			for op := 0; op < 5000; op++ {
				item := rng.IntN(300)
				at := int64(rng.IntN(50)) // many ties
				i := h.find(item)
				_, inRef := ref[item]
				require.Equal(t, inRef, i >= 0, "op %d: find(%d)", op, item)
				switch r := rng.IntN(10); {
				case r < 5 && i < 0:
					h.push(item, at)
					ref[item] = refEntry{at, seq}
					seq++
				case r < 5 && at < h.entry(i).At:
					h.lower(i, at)
					ref[item] = refEntry{at, seq}
					seq++
				case r < 7 && i >= 0:
					e := h.removeAt(i)
					require.Equal(t, item, e.Item)
					delete(ref, item)
				case r < 9 && h.Len() > 0:
					want := refMin(ref)
					e := h.PopMin()
					require.Equal(t, want, e.Item, "op %d: popMin", op)
					require.Equal(t, ref[want].At, e.At)
					delete(ref, want)
				}
				require.Equal(t, len(ref), h.Len())
				checkWaitHeap(t, &h)
			}
			for h.Len() > 0 {
				want := refMin(ref)
				require.Equal(t, want, h.PopMin().Item)
				delete(ref, want)
				checkWaitHeap(t, &h)
			}
		})
	}
}

// batchRun drives PushOrLower, which batches, with PopMin and find, which
// apply the batch, against the reference model. Between applications, Len
// and MinAt must already tell whether and when an item waits; the pops must
// come in the order of the calls' times and, among equal times, of the
// calls.
type batchRun struct {
	h           Heap[int]
	ref         map[int]refEntry
	seq         int
	fullBatches int // PushOrLower calls that found the batch full
}

// newBatchRun returns a batchRun whose heap batches at any size: the tests'
// heaps are smaller than batchFrom.
func newBatchRun() *batchRun {
	r := &batchRun{ref: map[int]refEntry{}}
	r.h.alwaysBatch = true
	return r
}

// step runs one operation: kind < 17 is PushOrLower(item, at), kind < 19 a
// PopMin if an item waits, anything else a find(item).
func (r *batchRun) step(t *testing.T, op, kind, item int, at int64) {
	h, ref := &r.h, r.ref
	switch {
	case kind < 17:
		if h.batched == batchLen {
			r.fullBatches++
		}
		h.PushOrLower(item, at)
		if e, ok := ref[item]; !ok || at < e.At {
			ref[item] = refEntry{at, r.seq}
			r.seq++
		}
	case kind < 19 && len(ref) > 0:
		want := refMin(ref)
		e := h.PopMin()
		require.Equal(t, want, e.Item, "op %d: PopMin", op)
		require.Equal(t, ref[want].At, e.At)
		delete(ref, want)
	default:
		_, inRef := ref[item]
		require.Equal(t, inRef, h.find(item) >= 0, "op %d: find(%d)", op, item)
		require.Equal(t, len(ref), h.Len(), "op %d: Len after find", op)
	}
	require.Equal(t, len(ref) > 0, h.Len() > 0, "op %d: Len", op)
	if len(ref) > 0 {
		require.Equal(t, ref[refMin(ref)].At, h.MinAt(), "op %d: MinAt", op)
	}
	if op%101 == 0 {
		checkWaitHeap(t, h)
	}
}

// drain pops every item and checks their order.
func (r *batchRun) drain(t *testing.T) {
	for len(r.ref) > 0 {
		want := refMin(r.ref)
		require.Equal(t, want, r.h.PopMin().Item)
		delete(r.ref, want)
	}
	require.Zero(t, r.h.Len())
	checkWaitHeap(t, &r.h)
}

// TestWaitHeapBatchMatchesReference runs random operations through batchRun:
// one seed of 5,000 operations by default, four of 20,000 in the long mode.
func TestWaitHeapBatchMatchesReference(t *testing.T) {
	seeds, ops := []uint64{1}, 5000
	if long() {
		seeds, ops = []uint64{1, 2, 3, 4}, 20000
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			r := newBatchRun()
			for op := range ops {
				item := rng.IntN(500)
				kind := rng.IntN(20)
				at := int64(rng.IntN(100)) // many ties
				r.step(t, op, kind, item, at)
			}
			require.Greater(t, r.fullBatches, ops/200, "batches filled up and were applied by PushOrLower")
			r.drain(t)
		})
	}
}

// FuzzWaitHeapBatch runs the fuzzer's operations through batchRun: each is
// three bytes, the kind (mod 20), the item and the ready time (mod 100).
func FuzzWaitHeapBatch(f *testing.F) {
	f.Add([]byte{0, 1, 5, 0, 2, 5, 0, 1, 3, 17, 0, 0, 19, 2, 0, 18, 0, 0})
	f.Add([]byte{0, 1, 1, 0, 2, 1, 0, 3, 1, 0, 4, 1, 0, 5, 1, 0, 6, 1, 0, 7, 1, 0, 8, 1,
		0, 9, 1, 0, 10, 1, 0, 11, 1, 0, 12, 1, 0, 13, 1, 0, 14, 1, 0, 15, 1, 0, 16, 1, 0, 17, 0, 17, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		r := newBatchRun()
		for k := 0; k+2 < len(ops); k += 3 {
			r.step(t, k/3, int(ops[k]%20), int(ops[k+1]), int64(ops[k+2]%100))
		}
		r.drain(t)
	})
}

func TestWaitHeapStringItems(t *testing.T) {
	var h Heap[string]
	for i := 0; i < 1000; i++ {
		h.push(fmt.Sprintf("ns/pod-%d", i), int64(1000-i))
	}
	checkWaitHeap(t, &h)
	i := h.find("ns/pod-500")
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "ns/pod-500", h.entry(i).Item)
	assert.Equal(t, -1, h.find("ns/pod-1000"))
	for i := 999; i >= 0; i-- {
		require.Equal(t, fmt.Sprintf("ns/pod-%d", i), h.PopMin().Item)
	}
	checkWaitHeap(t, &h)
}

func TestWaitHeapSeqWrapKeepsTieOrder(t *testing.T) {
	var h Heap[int]
	h.seq = math.MaxUint32 - 3
	for i := 0; i < 10; i++ {
		h.push(i, 7) // all tie: insertion order must survive the renumbering
	}
	checkWaitHeap(t, &h)
	assert.Less(t, h.seq, uint32(100), "renumbered")
	for i := 0; i < 10; i++ {
		require.Equal(t, i, h.PopMin().Item)
	}
}

func TestWaitHeapGivesMemoryBack(t *testing.T) {
	var h Heap[int]
	const n = 100_000
	for i := 0; i < n; i++ {
		h.push(i, int64(i))
	}
	assert.Equal(t, n/chunkLen+1, len(h.chunks))
	for h.Len() > 10 {
		h.PopMin()
	}
	checkWaitHeap(t, &h)
	assert.Len(t, h.chunks, 1, "emptied chunks are given back")
	assert.Nil(t, h.spare, "a small heap keeps no spare chunk")
	assert.LessOrEqual(t, cap(h.chunks[0]), chunkLen)
	assert.LessOrEqual(t, h.index.size(), 64, "index shrinks")
	for h.Len() > 0 {
		h.PopMin()
	}
	for i := 0; i < 3; i++ { // steady state: no growth
		h.push(i, 1)
		h.PopMin()
	}
	checkWaitHeap(t, &h)
}

// TestWaitHeapChunks: a small heap's one chunk grows by append (a heap of
// one item does not take a full chunk), and a chunk emptied at the end is
// kept as the spare, so that a heap that goes back and forth across a chunk
// boundary allocates nothing.
func TestWaitHeapChunks(t *testing.T) {
	var h Heap[int]
	h.push(0, 0)
	assert.Less(t, cap(h.chunks[0]), chunkLen, "one item does not take a full chunk")
	for i := 1; i <= chunkLen; i++ {
		h.push(i, int64(i))
	}
	require.Len(t, h.chunks, 2)
	require.True(t, h.Remove(chunkLen)) // the one entry of the second chunk
	assert.Len(t, h.chunks, 1)
	assert.NotNil(t, h.spare, "the emptied chunk is kept as the spare")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		h.push(chunkLen, chunkLen)
		h.Remove(chunkLen)
	}), "crossing the chunk boundary reuses the spare")
	checkWaitHeap(t, &h)
}

// TestWaitHeapDeepRemovals: removals at random positions of a heap several
// levels deep, where an entry moved into the hole sinks through more than
// one level; the heap property must hold after each, and the pops must come
// out in order. (The reference test's heap is three levels deep.)
func TestWaitHeapDeepRemovals(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var h Heap[int]
	const n = 20_000
	for i := range n {
		h.push(i, int64(rng.IntN(1_000_000)))
	}
	for i := 0; i < n/2; i++ {
		h.Remove(rng.IntN(n))
		if i%97 == 0 {
			checkWaitHeap(t, &h)
		}
	}
	checkWaitHeap(t, &h)
	prev := int64(-1)
	for h.Len() > 0 {
		e := h.PopMin()
		require.GreaterOrEqual(t, e.At, prev, "pops in ready-time order")
		prev = e.At
	}
}

// TestWaitHeapStartsBatchingAtBatchFrom fills a heap past batchFrom, so that
// PushOrLower applies its calls at once and then batches them, with some
// calls moving a waiting item earlier or later (a later time is ignored), and
// checks the earliest time after each call and the order of the pops.
func TestWaitHeapStartsBatchingAtBatchFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 0))
	var h Heap[int]
	ref := map[int]refEntry{}
	seq, batchedSeen := 0, false
	for op := range 2 * batchFrom { // a quarter of the calls repeat an item
		item := op
		if op%4 == 3 {
			item = rng.IntN(op) // an item that may wait already
		}
		at := int64(rng.IntN(1 << 20))
		h.PushOrLower(item, at)
		batchedSeen = batchedSeen || h.batched > 0
		if e, ok := ref[item]; !ok || at < e.At {
			ref[item] = refEntry{at, seq}
			seq++
		}
		if op%997 == 0 {
			want := ref[refMin(ref)].At
			if got := h.MinAt(); got != want {
				t.Fatalf("op %d: MinAt %d, want %d", op, got, want)
			}
		}
	}
	require.True(t, batchedSeen, "PushOrLower batched once the heap held batchFrom entries")
	require.False(t, h.Contains(-1)) // applies the batch: Len counts items again
	require.Equal(t, len(ref), h.Len())
	checkWaitHeap(t, &h)
	items := make([]int, 0, len(ref))
	for item := range ref {
		items = append(items, item)
	}
	slices.SortFunc(items, func(a, b int) int {
		return cmp.Or(cmp.Compare(ref[a].At, ref[b].At), cmp.Compare(ref[a].seq, ref[b].seq))
	})
	for k, want := range items {
		if got := h.PopMin(); got.Item != want || got.At != ref[want].At {
			t.Fatalf("pop %d: %d at %d, want %d at %d", k, got.Item, got.At, want, ref[want].At)
		}
	}
	require.Zero(t, h.Len())
}
