package waitheap

// batchLen is how many PushOrLower calls the heap collects before applying
// them together (see BenchmarkAddAfter in bench/).
const batchLen = 16

// batchFrom is the number of entries from which PushOrLower batches. Below
// it, the entries and the index fit in a core's L2 cache (24 bytes and
// about 6 bytes of index per int item), there are no misses to overlap, and
// a call applied at once costs less than one collected and applied later
// (BenchmarkPushOrLowerFill).
const batchFrom = 1 << 14

// batch holds the latest PushOrLower calls, in call order, until the heap
// applies them.
//
// Why: at millions of waiting items, each call's index probe and stores are
// cache misses. Applied one per call, they sit between two operations on the
// caller's mutex, whose locked instructions wait for them, so no two calls'
// misses overlap. Applied as a batch, hashes first, then a load of the word
// where each probe starts, then one probe after another, the batch's misses
// are outstanding together.
//
// Why it is invisible: a batch applied in call order leaves the heap exactly
// as applying each call at once would, including the order of equal ready
// times (seq is assigned when a call is applied). Everything that reads
// positions or takes entries out applies the batch first (find, push,
// PopMin), and what only asks whether and when something waits accounts for
// it without applying it (Len, MinAt), so a timer is armed for a batched
// item as it would be for an entry.
type batch[T comparable] struct {
	minAt int64 // the earliest at in the pending calls, calls[:Heap.batched]
	// calls is allocated by the first PushOrLower, so that a heap that is
	// never used does not carry it.
	calls *[batchLen]call[T]
}

// call is one pending PushOrLower call.
type call[T comparable] struct {
	at   int64
	item T
}

// PushOrLower makes item wait until at, or until its current ready time if
// that is earlier. If at is the earlier, the item counts, among equal ready
// times, as set last. In a heap of batchFrom entries or more, the change is
// batched, invisibly (see batch).
// Amortised O(log n); it allocates nothing once the heap has grown.
func (h *Heap[T]) PushOrLower(item T, at int64) {
	if h.n < batchFrom && h.batched == 0 && !h.alwaysBatch {
		h.index.prepare(h)
		h.pushOrLowerHashed(item, at, h.index.hashOf(item))
		return
	}
	b := &h.batch
	if h.batched == batchLen {
		h.apply()
	} else if b.calls == nil {
		b.calls = new([batchLen]call[T])
	}
	if h.batched == 0 || at < b.minAt {
		b.minAt = at
	}
	b.calls[h.batched] = call[T]{at: at, item: item}
	h.batched++
}

// apply applies the pending calls in order and empties the batch.
func (h *Heap[T]) apply() {
	b := &h.batch
	n := h.batched
	if n == 0 {
		return
	}
	h.batched = 0
	h.index.prepare(h)
	// Hashing every item before the first probe starts the probes' loads
	// sooner (see BenchmarkAddAfter in bench/).
	var hv [batchLen]uint64
	for k := range n {
		hv[k] = h.index.hashOf(b.calls[k].item)
	}
	h.index.touch(hv[:n])
	for k := range n {
		c := &b.calls[k]
		h.pushOrLowerHashed(c.item, c.at, hv[k])
		*c = call[T]{} // let the item be collected once it leaves the heap
	}
}
