package waitheap

import "fmt"

// Check applies the batch, then returns an error unless the heap keeps its
// invariants: the chunk layout, the heap property (no entry comes out
// before its parent), and an index that finds every entry at its position.
// It is O(n), for tests, also the tests of packages that use the heap.
func (h *Heap[T]) Check() error {
	h.apply()
	want := (h.n + chunkLen - 1) / chunkLen
	if len(h.chunks) != want && !(h.n == 0 && len(h.chunks) == 1) {
		return fmt.Errorf("chunks: %d for %d entries", len(h.chunks), h.n)
	}
	for c, chunk := range h.chunks {
		wantLen := min(h.n-c*chunkLen, chunkLen)
		if len(chunk) != wantLen || (c > 0 && cap(chunk) != chunkLen) {
			return fmt.Errorf("chunk %d: len %d cap %d, want len %d", c, len(chunk), cap(chunk), wantLen)
		}
	}
	for i := 1; i < h.n; i++ {
		if p := (i - 1) / arity; before(h.entry(i), h.entry(p)) {
			return fmt.Errorf("heap property: entry %d (at %d, seq %d) comes before its parent %d (at %d, seq %d)",
				i, h.entry(i).At, h.entry(i).seq, p, h.entry(p).At, h.entry(p).seq)
		}
	}
	for i := 0; i < h.n; i++ {
		if got := h.find(h.entry(i).Item); got != i {
			return fmt.Errorf("index: item %v is at %d, find says %d", h.entry(i).Item, i, got)
		}
	}
	return h.index.check(h)
}
