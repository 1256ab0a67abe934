//go:build !go1.24

package backoff

import "testing"

// checkWaitIndex checks the map: one key per entry, at its position.
func checkWaitIndex[T comparable](t testing.TB, h *waitHeap[T]) {
	t.Helper()
	if len(h.index.pos) != h.n {
		t.Fatalf("index: %d keys for %d entries", len(h.index.pos), h.n)
	}
	for i, e := range waitEntries(h) {
		if h.index.pos[e.item] != i {
			t.Fatalf("index: item %v at %d, map says %d", e.item, i, h.index.pos[e.item])
		}
	}
}

// waitIndexSize returns 0: the size of a Go map cannot be observed.
func waitIndexSize[T comparable](*waitHeap[T]) int { return 0 }
