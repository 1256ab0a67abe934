package idtable

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff/internal/tagword"
)

// long reports whether the long mode is on (BACKOFF_LONG=1): CI runs the
// model tests once at full length, without -race.
func long() bool { return os.Getenv("BACKOFF_LONG") == "1" }

type testEntry struct{ id string }

func (e *testEntry) TableID() string { return e.id }

type testTable = Table[testEntry, *testEntry]

// modelRun inserts and removes ids, many with the same bucket and tag, and
// checks after every step that the table finds exactly the ids a map holds.
type modelRun struct {
	hash   func(id string) uint64
	ids    []string // "id0", "id1"...
	hashes []uint64 // of ids
	model  map[string]*testEntry
	table  *testTable
}

func newModelRun(ids int) *modelRun {
	seed := maphash.MakeSeed()
	r := &modelRun{
		// Half the ids hash to one bucket with one tag: long probe
		// sequences, full buckets and many tag matches that are not the id.
		hash: func(id string) uint64 {
			h := maphash.String(seed, id)
			if h&1 == 0 {
				h = 0xab<<56 | 0x100
			}
			return h
		},
		model: map[string]*testEntry{},
	}
	for i := range ids {
		id := fmt.Sprint("id", i)
		r.ids = append(r.ids, id)
		r.hashes = append(r.hashes, r.hash(id))
	}
	return r
}

// step adds id n if it is absent and removes it if it is present.
func (r *modelRun) step(t *testing.T, step, n int) {
	id := r.ids[n%len(r.ids)]
	if e, ok := r.model[id]; ok {
		r.table.Remove(r.hash(id), e)
		delete(r.model, id)
	} else {
		if r.table.Full() {
			r.table = r.table.Rebuilt(len(r.model)+1, r.hash)
		}
		e := &testEntry{id: id}
		r.table.Insert(r.hash(id), e)
		r.model[id] = e
	}
	require.Equal(t, len(r.model), r.table.Len(), "step %d", step)
	for i, id := range r.ids {
		if got, want := r.table.Find(r.hashes[i], id), r.model[id]; got != want {
			t.Fatalf("step %d: Find(%s) = %p, want %p", step, id, got, want)
		}
	}
	slots, used := r.table.Slots()
	require.Less(t, used, slots, "step %d: an empty slot remains", step)
}

// TestTableAgainstAMap runs random steps through modelRun: 1,000 by
// default, 20,000 in the long mode.
func TestTableAgainstAMap(t *testing.T) {
	steps := 1_000
	if long() {
		steps = 20_000
	}
	r := newModelRun(300)
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range steps {
		r.step(t, step, rng.IntN(len(r.ids)))
	}
}

// FuzzTable runs the fuzzer's steps (one byte each) through modelRun.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 1, 3, 5, 16, 17, 18})
	f.Fuzz(func(t *testing.T, steps []byte) {
		r := newModelRun(64)
		for k, n := range steps {
			r.step(t, k, int(n))
		}
	})
}

func TestTableSize(t *testing.T) {
	var null *testTable
	assert.Nil(t, null.Find(1, "x"))
	assert.True(t, null.Full())
	assert.Zero(t, null.Len())
	for _, n := range []int{1, 7, 100, 12_345} {
		slots, used := New[testEntry](n).Slots()
		assert.Zero(t, used)
		assert.GreaterOrEqual(t, slots, 2*n, "at most half full when rebuilt for %d", n)
		assert.Less(t, slots, 4*n+2*tagword.Slots, "not oversized for %d", n)
	}
}

// BenchmarkFind looks up ids in a table of 100,000.
func BenchmarkFind(b *testing.B) {
	seed := maphash.MakeSeed()
	hash := func(id string) uint64 { return maphash.String(seed, id) }
	const n = 100_000
	t := New[testEntry](n)
	ids := make([]string, n)
	hashes := make([]uint64, n)
	for i := range ids {
		ids[i] = fmt.Sprint("id", i)
		hashes[i] = hash(ids[i])
		t.Insert(hashes[i], &testEntry{id: ids[i]})
	}
	b.ReportAllocs()
	for i := range b.N {
		k := i * 7919 % n
		if t.Find(hashes[k], ids[k]) == nil {
			b.Fatal("not found")
		}
	}
}
