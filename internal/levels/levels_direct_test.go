package levels_test

import (
	"fmt"
	"testing"

	"github.com/retrykit/backoff/internal/levels"
)

// heads returns what Heads reports, as "prio:value" strings.
func heads[E any](l *levels.Levels[E]) string {
	var hs []string
	l.Heads(func(p int, v E) bool { hs = append(hs, fmt.Sprint(p, ":", v)); return true })
	return fmt.Sprint(hs)
}

// TestLevelsHeadsWithFairnessIsTheNextTurn: with fairness, the head of a
// level is the first value of the key whose turn is next, which is what Pop
// hands out.
func TestLevelsHeadsWithFairnessIsTheNextTurn(t *testing.T) {
	l := levels.New(func(v string) string { return v[:1] })
	for _, v := range []string{"a1", "a2", "b1"} {
		l.Push(2, v)
	}
	l.Push(0, "c1")
	if got := heads(l); got != "[2:a1 0:c1]" {
		t.Fatalf("Heads = %s, want [2:a1 0:c1]", got)
	}
	if v, p := l.Pop(); v != "a1" || p != 2 {
		t.Fatalf("Pop = %s at %d, want a1 at 2", v, p)
	}
	if got := heads(l); got != "[2:b1 0:c1]" {
		t.Fatalf("after a1, Heads = %s, want b's turn: [2:b1 0:c1]", got)
	}
}

// TestLevelsHeadsAndPrioritiesSkipEmptiedLevels: a level that emptied is
// kept for reuse, but neither Heads nor Priorities reports it.
func TestLevelsHeadsAndPrioritiesSkipEmptiedLevels(t *testing.T) {
	l := levels.New[int](nil)
	l.Push(5, 1)
	l.Push(-5, 2)
	l.Push(0, 3)
	if v, p := l.Pop(); v != 1 || p != 5 {
		t.Fatalf("Pop = %d at %d, want 1 at 5", v, p)
	}
	if got := heads(l); got != "[0:3 -5:2]" {
		t.Fatalf("Heads = %s, want [0:3 -5:2]", got)
	}
	var depths []string
	l.Priorities(func(p, n int) { depths = append(depths, fmt.Sprint(p, ":", n)) })
	if fmt.Sprint(depths) != "[0:1 -5:1]" {
		t.Fatalf("Priorities = %v, want [0:1 -5:1]", depths)
	}
}

// TestLevelsPopOldestCounts: PopOldest of a non-zero level leaves Len and
// OnlyZero right.
func TestLevelsPopOldestCounts(t *testing.T) {
	l := levels.New[int](nil)
	l.Push(1, 1)
	l.Push(0, 2)
	if v := l.PopOldest(1); v != 1 {
		t.Fatalf("PopOldest(1) = %d, want 1", v)
	}
	if l.Len() != 1 || !l.OnlyZero() {
		t.Fatalf("after PopOldest(1): Len %d, OnlyZero %v; want 1, true", l.Len(), l.OnlyZero())
	}
}

// TestLevelsFairnessReusesKeyFIFOs: with fairness, keys that empty and come
// back reuse their FIFOs: nothing is allocated in steady state.
func TestLevelsFairnessReusesKeyFIFOs(t *testing.T) {
	keys := []string{"a", "b", "c"}
	l := levels.New(func(v int) string { return keys[v%len(keys)] })
	for i := range 3 {
		l.Push(1, i)
	}
	for l.Len() > 0 {
		l.Pop()
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		l.Push(1, i)
		l.Push(1, i+1)
		l.Pop()
		l.Pop()
		i += 2
	}); n != 0 {
		t.Fatalf("%v allocations per two pushes and pops", n)
	}
}

// TestLevelsZeroOnlyWithoutFairness: the fast path to the priority-0 FIFO
// exists only without fairness, where that FIFO is the whole level.
func TestLevelsZeroOnlyWithoutFairness(t *testing.T) {
	if levels.New[int](nil).Zero() == nil {
		t.Fatal("Zero is nil without fairness")
	}
	if z := levels.New(func(v int) string { return "k" }).Zero(); z != nil {
		t.Fatal("Zero is not nil with fairness")
	}
}

// TestLevelsCapCountsKeys: with fairness, a level's memory is its keys'
// queues: a key's first value is held in its queue itself (1), and its
// second value takes a chunk of 16; the serving order is linked through the
// keys' queues and takes no memory of its own.
func TestLevelsCapCountsKeys(t *testing.T) {
	l := levels.New(func(v string) string { return v[:1] })
	l.Push(1, "a1")
	if got := l.Cap(); got != 1 {
		t.Fatalf("Cap = %d, want 1: key a's own slot", got)
	}
	l.Push(1, "a2")
	if got := l.Cap(); got != 1+16 {
		t.Fatalf("Cap = %d, want 17: key a's second value takes a chunk", got)
	}
}
