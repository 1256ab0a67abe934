//go:build go1.24

package backoff

import "testing"

// checkWaitIndex checks the hash table: one slot per entry, each entry
// records its slot, each slot has its item's tag, and the table is at most
// 3/4 full.
func checkWaitIndex[T comparable](t testing.TB, h *waitHeap[T]) {
	t.Helper()
	x := &h.index
	used := 0
	for s, p := range x.slots {
		if (x.tags[s] == 0) != (p == 0) {
			t.Fatalf("index: slot %d has tag %#x and position %d", s, x.tags[s], int(p)-1)
		}
		if p == 0 {
			continue
		}
		used++
		if int(p) > h.n || h.entry(int(p)-1).slot != uint32(s) {
			t.Fatalf("index: slot %d points at position %d, which does not record it", s, p-1)
		}
		if _, tag := x.hash(h.entry(int(p) - 1).item); tag != x.tags[s] {
			t.Fatalf("index: slot %d has tag %#x, its item hashes to %#x", s, x.tags[s], tag)
		}
	}
	if used != h.n {
		t.Fatalf("index: %d slots used for %d entries", used, h.n)
	}
	if h.n*4 > len(x.slots)*3 {
		t.Fatalf("index: %d entries in %d slots", h.n, len(x.slots))
	}
}

// waitIndexSize returns the number of slots of the index's table.
func waitIndexSize[T comparable](h *waitHeap[T]) int { return len(h.index.slots) }
