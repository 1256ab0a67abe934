//go:build go1.24

package keytable

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type val struct {
	n     int
	stale bool
}

func newTable() *Table[int, val] {
	t := new(Table[int, val])
	t.Init(NewSeed(), func(_ int, v *val) bool { return v.stale })
	return t
}

// checkIndex verifies the index against the storage: used counts the
// slots that are not empty, every entry has exactly one slot, with its
// number and its hash's tag, reached by Find from its home, and the
// storage's chunks hold exactly the entries. Its loops, and the model
// tests', compare plainly: testify's cost per call, under -race, would be
// most of their time.
func checkIndex(t *testing.T, tab *Table[int, val]) {
	t.Helper()
	notEmpty := 0
	slotOfEntry := make([]int, tab.live)
	for i := range slotOfEntry {
		slotOfEntry[i] = -1
	}
	for i, s := range tab.index {
		if s == 0 {
			continue
		}
		notEmpty++
		if s == tombstone {
			continue
		}
		n := int(s&numMask) - 1
		if n < 0 || n >= tab.live {
			t.Fatalf("slot %d numbers entry %d of %d", i, n, tab.live)
		}
		if slotOfEntry[n] != -1 {
			t.Fatalf("entry %d has two slots", n)
		}
		slotOfEntry[n] = i
		if tag := tagOf(tab.Hash(tab.at(n).key)); s&^numMask != tag {
			t.Fatalf("slot %d: tag %#x, want %#x", i, s&^numMask, tag)
		}
	}
	require.Equal(t, tab.used, notEmpty, "used")
	for n, i := range slotOfEntry {
		if i == -1 {
			t.Fatalf("entry %d has no slot", n)
		}
		if e := tab.at(n); tab.Find(tab.Hash(e.key), e.key) != &e.val {
			t.Fatalf("entry %d (key %d): Find does not return it", n, e.key)
		}
	}
	stored := 0
	for c, chunk := range tab.chunks {
		require.Len(t, chunk, min(max(tab.live-c*chunkLen, 0), chunkLen), "chunk %d", c)
		stored += len(chunk)
	}
	require.Equal(t, tab.live, stored)
	require.LessOrEqual(t, tab.used*maxLoadDen, len(tab.index)*maxLoadNum, "load")
	if tab.index != nil {
		require.Equal(t, uintptr(unsafe.Pointer(&tab.index[0])), tab.indexAt.Load(), "Prefetch sees the index")
		require.Equal(t, uintptr(len(tab.index)), tab.indexLen.Load(), "Prefetch sees the index")
	}
}

// TestTableIndexModel: random inserts, updates, stale marks and sweeps
// against a Go map, checking the index against the storage as it goes, over
// a key range small enough that keys come back after they were dropped.
func TestTableIndexModel(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 11))
		tab := newTable()
		model := map[int]val{}
		keyRange := 50 + rng.IntN(5000)
		for op := range 30_000 {
			k := rng.IntN(keyRange)
			h := tab.Hash(k)
			v := tab.Find(h, k)
			want, inModel := model[k]
			switch {
			case v == nil && inModel:
				if !want.stale {
					t.Fatalf("seed %d op %d: key %d lost", seed, op, k)
				}
				fallthrough
			case v == nil:
				nv := val{n: op, stale: rng.IntN(4) == 0}
				if got := *tab.Insert(h, k, nv); got != nv {
					t.Fatalf("seed %d op %d: key %d inserted as %+v, reads %+v", seed, op, k, nv, got)
				}
				model[k] = nv
			default:
				if !inModel {
					t.Fatalf("seed %d op %d: key %d found, never added", seed, op, k)
				}
				if *v != want {
					t.Fatalf("seed %d op %d: key %d is %+v, want %+v", seed, op, k, *v, want)
				}
				v.n, v.stale = op, rng.IntN(4) == 0
				model[k] = *v
			}
			if rng.IntN(50) == 0 {
				tab.Sweep(1 + rng.IntN(4))
			}
			if op%2500 == 0 {
				checkIndex(t, tab)
			}
			// Forget what the table dropped: only stale entries may go.
			if tab.Len() < len(model) {
				for mk, mv := range model {
					if tab.Find(tab.Hash(mk), mk) == nil {
						if !mv.stale {
							t.Fatalf("seed %d op %d: key %d lost", seed, op, mk)
						}
						delete(model, mk)
					}
				}
			}
			if len(model) != tab.Len() {
				t.Fatalf("seed %d op %d: %d entries, want %d", seed, op, tab.Len(), len(model))
			}
		}
		checkIndex(t, tab)
	}
}

