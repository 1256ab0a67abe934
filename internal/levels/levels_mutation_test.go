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

// TestLevelsMarkStaleVoidsTheKeysTurn: a key whose only value went stale
// loses its turn: Pop hands out the current values of the other keys, in
// turn, and never an empty key's nothing.
func TestLevelsMarkStaleVoidsTheKeysTurn(t *testing.T) {
	l := levels.New(func(v string) string { return v[:1] })
	stale := map[string]bool{}
	l.SetCurrent(func(v string) bool { return !stale[v] })
	for _, v := range []string{"a1", "b1", "c1"} {
		l.Push(1, v)
	}
	stale["a1"] = true
	l.MarkStale(1, "a1")
	var got []string
	for range 2 {
		v, p := l.Pop()
		for stale[v] { // a stale value may come first: skip it
			v, p = l.Pop()
		}
		if p != 1 {
			t.Fatalf("Pop = %q at %d, want priority 1", v, p)
		}
		got = append(got, v)
	}
	if got[0] != "b1" || got[1] != "c1" {
		t.Fatalf("current values popped = %q, want [b1 c1]", got)
	}
}

// TestLevelsPopOldestOfAKeysLastValueEndsItsTurn: a key whose last value
// PopOldest takes leaves the serving order: Pop then serves the other keys.
func TestLevelsPopOldestOfAKeysLastValueEndsItsTurn(t *testing.T) {
	l := levels.New(func(v string) string { return v[:1] })
	l.TrackOldest()
	for _, v := range []string{"a1", "b1", "c1"} {
		l.Push(1, v)
	}
	if v := l.PopOldest(1); v != "a1" {
		t.Fatalf("PopOldest(1) = %q, want a1", v)
	}
	for _, want := range []string{"b1", "c1"} {
		if v, _ := l.Pop(); v != want {
			t.Fatalf("Pop = %q, want %q: a has no value left", v, want)
		}
	}
}

// TestLevelsClearThenTrackOldestAgain: after Clear, a set that tracks the
// oldest value starts afresh: the values pushed next come out oldest first.
func TestLevelsClearThenTrackOldestAgain(t *testing.T) {
	l := levels.New(func(v string) string { return v[:1] })
	l.TrackOldest()
	for _, v := range []string{"a1", "b1", "a2"} {
		l.Push(1, v)
	}
	l.Clear(func(string) {})
	for _, v := range []string{"c1", "d1", "c2"} {
		l.Push(1, v)
	}
	for _, want := range []string{"c1", "d1", "c2"} {
		if v := l.PopOldest(1); v != want {
			t.Fatalf("after Clear, PopOldest(1) = %q, want %q", v, want)
		}
	}
	if l.Len() != 0 {
		t.Fatalf("Len = %d, want 0", l.Len())
	}
}

// TestLevelsCapCountsTheArrivals: with TrackOldest, the FIFO of arrivals is
// memory of the level too, and Cap counts it.
func TestLevelsCapCountsTheArrivals(t *testing.T) {
	key := func(v string) string { return v[:1] }
	plain, tracked := levels.New(key), levels.New(key)
	tracked.TrackOldest()
	for _, v := range []string{"a1", "a2", "b1"} {
		plain.Push(1, v)
		tracked.Push(1, v)
	}
	if plain.Cap() >= tracked.Cap() {
		t.Fatalf("Cap = %d with TrackOldest, %d without: the arrivals' FIFO is not counted", tracked.Cap(), plain.Cap())
	}
}

// TestLevelsReuseEmptyLevelsAcrossManyPriorities: a set that has held
// values at 8 priorities at once, and then goes through many more
// priorities one value at a time, reuses its empty levels instead of keeping
// one for every priority it has seen.
func TestLevelsReuseEmptyLevelsAcrossManyPriorities(t *testing.T) {
	for _, key := range []func(int) string{nil, func(int) string { return "k" }} {
		l := levels.New(key)
		for p := 1; p <= 8; p++ {
			l.Push(p, p)
		}
		for l.Len() > 0 {
			l.Pop()
		}
		for p := 9; p <= 100; p++ {
			l.Push(p, p)
			if v, got := l.Pop(); v != p || got != p {
				t.Fatalf("Pop = %d at %d, want %d at %d", v, got, p, p)
			}
		}
		if n := l.NumLevels(); n > 9 {
			t.Fatalf("NumLevels() = %d after 100 priorities: empty levels are not reused", n)
		}
	}
}
