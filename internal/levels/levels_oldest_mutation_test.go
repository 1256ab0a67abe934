package levels_test

import (
	"testing"

	"github.com/retrykit/backoff/internal/levels"
)

// TestLevelsPopOldestAfterFairPops: with TrackOldest, values taken in turn
// by Pop are no longer the oldest: PopOldest skips them, including a key's
// second and later values, and returns the oldest value left.
func TestLevelsPopOldestAfterFairPops(t *testing.T) {
	l := levels.New(func(v string) string { return v[:1] })
	l.TrackOldest()
	for _, v := range []string{"a1", "a2", "b1", "b2"} {
		l.Push(1, v)
	}
	for _, want := range []string{"a1", "b1", "a2"} {
		if v, p := l.Pop(); v != want || p != 1 {
			t.Fatalf("Pop = %q at %d, want %q at 1 (keys in turn)", v, p, want)
		}
	}
	if v := l.PopOldest(1); v != "b2" {
		t.Fatalf("PopOldest(1) = %q, want b2, the only value left", v)
	}
	if l.Len() != 0 {
		t.Fatalf("Len = %d after taking every value, want 0", l.Len())
	}
}
