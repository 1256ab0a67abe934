package levels_test

import (
	"fmt"
	"testing"

	"github.com/retrykit/backoff/internal/levels"
)

type entry struct {
	key string
	n   int
}

// model is a slice in push order; Pop takes, from the highest priority, the
// first value (without fairness) or the next key's first value in the
// order keys became active (with fairness).
type model struct {
	vals  []pv
	fair  bool
	turns map[int][]string // per priority, the keys in serving order
}

type pv struct {
	prio int
	v    entry
}

func (m *model) push(prio int, v entry) {
	if m.fair {
		has := false
		for _, x := range m.vals {
			if x.prio == prio && x.v.key == v.key {
				has = true
			}
		}
		if !has {
			m.turns[prio] = append(m.turns[prio], v.key)
		}
	}
	m.vals = append(m.vals, pv{prio, v})
}

func (m *model) pop() (entry, int) {
	best := m.vals[0].prio
	for _, x := range m.vals {
		best = max(best, x.prio)
	}
	key := ""
	if m.fair {
		key = m.turns[best][0]
		m.turns[best] = m.turns[best][1:]
	}
	for i, x := range m.vals {
		if x.prio == best && (!m.fair || x.v.key == key) {
			m.vals = append(m.vals[:i:i], m.vals[i+1:]...)
			if m.fair {
				for _, y := range m.vals {
					if y.prio == best && y.v.key == key {
						m.turns[best] = append(m.turns[best], key)
						break
					}
				}
			}
			return x.v, best
		}
	}
	panic("unreachable")
}

func check(t *testing.T, ops []byte, fair bool) { checkKeys(t, ops, fair, 0) }

// checkKeys is check with, if keys > 0, each value's key one of keys
// distinct ones in turn: with many keys, the idle ones are dropped.
func checkKeys(t *testing.T, ops []byte, fair bool, keys int) {
	var key func(entry) string
	if fair {
		key = func(e entry) string { return e.key }
	}
	l := levels.New(key)
	m := &model{fair: fair, turns: map[int][]string{}}
	prios := [...]int{-100, -1, 0, 0, 1, 5, 7, 100, 3, 4, 6, 8, -5, -6, 9, 2}
	for i, op := range ops {
		if op&1 == 0 || len(m.vals) == 0 {
			v := entry{key: fmt.Sprint(op >> 5), n: i}
			if keys > 0 {
				v.key = fmt.Sprint(i % keys)
			}
			p := prios[(op>>1)&15]
			l.Push(p, v)
			m.push(p, v)
		} else {
			var gv entry
			var gp int
			if !fair && op&64 != 0 {
				gv, gp = l.PopPlain() // Pop, without fairness
			} else {
				gv, gp = l.Pop()
			}
			wv, wp := m.pop()
			if gv != wv || gp != wp {
				t.Fatalf("op %d: Pop() = %v, %d, want %v, %d", i, gv, gp, wv, wp)
			}
		}
		if l.Len() != len(m.vals) {
			t.Fatalf("op %d: Len() = %d, want %d", i, l.Len(), len(m.vals))
		}
	}
	for len(m.vals) > 0 {
		gv, gp := l.Pop()
		wv, wp := m.pop()
		if gv != wv || gp != wp {
			t.Fatalf("drain: Pop() = %v, %d, want %v, %d", gv, gp, wv, wp)
		}
	}
	if l.NumLevels() > 16 {
		t.Fatalf("NumLevels() = %d: empty levels are not given back", l.NumLevels())
	}
}

func TestLevelsAgainstModel(t *testing.T) {
	for _, fair := range []bool{false, true} {
		ops := make([]byte, 5000)
		x := uint32(1)
		for i := range ops {
			x = x*1664525 + 1013904223
			ops[i] = byte(x >> 24)
		}
		check(t, ops, fair)
	}
}

func TestLevelsManyKeysAgainstModel(t *testing.T) {
	ops := make([]byte, 20000)
	x := uint32(7)
	for i := range ops {
		x = x*1664525 + 1013904223
		ops[i] = byte(x >> 24)
		if i > 10000 {
			ops[i] |= 1 // mostly pops: keys go idle and are dropped
		}
	}
	checkKeys(t, ops, true, 3000)
}

