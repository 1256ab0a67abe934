package backoff

import (
	"fmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Internal tests of the storage: the automatic reclamation of expired
// entries, the shrinking, and the invariants that keep the sweep from
// skipping entries.

var sweepEpoch = time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)

// newSweepBackoff returns a Backoff(1s, 10s) on a fake clock; shards > 0
// forces the shard count, which makes the sweep's progress exact.
func newSweepBackoff(t *testing.T, shards int, opts ...Option) (*Backoff, *testingclock.FakeClock) {
	t.Helper()
	fc := testingclock.NewFakeClock(sweepEpoch)
	b := NewBackOff(time.Second, 10*time.Second, append([]Option{WithClock(fc)}, opts...)...)
	if shards > 0 {
		b.shards = make([]shard, shards)
		b.mask = uint64(shards - 1)
	}
	return b, fc
}

// checkShards fails the test unless every shard's table and entries agree,
// its cursor is in range and oldest is a lower bound of the updates.
func checkShards(t *testing.T, b *Backoff) {
	t.Helper()
	for n := range b.shards {
		s := &b.shards[n]
		s.mu.Lock()
		checkShard(t, b, &s.shardState)
		for _, e := range s.entries {
			require.LessOrEqual(t, s.oldest.Load(), int64(e.updated), "shard %d: oldest is after the update of %q", n, e.id)
		}
		s.mu.Unlock()
	}
}

// checkShard fails the test unless s's table holds exactly its entries, each
// live and knowing its position, and its cursor is in range.
func checkShard(t *testing.T, b *Backoff, s *shardState) {
	t.Helper()
	require.Equal(t, len(s.entries), s.table.Load().Len(), "entries in the table")
	require.LessOrEqual(t, s.cursor, len(s.entries))
	for i, e := range s.entries {
		require.Equal(t, i, e.pos, "position of %q", e.id)
		require.False(t, e.dead, "%q is dead", e.id)
		require.Same(t, e, s.find(b.hash(e.id), e.id), "table entry of %q", e.id)
	}
}

func TestSweepReclaimsWithoutGC(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	// One shard makes the count predictable: after the clock passes 2×max,
	// each Next on a live id deletes two expired entries.
	b, fc := newSweepBackoff(t, 1)
	for i := range 10_000 {
		b.Next(fmt.Sprint("old", i), fc.Now())
	}
	require.Equal(t, 10_000, b.size())
	fc.Step(20*time.Second + time.Nanosecond)

	b.Next("live", fc.Now())
	for i := 1; i < 6_000; i++ {
		b.Next("live", fc.Now())
		if i == 1_000 {
			// Two per Next, less a step now and then that passes "live".
			assert.InDelta(t, 10_001-2*1_001, b.size(), 4, "two expired entries per Next")
		}
	}
	assert.Equal(t, 1, b.size(), "every expired entry reclaimed")
	assert.Equal(t, time.Duration(0), b.Get("old0"))
	checkShards(t, b)
}

func TestSweepReclaimsWithDefaultShards(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	b, fc := newSweepBackoff(t, 0)
	for i := range 10_000 {
		b.Next(fmt.Sprint("old", i), fc.Now())
	}
	require.Equal(t, 10_000, b.size())
	fc.Step(20*time.Second + time.Nanosecond)

	// Keep using 1,000 other ids. Every shard that they reach is swept
	// clean; a shard none of them reaches (likely only with hundreds of
	// shards) keeps its share of the 10,000 until GC.
	for range 20 {
		for i := range 1_000 {
			b.Next(fmt.Sprint("new", i), fc.Now())
		}
	}
	assert.Less(t, b.size(), 2_000, "the expired entries were mostly reclaimed")
	assert.GreaterOrEqual(t, b.size(), 1_000)
	b.GC()
	assert.Equal(t, 1_000, b.size())
	checkShards(t, b)
}

func TestSweepBoundsMemoryUnderChurn(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	// A stream of new ids, one every 10 ms, each failing once: at any time
	// the ids of the last 2×max = 20 s (2,000 of them) are live. Without
	// reclamation the Backoff would hold all 20,000.
	const live = 2_000
	b, fc := newSweepBackoff(t, 1)
	peak := 0
	for i := range 20_000 {
		fc.Step(10 * time.Millisecond)
		b.Next(fmt.Sprint("id", i), fc.Now())
		peak = max(peak, b.size())
	}
	assert.LessOrEqual(t, peak, 2*live+2, "at most about twice the live ids")
	assert.GreaterOrEqual(t, b.size(), live)
	checkShards(t, b)
}

func TestSweepKeepsTheEntryJustUpdated(t *testing.T) {
	// With a rule under which every entry has expired, the sweep of Next
	// must still not delete the entry that Next has just written.
	always := func(time.Time, time.Time, time.Duration) bool { return true }
	b, fc := newSweepBackoff(t, 1, WithExpiry(always))
	b.Next("a", fc.Now())
	assert.Equal(t, time.Second, b.Get("a"))
	b.Next("b", fc.Now())
	assert.Equal(t, time.Second, b.Get("b"))
	assert.Equal(t, time.Duration(0), b.Get("a"), "the next Next sweeps it")
	checkShards(t, b)
}

