package backoff

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// checkWaitHeap applies h's batch, then fails t unless h keeps its
// invariants: the heap property (no entry comes out before its parent), and
// an index that finds every entry at its position.
func checkWaitHeap[T comparable](t testing.TB, h *waitHeap[T]) {
	t.Helper()
	h.apply()
	checkWaitChunks(t, h)
	for i := 1; i < h.len(); i++ {
		if p := (i - 1) / waitArity; waitBefore(h.entry(i), h.entry(p)) {
			t.Fatalf("heap property: entry %d (at %d, seq %d) comes before its parent %d (at %d, seq %d)",
				i, h.entry(i).at, h.entry(i).seq, p, h.entry(p).at, h.entry(p).seq)
		}
	}
	for i := 0; i < h.len(); i++ {
		if got := h.find(h.entry(i).item); got != i {
			t.Fatalf("index: item %v is at %d, find says %d", h.entry(i).item, i, got)
		}
	}
	checkWaitIndex(t, h)
}

// checkWaitChunks checks the chunk layout: every chunk full but the last,
// which is not empty, and every chunk but the first allocated at full size.
func checkWaitChunks[T comparable](t testing.TB, h *waitHeap[T]) {
	t.Helper()
	want := (h.n + waitChunkLen - 1) / waitChunkLen
	if len(h.chunks) != want && !(h.n == 0 && len(h.chunks) == 1) {
		t.Fatalf("chunks: %d for %d entries", len(h.chunks), h.n)
	}
	for c, chunk := range h.chunks {
		wantLen := min(h.n-c*waitChunkLen, waitChunkLen)
		if len(chunk) != wantLen || (c > 0 && cap(chunk) != waitChunkLen) {
			t.Fatalf("chunk %d: len %d cap %d, want len %d", c, len(chunk), cap(chunk), wantLen)
		}
	}
}

// waitEntries returns a copy of h's entries, in heap order.
func waitEntries[T comparable](h *waitHeap[T]) []waitEntry[T] {
	var es []waitEntry[T]
	for _, chunk := range h.chunks {
		es = append(es, chunk...)
	}
	return es
}

// refEntry is the reference model's view of a waiting item.
type refEntry struct {
	at  int64
	seq int
}

// refMin returns the item the reference model pops first.
func refMin(ref map[int]refEntry) int {
	best, found := 0, false
	for item, e := range ref {
		if !found || e.at < ref[best].at || (e.at == ref[best].at && e.seq < ref[best].seq) {
			best, found = item, true
		}
	}
	return best
}

func TestWaitHeapMatchesReference(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			var h waitHeap[int]
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
				case r < 5 && at < h.entry(i).at:
					h.lower(i, at)
					ref[item] = refEntry{at, seq}
					seq++
				case r < 7 && i >= 0:
					e := h.removeAt(i)
					require.Equal(t, item, e.item)
					delete(ref, item)
				case r < 9 && h.len() > 0:
					want := refMin(ref)
					e := h.popMin()
					require.Equal(t, want, e.item, "op %d: popMin", op)
					require.Equal(t, ref[want].at, e.at)
					delete(ref, want)
				}
				require.Equal(t, len(ref), h.len())
				checkWaitHeap(t, &h)
			}
			for h.len() > 0 {
				want := refMin(ref)
				require.Equal(t, want, h.popMin().item)
				delete(ref, want)
				checkWaitHeap(t, &h)
			}
		})
	}
}