// TestLevelsDropIdleKeys goes through more keys than a level keeps idle:
// the order stays right and most of their memory goes back.
func TestLevelsDropIdleKeys(t *testing.T) {
	l := levels.New(func(e entry) string { return e.key })
	const n = 3000
	for round := range 2 {
		for i := range n {
			l.Push(0, entry{fmt.Sprint(i), i})
		}
		peak := l.Cap()
		for i := range n {
			if v, _ := l.Pop(); v.n != i {
				t.Fatalf("round %d: Pop() = %v, want value %d", round, v, i)
			}
		}
		if l.Cap() > peak/2 {
			t.Fatalf("round %d: Cap() = %d after draining, %d at the peak", round, l.Cap(), peak)
		}
	}
}

// TestLevelsStaleValuesCostNoTurn marks values stale: Pop returns each
// stale value it meets without using up its key's turn, and a key whose
// values are all stale leaves the order, to rejoin it at the end.
func TestLevelsStaleValuesCostNoTurn(t *testing.T) {
	stale := map[int]bool{}
	l := levels.New(func(e entry) string { return e.key })
	l.SetCurrent(func(e entry) bool { return !stale[e.n] })
	for i, k := range []string{"a", "b", "a", "c", "b"} {
		l.Push(0, entry{k, i})
	}
	stale[0] = true
	l.MarkStale(0, entry{"a", 0}) // a keeps 2: its turn stays
	stale[1] = true
	l.MarkStale(0, entry{"b", 1}) // b keeps 4: its turn stays
	stale[3] = true
	l.MarkStale(0, entry{"c", 3}) // c has none: its turn goes
	l.Push(0, entry{"c", 5})      // c joins the end again
	var got []int
	for l.Len() > 0 {
		v, _ := l.Pop()
		got = append(got, v.n)
	}
	// a: stale 0 then 2; b: stale 1 then 4; c's old turn is void, so the
	// stale 3 is popped in its new turn, before 5.
	if fmt.Sprint(got) != "[0 2 1 4 3 5]" {
		t.Fatalf("Pop order = %v", got)
	}
}

func TestLevelsPopOldestWithFairness(t *testing.T) {
	l := levels.New(func(e entry) string { return e.key })
	l.TrackOldest()
	for i, k := range []string{"a", "a", "b", "a", "c"} {
		l.Push(1, entry{k, i})
	}
	var got []int
	v, _ := l.Pop() // a's turn: 0
	got = append(got, v.n)
	var head entry
	l.Heads(func(_ int, next entry) bool { head = next; return true })
	got = append(got, head.n, l.PopOldest(1).n) // the oldest: a's 1, out of turn
	for l.Len() > 0 {
		v, _ := l.Pop()
		got = append(got, v.n)
	}
	// After a's turn the order is b, c, a; taking a's 1 out of turn keeps
	// it: b 2, c 4, a 3.
	if fmt.Sprint(got) != "[0 1 1 2 4 3]" {
		t.Fatalf("got %v", got)
	}
	l.Push(1, entry{"x", 9})
	var cleared []int
	l.Clear(func(e entry) { cleared = append(cleared, e.n) })
	if l.Len() != 0 || fmt.Sprint(cleared) != "[9]" {
		t.Fatalf("Clear: Len %d, cleared %v", l.Len(), cleared)
	}
}

func TestLevelsHeadsAndPopOldest(t *testing.T) {
	l := levels.New[int](nil)
	l.Push(-1, 1)
	l.Push(0, 2)
	l.Push(3, 3)
	l.Push(0, 4)
	var heads []string
	l.Heads(func(p, v int) bool { heads = append(heads, fmt.Sprint(p, ":", v)); return true })
	if fmt.Sprint(heads) != "[3:3 0:2 -1:1]" {
		t.Fatalf("Heads = %v", heads)
	}
	if v := l.PopOldest(-1); v != 1 {
		t.Fatalf("PopOldest(-1) = %d", v)
	}
	var depths []string
	l.Priorities(func(p, n int) { depths = append(depths, fmt.Sprint(p, ":", n)) })
	if fmt.Sprint(depths) != "[3:1 0:2]" {
		t.Fatalf("Priorities = %v", depths)
	}
}

func TestLevelsAllocateNothingInSteadyState(t *testing.T) {
	l := levels.New[int](nil)
	for i := range 64 {
		l.Push(-100*(i%2), i)
	}
	for l.Len() > 0 {
		l.Pop()
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		l.Push(-100*(i%2), i)
		l.Pop()
		i++
	}); n != 0 {
		t.Fatalf("%v allocations per push and pop", n)
	}
}

func FuzzLevels(f *testing.F) {
	f.Add([]byte{0, 2, 4, 1, 1, 1}, false)
	f.Add([]byte{0, 34, 66, 1, 1, 1, 98, 1}, true)
	f.Fuzz(func(t *testing.T, ops []byte, fair bool) { check(t, ops, fair) })
}
