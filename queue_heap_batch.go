package backoff

// waitBatchLen is how many AddAfter calls the heap collects before applying
// them together.
//
// Measured on the VM of BENCHMARKS.md, AddAfter of distinct items into a
// queue growing to 3M waiting items (BenchmarkAddAfter/impl=ours,
// -benchtime=3000000x, 3 interleaved rounds): 385–420 ns/op applied one by
// one; with each item hashed in the probe loop, 331–348 with batches of 8,
// 321–339 with 16, 312–331 with 32; with the hashes first, as apply does,
// 300–328 with 16 and 301–306 with 64. 16 it is: larger batches gain little
// and hold more items.
const waitBatchLen = 16

// waitBatch holds the latest pushOrLower calls, in call order, until the
// heap applies them.
//
// Why: at millions of waiting items, each call's index probe and stores are
// cache misses. Applied one per AddAfter, they sit between two operations on
// the queue's mutex, whose locked instructions wait for them, so no two
// calls' misses overlap. Applied as a batch, hashes first and then one probe
// after another, the processor runs ahead into the next item's probe while
// the previous one's misses are outstanding.
//
// Why it is invisible: a batch applied in call order leaves the heap exactly
// as applying each call at once would, including the order of equal ready
// times (seq is assigned when a call is applied). Everything that reads
// positions or takes entries out applies the batch first (find, push,
// popMin), and what only asks whether and when something waits accounts for
// it without applying it (len, minAt), so the timer is armed for a batched
// item as it would be for an entry.
type waitBatch[T comparable] struct {
	n     int   // calls[:n] are pending
	minAt int64 // the earliest at in calls[:n]
	// calls is allocated by the first pushOrLower, so that a queue that
	// never delays an item does not carry it.
	calls *[waitBatchLen]waitCall[T]
}

// waitCall is one pending pushOrLower call.
type waitCall[T comparable] struct {
	at   int64
	item T
}

// pushOrLower makes item wait until at, or until its current ready time if
// that is earlier, as pushOrLowerHashed does; the change is batched. It is
// AddAfter's work on the heap.
func (h *waitHeap[T]) pushOrLower(item T, at int64) {
	b := &h.batch
	if b.n == waitBatchLen {
		h.apply()
	} else if b.calls == nil {
		b.calls = new([waitBatchLen]waitCall[T])
	}
	if b.n == 0 || at < b.minAt {
		b.minAt = at
	}
	b.calls[b.n] = waitCall[T]{at: at, item: item}
	b.n++
}

// apply applies the pending calls in order and empties the batch.
func (h *waitHeap[T]) apply() {
	b := &h.batch
	n := b.n
	if n == 0 {
		return
	}
	b.n = 0
	h.index.prepare(h)
	// Hashing every item before the first probe starts the probes' loads
	// sooner (see waitBatchLen for the figures).
	var hv [waitBatchLen]uint64
	for k := range n {
		hv[k] = h.index.hashOf(b.calls[k].item)
	}
	for k := range n {
		c := &b.calls[k]
		h.pushOrLowerHashed(c.item, c.at, hv[k])
		*c = waitCall[T]{} // let the item be collected once it leaves the heap
	}
}