// TestSweepFollowsTheExpiryRuleOnNextOfAKnownID: with a WithExpiry rule,
// entries can expire long before 2×max, which the lock-free path of Next
// for an id that has an entry cannot see; every Next then sweeps under the
// lock, so an entry expired by the rule is reclaimed by the next Next of
// another, known id.
func TestSweepFollowsTheExpiryRuleOnNextOfAKnownID(t *testing.T) {
	afterASecond := func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
		return eventTime.Sub(lastUpdate) > time.Second
	}
	b, fc := newSweepBackoff(t, 1, WithExpiry(afterASecond))
	b.Next("a", fc.Now())
	b.Next("b", fc.Now())
	fc.Step(2 * time.Second) // b has expired by the rule, well within 2×max
	b.Next("a", fc.Now())
	assert.Equal(t, time.Duration(0), b.Get("b"), "reclaimed by the sweep of Next(a)")
	assert.Equal(t, 1, b.size())
	checkShards(t, b)
}

func TestShrinkAfterMassRemoval(t *testing.T) {
	b, fc := newSweepBackoff(t, 1)
	const n = 4 * shrinkMin
	for i := range n {
		b.Next(fmt.Sprint("id", i), fc.Now())
	}
	s := &b.shards[0]
	require.Equal(t, n, s.peak)

	for i := range n - n/4 - 1 {
		b.Reset(fmt.Sprint("id", i))
	}
	assert.Equal(t, n, s.peak, "not yet a quarter")
	b.Reset(fmt.Sprint("id", n-n/4-1))
	assert.Equal(t, n/4, s.peak, "rebuilt at a quarter of the peak")
	assert.Equal(t, n/2, cap(s.entries))
	checkShards(t, b)
	assert.Equal(t, time.Second, b.Get(fmt.Sprint("id", n-1)), "entries survive the rebuild")

	fc.Step(time.Hour)
	b.GC()
	assert.Nil(t, s.entries, "an emptied shard drops its storage")
	assert.Nil(t, s.table.Load())
	b.Next("again", fc.Now())
	assert.Equal(t, 1, b.size())
}

// TestRemoveKeepsTheSplit drives a shard through random inserts, removals
// and sweep steps and checks, besides the index, that a round of the sweep
// never skips an entry: every entry present when a round starts is
// inspected (or removed) before the round ends.
//
// It runs 5,000 steps, 20,000 in the long mode (BACKOFF_LONG=1).
func TestRemoveKeepsTheSplit(t *testing.T) {
	t.Parallel()
	steps := 5_000
	if longTests() {
		steps = 20_000
	}
	never := func(time.Time, time.Time, time.Duration) bool { return false }
	b, _ := newSweepBackoff(t, 1, WithExpiry(never))
	s := &b.shards[0].shardState
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0
	var inspected map[string]bool // in the current round
	var owed map[string]bool      // present when the round started
	for step := range steps {
		switch op := rng.IntN(10); {
		case op < 4:
			id := fmt.Sprint("id", next)
			s.insertLocked(b, b.hash(id), &entry{id: id})
			next++
		case op < 6 && len(s.entries) > 0:
			i := rng.IntN(len(s.entries))
			delete(owed, s.entries[i].id)
			s.entries[i].kill()
			s.removeLocked(b, i)
		default:
			if len(s.entries) == 0 {
				continue
			}
			if s.cursor >= len(s.entries) {
				for id := range owed {
					require.True(t, inspected[id], "step %d: round skipped %s", step, id)
				}
				s.cursor = 0
				inspected, owed = map[string]bool{}, map[string]bool{}
				for _, e := range s.entries {
					owed[e.id] = true
				}
			}
			if inspected != nil {
				inspected[s.entries[s.cursor].id] = true
			}
			s.cursor++
		}
		if s.cursor > len(s.entries) {
			t.Fatalf("step %d: cursor %d beyond %d entries", step, s.cursor, len(s.entries))
		}
		if step%500 == 0 {
			checkShard(t, b, s) // O(n): not at every step
		}
	}
	checkShards(t, b)
}

// TestShardCount: the smallest power of two ≥ 4·GOMAXPROCS, at most
// maxShards.
func TestShardCount(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 4, 2: 8, 3: 16, 4: 16, 5: 32, 63: 256, 64: 256, 65: 256, 100: 256} {
		runtime.GOMAXPROCS(procs)
		assert.Equal(t, want, shardCount(), "GOMAXPROCS %d", procs)
	}
}