// TestWaitHeapBatchMatchesReference drives pushOrLower, which batches, with
// popMin and find, which apply the batch, against the reference model. Between
// applications, len and minAt must already tell whether and when an item
// waits; the pops must come in the order of the calls' times and, among equal
// times, of the calls.
func TestWaitHeapBatchMatchesReference(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			var h waitHeap[int]
			ref := map[int]refEntry{}
			seq, fullBatches := 0, 0
			for op := 0; op < 20000; op++ {
				item := rng.IntN(500)
				switch r := rng.IntN(20); {
				case r < 17:
					at := int64(rng.IntN(100)) // many ties
					if h.batch.n == waitBatchLen {
						fullBatches++
					}
					h.pushOrLower(item, at)
					if e, ok := ref[item]; !ok || at < e.at {
						ref[item] = refEntry{at, seq}
						seq++
					}
				case r < 19 && len(ref) > 0:
					want := refMin(ref)
					e := h.popMin()
					require.Equal(t, want, e.item, "op %d: popMin", op)
					require.Equal(t, ref[want].at, e.at)
					delete(ref, want)
				default:
					_, inRef := ref[item]
					require.Equal(t, inRef, h.find(item) >= 0, "op %d: find(%d)", op, item)
					require.Equal(t, len(ref), h.len(), "op %d: len after find", op)
				}
				require.Equal(t, len(ref) > 0, h.len() > 0, "op %d: len", op)
				if len(ref) > 0 {
					require.Equal(t, ref[refMin(ref)].at, h.minAt(), "op %d: minAt", op)
				}
				if op%101 == 0 {
					checkWaitHeap(t, &h)
				}
			}
			require.Greater(t, fullBatches, 100, "batches filled up and were applied by pushOrLower")
			for len(ref) > 0 {
				want := refMin(ref)
				require.Equal(t, want, h.popMin().item)
				delete(ref, want)
			}
			require.Zero(t, h.len())
			checkWaitHeap(t, &h)
		})
	}
}

func TestWaitHeapStringItems(t *testing.T) {
	var h waitHeap[string]
	for i := 0; i < 1000; i++ {
		h.push(fmt.Sprintf("ns/pod-%d", i), int64(1000-i))
	}
	checkWaitHeap(t, &h)
	i := h.find("ns/pod-500")
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "ns/pod-500", h.entry(i).item)
	assert.Equal(t, -1, h.find("ns/pod-1000"))
	for i := 999; i >= 0; i-- {
		require.Equal(t, fmt.Sprintf("ns/pod-%d", i), h.popMin().item)
	}
	checkWaitHeap(t, &h)
}

func TestWaitHeapSeqWrapKeepsTieOrder(t *testing.T) {
	var h waitHeap[int]
	h.seq = math.MaxUint32 - 3
	for i := 0; i < 10; i++ {
		h.push(i, 7) // all tie: insertion order must survive the renumbering
	}
	checkWaitHeap(t, &h)
	assert.Less(t, h.seq, uint32(100), "renumbered")
	for i := 0; i < 10; i++ {
		require.Equal(t, i, h.popMin().item)
	}
}

func TestWaitHeapGivesMemoryBack(t *testing.T) {
	var h waitHeap[int]
	const n = 100_000
	for i := 0; i < n; i++ {
		h.push(i, int64(i))
	}
	assert.Equal(t, n/waitChunkLen+1, len(h.chunks))
	for h.len() > 10 {
		h.popMin()
	}
	checkWaitHeap(t, &h)
	assert.Len(t, h.chunks, 1, "emptied chunks are given back")
	assert.Nil(t, h.spare, "a small heap keeps no spare chunk")
	assert.LessOrEqual(t, cap(h.chunks[0]), waitChunkLen)
	assert.LessOrEqual(t, waitIndexSize(&h), 64, "index shrinks")
	for h.len() > 0 {
		h.popMin()
	}
	for i := 0; i < 3; i++ { // steady state: no growth
		h.push(i, 1)
		h.popMin()
	}
	checkWaitHeap(t, &h)
}

