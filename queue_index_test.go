//go:build go1.24

package backoff

import "testing"

// checkWaitIndex checks the hash table: one slot per entry, each entry
// records its slot, and the table is at most 3/4 full.
func checkWaitIndex[T comparable](t testing.TB, h *waitHeap[T]) {
	t.Helper()
	x := &h.index
	used := 0
	for s, p := range x.slots {
		if p == 0 {
			continue
		}
		used++
		if int(p) > len(h.es) || h.es[p-1].slot != uint32(s) {
			t.Fatalf("index: slot %d points at position %d, which does not record it", s, p-1)
		}
	}
	if used != len(h.es) {
		t.Fatalf("index: %d slots used for %d entries", used, len(h.es))
	}
	if len(h.es)*4 > len(x.slots)*3 {
		t.Fatalf("index: %d entries in %d slots", len(h.es), len(x.slots))
	}
}

// waitIndexSize returns the number of slots of the index's table.
func waitIndexSize[T comparable](h *waitHeap[T]) int { return len(h.index.slots) }