func TestSweepStandsStillWhileNothingCanExpire(t *testing.T) {
	b, fc := newSweepBackoff(t, 1) // max 10 s: entries expire 20 s after their last update
	s := &b.shards[0]
	for i := range 1_000 {
		b.Next(fmt.Sprint("id", i), fc.Now())
	}
	fc.Step(20 * time.Second) // "id0" is exactly 2×max old: not expired yet
	for range 100 {
		b.Next("id5", fc.Now())
	}
	assert.Equal(t, 0, s.cursor, "nothing can have expired: the sweep did not move")
	assert.Equal(t, 1_000, b.size())

	fc.Step(time.Nanosecond) // now every id but id5 has expired
	b.Next("id5", fc.Now())
	assert.Equal(t, 998, b.size(), "the sweep runs again: id0 and id1 reclaimed")
	for range 500 {
		b.Next("id5", fc.Now())
	}
	assert.Equal(t, 1, b.size())
	checkShards(t, b)

	// The round that reclaimed them saw only id5, updated just now: the
	// sweep stands still again until id5 may have expired.
	for range 10 {
		b.Next("id5", fc.Now())
	}
	s.mu.Lock()
	assert.Equal(t, int64(s.entries[0].updated), s.oldest.Load())
	s.mu.Unlock()
	cursor := s.cursor
	fc.Step(time.Second)
	for range 10 {
		b.Next("id5", fc.Now())
	}
	assert.Equal(t, cursor, s.cursor)
}

func TestSweepBoundsHoldWhenTheClockGoesBack(t *testing.T) {
	b, fc := newSweepBackoff(t, 1)
	b.Next("a", fc.Now())
	fc.SetTime(sweepEpoch.Add(-time.Hour)) // a FakeClock may go back
	b.Next("b", fc.Now())
	s := &b.shards[0]
	s.mu.Lock()
	for _, e := range s.entries {
		assert.LessOrEqual(t, s.oldest.Load(), int64(e.updated), "oldest is a lower bound")
		assert.LessOrEqual(t, s.roundMin.Load(), int64(e.updated), "roundMin is a lower bound")
	}
	s.mu.Unlock()
	fc.SetTime(sweepEpoch.Add(21 * time.Second))
	b.Next("c", fc.Now())
	for range 10 {
		b.Next("c", fc.Now())
	}
	assert.Equal(t, 1, b.size(), "a and b expired and were reclaimed")
}

// TestSweepNeverLosesANextWithoutTheLock races the sweep, which removes
// expired entries under the shard lock, against Next calls that restart the
// same expired entries without it. A Next that updated an entry the sweep
// had already removed would be lost: its id would end with no entry.
//
// It plays 5 rounds, 20 in the long mode (BACKOFF_LONG=1).
func TestSweepNeverLosesANextWithoutTheLock(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	rounds := 5
	if longTests() {
		rounds = 20
	}
	for round := range rounds {
		b, fc := newSweepBackoff(t, 1) // entries expire 20 s after their last update
		const n = 2_000
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprint("id", i)
			b.Next(ids[i], fc.Now())
		}
		fc.Step(21 * time.Second) // every entry has expired
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // restarts every id, mostly without the shard lock
			defer wg.Done()
			for _, id := range ids {
				b.Next(id, fc.Now())
			}
		}()
		go func() { // sweeps two entries per call, under the shard lock
			defer wg.Done()
			for range n {
				b.Next("sweeper", fc.Now())
			}
		}()
		wg.Wait()
		for _, id := range ids {
			if got := b.Attempts(id); got != 1 {
				t.Fatalf("round %d: %s lost its Next: %d attempts", round, id, got)
			}
		}
		checkShards(t, b)
	}
}

// TestADeadEntryIsNeverUpdated plays, step by step, the interleaving that the
// race above can only hit by chance: a Next finds an entry without the lock,
// the sweep removes it, and only then does the Next update it.
func TestADeadEntryIsNeverUpdated(t *testing.T) {
	b, fc := newSweepBackoff(t, 1)
	b.Next("a", fc.Now())
	b.Next("sweeper", fc.Now())
	s := &b.shards[0]
	h := b.hash("a")
	stale := s.find(h, "a") // what a Next without the lock holds
	require.NotNil(t, stale)

	fc.Step(21 * time.Second) // "a" has expired
	b.Next("sweeper", fc.Now())
	b.Next("sweeper", fc.Now())
	require.Nil(t, s.find(h, "a"), "the sweep removed a")

	now := b.now()
	assert.False(t, b.advance(stale, fc.Now(), now, now), "a dead entry refuses the update")
	assert.Equal(t, 1, stale.attempts, "and keeps its state")
	b.Next("a", fc.Now()) // the caller's slow path: a new entry
	assert.Equal(t, 1, b.Attempts("a"))
	assert.NotSame(t, stale, s.find(h, "a"))
	checkShards(t, b)
}

// longTests reports whether the long mode is on (BACKOFF_LONG=1): CI runs
// the storage's randomised tests once at full length, without -race.
func longTests() bool { return os.Getenv("BACKOFF_LONG") == "1" }
