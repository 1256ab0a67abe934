package itemstate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff/internal/itemstate"
)

// TestTableBasics holds for both builds: the hash table and the Go map.
func TestTableBasics(t *testing.T) {
	var s itemstate.Table[string]
	s.Init()
	st, _ := s.Find(s.Hash("a"), "a")
	assert.Zero(t, st, "no entry")
	s.Insert(s.Hash("a"), "a", 1)
	s.Insert(s.Hash("b"), "b", itemstate.MaxState)
	st, ref := s.Find(s.Hash("a"), "a")
	assert.Equal(t, itemstate.State(1), st)
	s.Set(ref, "a", 2)
	st, ref = s.Find(s.Hash("a"), "a")
	assert.Equal(t, itemstate.State(2), st)
	assert.Equal(t, 2, s.Len())
	s.Remove(ref, "a")
	st, _ = s.Find(s.Hash("a"), "a")
	assert.Zero(t, st)
	st, _ = s.Find(s.Hash("b"), "b")
	assert.Equal(t, itemstate.MaxState, st)
	assert.Equal(t, 1, s.Len())
}

func TestTableGivesABurstsMemoryBack(t *testing.T) {
	var s itemstate.Table[int]
	s.Init()
	for i := range 100_000 {
		s.Insert(s.Hash(i), i, 1)
	}
	assert.GreaterOrEqual(t, s.Slots(), 100_000)
	for i := range 100_000 {
		_, ref := s.Find(s.Hash(i), i)
		s.Remove(ref, i)
	}
	s.Insert(s.Hash(1), 1, 1)
	assert.LessOrEqual(t, s.Slots(), itemstate.KeepSize, "a small storage after the burst")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		s.Insert(s.Hash(2), 2, 1)
		_, ref := s.Find(s.Hash(2), 2)
		s.Remove(ref, 2)
	}), "a small table allocates nothing")
}

// BenchmarkTableInsertFindRemove is one item's life in a queue: an Add
// (Insert), a Get (Set) and a Done (Remove), with a backlog of 1,000 items.
func BenchmarkTableInsertFindRemove(b *testing.B) {
	var s itemstate.Table[int]
	s.Init()
	for i := range 1000 {
		s.Insert(s.Hash(-1-i), -1-i, 1)
	}
	b.ReportAllocs()
	for i := range b.N {
		h := s.Hash(i)
		s.Insert(h, i, 1)
		_, ref := s.Find(h, i)
		s.Set(ref, i, 2)
		_, ref = s.Find(h, i)
		s.Remove(ref, i)
	}
}
