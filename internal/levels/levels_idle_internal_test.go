package levels

import "testing"

// TestLevelIdleCountsTheKeysWithoutValues: a level's count of idle keys,
// which decides when they are dropped, is the number of its keys that hold
// no value, as values of a key come and go.
func TestLevelIdleCountsTheKeysWithoutValues(t *testing.T) {
	l := New(func(v string) string { return v[:1] })
	check := func(step string) {
		t.Helper()
		lv := l.find(1)
		want := 0
		lv.keys.each(func(kq *keyQueue[string]) {
			if kq.n == 0 {
				want++
			}
		})
		if lv.idle != want {
			t.Fatalf("after %s: idle = %d, want %d (keys without values)", step, lv.idle, want)
		}
	}
	l.Push(1, "a1")
	l.Push(1, "b1")
	check("pushing a1, b1")
	l.Push(1, "a2")
	check("pushing a2 to the busy key a")
	l.Pop()
	l.Pop()
	l.Pop()
	check("popping every value")
	l.Push(1, "a3")
	check("pushing a3 to the idle key a")
	l.Push(1, "a4")
	check("pushing a4 to the busy key a")
}