// TestTableGrowthKeepsTheLoad: the index is never more than 7/8 used, and a
// rebuilt one is 5/8 used, so with 4-byte slots the index costs 4.6 to 6.4
// bytes per entry.
func TestTableGrowthKeepsTheLoad(t *testing.T) {
	tab := newTable()
	slots := 0
	for k := range 200_000 {
		tab.Insert(tab.Hash(k), k, val{n: k})
		if tab.used*8 > tab.Slots()*7 {
			t.Fatalf("after %d inserts: %d of %d slots used, more than 7/8", k+1, tab.used, tab.Slots())
		}
		if tab.Slots() != slots {
			slots = tab.Slots()
			if k > 100 {
				require.InDelta(t, 0.625, float64(tab.live)/float64(slots), 0.001, "rebuilt for %d entries", tab.live)
			}
		}
	}
	checkIndex(t, tab)
	room := 0
	for _, c := range tab.chunks {
		room += cap(c)
	}
	assert.Less(t, room-tab.live, chunkLen, "the storage's room beyond its entries is less than a chunk")
}

// TestTableStorageNeverMoves: adding entries never copies those stored past
// the first chunk, rebuilds included, so growth costs no copy of the
// entries.
func TestTableStorageNeverMoves(t *testing.T) {
	tab := newTable()
	for k := range 3 * chunkLen {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	p := tab.Find(tab.Hash(2*chunkLen), 2*chunkLen)
	slots := tab.Slots()
	for k := 3 * chunkLen; k < 40*chunkLen; k++ {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	require.Greater(t, tab.Slots(), slots, "the index was rebuilt")
	assert.Same(t, p, tab.Find(tab.Hash(2*chunkLen), 2*chunkLen))
}

// TestTableSmallStaysSmall: a table of a few entries allocates room for a
// few, not a chunk.
func TestTableSmallStaysSmall(t *testing.T) {
	tab := newTable()
	for k := range 3 {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	assert.Equal(t, firstChunkLen, cap(tab.chunks[0]))
	assert.Equal(t, minIndex, tab.Slots())
	for k := 3; k < 100; k++ {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	assert.Equal(t, 128, cap(tab.chunks[0]), "the first chunk doubles")
	checkIndex(t, tab)
}

// TestTableDropStaleKeepsTheOrder: the pass before a rebuild closes the
// gaps of the dropped entries in order, so the entries left stay in the
// order they were added (what makes lookups in that order sequential).
func TestTableDropStaleKeepsTheOrder(t *testing.T) {
	tab := newTable()
	for k := range 5000 {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	for k := range 5000 {
		tab.Find(tab.Hash(k), k).stale = k%3 != 0
	}
	tab.cursor = 5
	slots := tab.Slots()
	for k := 5000; tab.Slots() == slots; k++ { // until a rebuild drops the stale
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	require.Less(t, tab.Slots(), slots, "the index shrank")
	checkIndex(t, tab)
	prev := -1
	for n := range tab.live {
		k := tab.at(n).key
		require.Greater(t, k, prev, "entry %d", n)
		require.False(t, k < 5000 && k%3 != 0, "stale key %d kept", k)
		prev = k
	}
	assert.Zero(t, tab.cursor, "Sweep starts over")
}

// TestTableSweepMovesTheLastEntry: a dropped entry's place is taken by the
// last one, whose slot is renumbered; the dropped one's slot is a tombstone
// when a probe may pass it, and empty again when none can.
func TestTableSweepMovesTheLastEntry(t *testing.T) {
	tab := newTable()
	for k := range 1000 {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	tab.Find(tab.Hash(10), 10).stale = true
	tab.cursor = 10
	require.Equal(t, 1, tab.Sweep(1))
	assert.Equal(t, 999, tab.at(10).key, "the last entry took the place")
	assert.Equal(t, 999, tab.Len())
	assert.Nil(t, tab.Find(tab.Hash(10), 10))
	checkIndex(t, tab)

	// An entry alone in its run of slots leaves an empty slot; one followed
	// by another leaves a tombstone, which keeps the other reachable.
	var alone, followed int
	for n := range tab.live {
		i := tab.slotOf(tab.Hash(tab.at(n).key), n)
		if tab.index[tab.next(i)] == 0 {
			alone = tab.at(n).key
		} else {
			followed = tab.at(n).key
		}
	}
	for _, tc := range []struct {
		key  int
		want uint32
	}{{followed, tombstone}, {alone, 0}} {
		n := tab.live
		for m := range tab.live {
			if tab.at(m).key == tc.key {
				n = m
			}
		}
		i := tab.slotOf(tab.Hash(tc.key), n)
		used := tab.used
		tab.remove(n)
		assert.Equal(t, tc.want, tab.index[i], "key %d", tc.key)
		if tc.want == 0 {
			assert.Equal(t, used-1, tab.used)
		} else {
			assert.Equal(t, used, tab.used)
		}
		checkIndex(t, tab)
	}
}

// TestTableProbesWrapAround: keys whose home is the last slot spill into
// the first ones, and stay found after some of them are dropped.
func TestTableProbesWrapAround(t *testing.T) {
	tab := newTable()
	for k := range 36 { // just rebuilt to 49 slots, room for 6 more
		tab.Insert(tab.Hash(-1-k), -1-k, val{n: -1})
	}
	n := tab.Slots()
	var keys []int
	for k := 0; len(keys) < 4; k++ {
		if tab.home(tab.Hash(k)) == n-1 {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	require.Equal(t, n, tab.Slots(), "no rebuild")
	wrapped := 0
	for _, k := range keys {
		require.NotNil(t, tab.Find(tab.Hash(k), k), "key %d", k)
		for m := range tab.live {
			if tab.at(m).key == k && tab.slotOf(tab.Hash(k), m) < n-1 {
				wrapped++
			}
		}
	}
	require.GreaterOrEqual(t, wrapped, 3, "the probes went past the last slot")
	tab.Find(tab.Hash(keys[0]), keys[0]).stale = true
	tab.Find(tab.Hash(keys[2]), keys[2]).stale = true
	for tab.Sweep(100) != 0 {
	}
	checkIndex(t, tab)
	for i, k := range keys {
		assert.Equal(t, i%2 == 0, tab.Find(tab.Hash(k), k) == nil, "key %d", k)
	}
}

// TestTableMaxLen: a table at MaxLen entries refuses more with a panic
// (its owner stops before), and makes room again once entries go stale.
func TestTableMaxLen(t *testing.T) {
	tab := newTable()
	tab.maxLen = 100
	for k := range 100 {
		tab.Insert(tab.Hash(k), k, val{n: k})
	}
	assert.PanicsWithValue(t, "keytable: Insert into a table of MaxLen entries", func() {
		tab.Insert(tab.Hash(100), 100, val{})
	})
	checkIndex(t, tab)
	tab.Find(tab.Hash(5), 5).stale = true
	require.Equal(t, 1, tab.Sweep(100))
	tab.Insert(tab.Hash(100), 100, val{n: 100})
	assert.Equal(t, 100, tab.Len())
	checkIndex(t, tab)
}

// TestTableLastNumber: the entry numbered MaxLen−1 (the index's largest
// number, MaxLen) is told from a tombstone, found, renumbered and removed.
// The storage below it is left unallocated.
func TestTableLastNumber(t *testing.T) {
	require.Equal(t, 1<<24-2, MaxLen)
	tab := newTable()
	tab.rebuild(4)
	last := MaxLen - 1
	tab.chunks = make([][]entry[int, val], last>>chunkBits+1)
	tab.chunks[last>>chunkBits] = make([]entry[int, val], last&(chunkLen-1)+1, chunkLen)
	const key = 7
	h := tab.Hash(key)
	tab.live = MaxLen
	tab.place(h, last)
	*tab.at(last) = entry[int, val]{key: key, val: val{n: 1}}
	i := tab.slotOf(h, last)
	require.NotEqual(t, uint32(tombstone), tab.index[i])
	require.Equal(t, uint32(MaxLen), tab.index[i]&numMask)
	require.Same(t, &tab.at(last).val, tab.Find(h, key))
	assert.Panics(t, func() { tab.Insert(tab.Hash(8), 8, val{}) }, "full")
	tab.remove(last)
	assert.Nil(t, tab.Find(h, key))
	assert.Equal(t, MaxLen-1, tab.Len())
}

// TestTablePrefetchRacesNothing: Prefetch runs without the owner's lock
// while the table grows under it; under -race this would report a race if
// Prefetch read what Insert writes.
func TestTablePrefetchRacesNothing(t *testing.T) {
	tab := newTable()
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := range 20_000 {
			mu.Lock()
			tab.Insert(tab.Hash(k), k, val{n: k})
			mu.Unlock()
		}
	}()
	for k := range 20_000 {
		tab.Prefetch(tab.Hash(k))
	}
	wg.Wait()
	checkIndex(t, tab)
	assert.Equal(t, 20_000, tab.Len())
}

// FuzzTable drives a table with a byte string of operations (insert or
// update a key, mark it stale, sweep) against a Go map, checking the index
// against the storage after every operation.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0x81, 0x82, 0xc0, 4, 5})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		tab := newTable()
		model := map[int]val{}
		for op, b := range ops {
			k := int(b & 0x3f)
			switch b >> 6 {
			case 0, 1: // insert, or update in place
				if v := tab.Find(tab.Hash(k), k); v != nil {
					v.n = op
					model[k] = *v
				} else {
					model[k] = *tab.Insert(tab.Hash(k), k, val{n: op})
				}
			case 2: // mark stale
				if v := tab.Find(tab.Hash(k), k); v != nil {
					v.stale = true
					model[k] = *v
				}
			case 3:
				tab.Sweep(1 + k%3)
			}
			checkIndex(t, tab)
			for mk, mv := range model {
				v := tab.Find(tab.Hash(mk), mk)
				switch {
				case v == nil && !mv.stale:
					t.Fatalf("op %d: key %d lost", op, mk)
				case v == nil:
					delete(model, mk)
				case *v != mv:
					t.Fatalf("op %d: key %d: %+v, want %+v", op, mk, *v, mv)
				}
			}
			if len(model) != tab.Len() {
				t.Fatalf("op %d: %d entries, model %d", op, tab.Len(), len(model))
			}
		}
	})
}

// TestTableDropStaleAtChunkEdges: when the entries kept by a rebuild end at
// or next to a chunk's edge, the chunks kept are exactly those that hold
// them (one fewer and an entry has nowhere to live; one more and the last
// chunk is cut at a negative length).
func TestTableDropStaleAtChunkEdges(t *testing.T) {
	for _, keep := range []int{1, chunkLen - 1, chunkLen, chunkLen + 1, 2*chunkLen - 1, 2 * chunkLen} {
		tab := newTable()
		const n = 3*chunkLen + 100
		for k := range n {
			tab.Insert(tab.Hash(k), k, val{n: k})
		}
		for k := keep; k < n; k++ {
			tab.Find(tab.Hash(k), k).stale = true
		}
		tab.dropStale()
		require.Equal(t, keep, tab.Len(), "keep %d", keep)
		require.Len(t, tab.chunks, (keep+chunkLen-1)/chunkLen, "keep %d: chunks", keep)
		for c, chunk := range tab.chunks {
			require.Len(t, chunk, min(chunkLen, keep-c*chunkLen), "keep %d: chunk %d", keep, c)
			for i, e := range chunk[len(chunk):cap(chunk)] {
				// Dropped entries are cleared, so that their keys and values
				// can be collected.
				require.Zero(t, e, "keep %d: chunk %d, free place %d", keep, c, len(chunk)+i)
			}
		}
		tab.rebuild(tab.Len())
		checkIndex(t, tab)
		for k := range keep {
			require.NotNil(t, tab.Find(tab.Hash(k), k), "keep %d: key %d", keep, k)
		}
	}
}

// secondChance is a table whose Stale function keeps, as KeyedLimiter's
// does, what was used since the pass before, and what was used within the
// last floor uses (a bucket that has not refilled yet): use inserts a key
// or marks it used, and reports whether it had to insert it.
type secondChance struct {
	tab                    *Table[int, val]
	now, keepSince, passAt int
	passes                 int
}

func newSecondChance(floor int) *secondChance {
	s := &secondChance{tab: new(Table[int, val])}
	s.tab.Init(NewSeed(), func(_ int, v *val) bool { return v.n <= s.keepSince && v.n <= s.now-floor })
	return s
}

func (s *secondChance) use(k int) bool {
	s.now++
	h := s.tab.Hash(k)
	if v := s.tab.Find(h, k); v != nil {
		v.n = s.now
		return false
	}
	if s.tab.Passes() {
		s.keepSince, s.passAt = s.passAt, s.now
		s.passes++
	}
	s.tab.Insert(h, k, val{n: s.now})
	return true
}

// TestTableGrowsForKeysThatComeBack: keys used in turn, over and over, each
// dropped when a pass finds it unused since the pass before and not used
// within the last keys/ghostReach uses. The passes first drop keys that
// then come back; the ghost sees them come back, so the table grows until
// it holds every key, and from then on nothing is inserted.
func TestTableGrowsForKeysThatComeBack(t *testing.T) {
	for _, keys := range []int{300, 5000, 30_000} {
		s := newSecondChance(keys / ghostReach)
		rounds := 0
		for inserted := true; inserted; rounds++ {
			require.Less(t, rounds, 8, "%d keys: still inserting keys that came back", keys)
			inserted = false
			for k := range keys {
				if s.use(k) {
					inserted = true
				}
			}
		}
		checkIndex(t, s.tab)
		assert.Equal(t, keys, s.tab.Len())
		assert.LessOrEqual(t, rounds, 5, "%d keys: rounds until every key is held", keys)
		assert.LessOrEqual(t, s.tab.Slots(), keys*4, "%d keys: index size", keys)
	}
}

// TestTableForgetsKeysThatDoNotComeBack: a stream of new keys, each used
// once and then dropped when a pass finds it unused since the pass before.
// The ghost sees no key come back, so the table does not grow with the
// stream: it holds the keys of about two passes, passes come once per
// 0.4× the entries held, and the storage and index that a pass empties are
// used again, so that what the table allocates per Insert is a few bytes.
func TestTableForgetsKeysThatDoNotComeBack(t *testing.T) {
	const inserts = 300_000
	s := newSecondChance(0)
	for k := range 10_000 { // warm up: the ghost and the spare storage exist
		s.use(-1 - k)
	}
	most, passes := 0, s.passes
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for k := range inserts {
		require.True(t, s.use(k))
		most = max(most, s.tab.Len())
	}
	passes = s.passes - passes
	runtime.ReadMemStats(&after)
	checkIndex(t, s.tab)
	assert.Less(t, most, 200, "entries held at most")
	assert.Greater(t, passes, inserts/200, "passes")
	assert.Less(t, float64(after.TotalAlloc-before.TotalAlloc)/inserts, 1.0, "bytes allocated per Insert")
}