func TestQueueTimerInvariant(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	q := NewDelayingQueue[int](WithClock(fc))
	rng := rand.New(rand.NewPCG(9, 9))
	for op := 0; op < 3000; op++ {
		item := rng.IntN(20)
		switch rng.IntN(6) {
		case 0, 1:
			q.AddAfter(item, time.Duration(rng.IntN(100)-10)*time.Millisecond)
		case 2:
			q.Add(item)
		case 3:
			fc.Step(time.Duration(rng.IntN(30)) * time.Millisecond)
		case 4:
			if q.Len() > 0 {
				it, _ := q.Get()
				q.Done(it)
			}
		case 5:
			q.NextReadyAt()
		}
		q.mu.Lock()
		if !q.armed {
			// Only a fired timer whose goroutine has not run yet may leave
			// items waiting without an armed timer; promote as Len would.
			q.promoteLocked(q.nowLocked())
		}
		checkWaitHeap(t, &q.waiting)
		require.Equal(t, q.waiting.len() > 0, q.armed, "op %d: armed iff items wait", op)
		if q.armed {
			require.Equal(t, q.waiting.minAt(), q.armedAt, "op %d: armed for the earliest", op)
		}
		require.LessOrEqual(t, fc.Waiters(), 1)
		q.mu.Unlock()
	}
	q.ShutDown()
	assert.Equal(t, 0, fc.Waiters())
}

// FuzzAddAfter adds up to four items with arbitrary delays (negative, zero,
// huge), steps the clock once, and checks that nothing panics, that the
// heap property holds throughout, and that exactly the items whose ready time
// the clock has reached are queued: ready times saturate instead of
// overflowing.
func FuzzAddAfter(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), int64(0), uint8(0), int64(0))
	f.Add(int64(-1), int64(1), int64(math.MaxInt64), int64(math.MinInt64), uint8(0b11100100), int64(math.MaxInt64))
	f.Add(int64(5e6), int64(10e6), int64(1e6), int64(7e6), uint8(0b00010001), int64(7e6))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64-1), int64(1), int64(0), uint8(0b01000100), int64(math.MaxInt64-1))
	f.Fuzz(func(t *testing.T, d0, d1, d2, d3 int64, which uint8, step int64) {
		fc := testingclock.NewFakeClock(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
		q := NewDelayingQueue[int](WithClock(fc))
		defer q.ShutDown()

		nonPositive := map[int]bool{}
		minPositive := map[int]int64{}
		for k, d := range []int64{d0, d1, d2, d3} {
			item := int(which>>(2*k)) & 3
			q.AddAfter(item, time.Duration(d))
			if d <= 0 {
				nonPositive[item] = true
			} else if m, ok := minPositive[item]; !ok || d < m {
				minPositive[item] = d
			}
			q.mu.Lock()
			checkWaitHeap(t, &q.waiting)
			for _, e := range waitEntries(&q.waiting) {
				require.Positive(t, e.at, "ready time of a positive delay")
			}
			q.mu.Unlock()
		}
		step = max(step, 0)
		fc.Step(time.Duration(step))
		want := 0
		for item := 0; item < 4; item++ {
			m, waits := minPositive[item]
			if nonPositive[item] || (waits && m <= step) {
				want++
			}
		}
		require.Equal(t, want, q.Len(), "queued after a step of %d", step)
		q.mu.Lock()
		checkWaitHeap(t, &q.waiting)
		for _, e := range waitEntries(&q.waiting) {
			require.Greater(t, e.at, step, "a due item still waits")
		}
		q.mu.Unlock()
	})
}

func TestQueueGivesMemoryBack(t *testing.T) {
	q := NewQueue[int]()
	for i := 0; i < 100_000; i++ {
		q.Add(i)
	}
	assert.Equal(t, 100_000, q.states.len())
	burst := q.states.storage()
	for q.Len() > 0 {
		item, _ := q.Get()
		q.Done(item)
	}
	assert.Zero(t, q.states.len())
	assert.Same(t, q.ready.head, q.ready.tail, "the FIFO is down to one chunk")
	assert.Nil(t, q.ready.head.next)
	assert.LessOrEqual(t, len(q.ready.spare.buf), readyMaxChunk, "and at most one spare chunk")

	q.Add(1) // a small queue keeps its map: no allocation per cycle
	item, _ := q.Get()
	q.Done(item)
	assert.NotEqual(t, burst, q.states.storage(), "the table of the burst was dropped")
	m := q.states.storage()
	q.Add(2)
	item, _ = q.Get()
	q.Done(item)
	assert.Equal(t, m, q.states.storage(), "the same table")
}
