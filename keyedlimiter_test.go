package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/internal/keytable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
	"math"
	"sync"
	"testing"
	"time"
)

func TestKeyedLimiterKeysAreIndependent(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](10, 2, backoff.WithClock(clk))
	assert.True(t, k.Allow("a"))
	assert.True(t, k.Allow("a"))
	assert.False(t, k.Allow("a"), "a's burst is spent")
	assert.True(t, k.AllowN("b", 2), "b has its own bucket")
	assert.False(t, k.AllowN("c", 3), "more than the burst is never allowed")
	assert.True(t, k.AllowN("c", 0))
	assert.Equal(t, 2, k.Len(), "a and b are held; c took nothing")
	assert.Equal(t, 100*time.Millisecond, k.Reserve("a").Delay())
	clk.Step(200 * time.Millisecond)
	assert.True(t, k.Allow("a"), "a earns at 10/s")
	assert.False(t, k.Allow("a"))
}

// TestKeyedLimiterMatchesLimiter runs the same calls on a key and on a
// Limiter: a key's bucket is a Limiter's.
func TestKeyedLimiterMatchesLimiter(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[int](7.3, 4, backoff.WithClock(clk))
	l := backoff.NewLimiter(7.3, 4, backoff.WithClock(clk))
	steps := []time.Duration{0, 0, 0, 1, 123456789, 0, 987654321, 5 * time.Second, 0, 3}
	for i, step := range steps {
		clk.Step(step)
		require.Equal(t, l.AllowN(i%3), k.AllowN(7, i%3), "AllowN %d", i)
		rl, rk := l.Reserve(), k.Reserve(7)
		require.Equal(t, rl.OK(), rk.OK())
		require.Equal(t, rl.Delay(), rk.Delay(), "Reserve %d", i)
		if i%4 == 3 {
			rl.Cancel()
			rk.Cancel()
		}
	}
}

func TestKeyedLimiterReclaimsFullKeys(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[int](10, 1, backoff.WithClock(clk))
	for i := range 1000 {
		require.True(t, k.Allow(i))
	}
	assert.Equal(t, 1000, k.Len())
	clk.Step(100 * time.Millisecond) // every bucket is full again
	for i := 1000; i < 3000; i++ {
		require.True(t, k.Allow(i))
	}
	// Before the table grows for the new keys it drops the full ones: the
	// 2,000 new keys are not full and all stay.
	assert.GreaterOrEqual(t, k.Len(), 2000)
	assert.Less(t, k.Len(), 2500, "refilled keys are reclaimed as keys are added")
	clk.Step(100 * time.Millisecond) // all full again
	held := k.Len()
	for i := range 1000 {
		require.True(t, k.Allow(-1-i))
	}
	assert.Less(t, k.Len(), held, "the table shrinks while its keys refill, though keys are added")
	assert.True(t, k.Allow(5), "a reclaimed key starts full")
}

func TestKeyedLimiterMaxKeys(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](1, 2, backoff.WithClock(clk), backoff.WithMaxKeys(3))
	for _, key := range []string{"a", "b", "c"} {
		require.True(t, k.Allow(key))
	}
	assert.Equal(t, 3, k.Len())
	// The table is full and no bucket has refilled: new keys share one
	// bucket of burst 2, so together they get two events, not two each.
	admitted := 0
	for i := range 100 {
		if k.Allow(fmt.Sprint("new-", i)) {
			admitted++
		}
	}
	assert.Equal(t, 2, admitted, "keys beyond the bound share one bucket")
	assert.Equal(t, 3, k.Len(), "the bound holds")
	assert.True(t, k.Allow("a"), "held keys keep their own buckets")
	assert.False(t, k.Allow("a"))

	clk.Step(2 * time.Second) // every held bucket refills
	assert.True(t, k.AllowN("fresh", 2), "a refilled key makes room for a new one")
	assert.False(t, k.Allow("fresh"), "which has its own bucket")
	assert.LessOrEqual(t, k.Len(), 3)
}

func TestKeyedLimiterOwnLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](1, 1, backoff.WithClock(clk))
	k.SetKeyLimit("vip", 100, 10)
	assert.True(t, k.AllowN("vip", 10))
	assert.False(t, k.Allow("vip"))
	clk.Step(10 * time.Millisecond)
	assert.True(t, k.Allow("vip"), "vip earns at 100/s")
	assert.False(t, k.AllowN("other", 2), "others keep the limiter's burst")
	k.SetKeyLimit("free", math.Inf(1), 0)
	assert.True(t, k.AllowN("free", 1000))
	k.ClearKeyLimit("vip")
	clk.Step(time.Hour)
	assert.False(t, k.AllowN("vip", 2), "vip is back to burst 1")
	assert.True(t, k.Allow("vip"))
}

func TestKeyedLimiterBadInput(t *testing.T) {
	assert.PanicsWithValue(t, "backoff: NewKeyedLimiter: r must not be negative or NaN, got -1",
		func() { backoff.NewKeyedLimiter[string](-1, 1) })
	assert.PanicsWithValue(t, "backoff: NewKeyedLimiter: burst must not be negative, got -2",
		func() { backoff.NewKeyedLimiter[string](1, -2) })
	k := backoff.NewKeyedLimiter[string](1, 0)
	assert.False(t, k.Allow("x"), "a zero burst allows nothing")
	assert.ErrorIs(t, k.Wait(context.Background(), "x"), backoff.ErrExceedsBurst)
}

func TestKeyedLimiterWait(t *testing.T) {
	clk := newHandshakeClock()
	k := backoff.NewKeyedLimiter[string](10, 1, backoff.WithClock(clk))
	require.NoError(t, k.Wait(context.Background(), "a"))
	done := make(chan error, 1)
	go func() { done <- k.Wait(context.Background(), "a") }()
	require.Equal(t, 100*time.Millisecond, clk.nextArmed(t, nil))
	require.NoError(t, k.Wait(context.Background(), "b"), "b does not wait for a")
	clk.Step(100 * time.Millisecond)
	require.NoError(t, waitFor(t, "Wait to return", done))

	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { done <- k.Wait(ctx, "a") }()
	clk.nextArmed(t, nil)
	cancel(cause)
	err := waitFor(t, "Wait to return", done)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, cause)
	assert.False(t, clk.HasWaiters(), "no timer is left on the clock")
	// The token came back: the next reservation waits 100 ms, not 200.
	assert.Equal(t, 100*time.Millisecond, k.Reserve("a").Delay())

	dl := deadlineCtx{Context: context.Background(), deadline: clk.Now().Add(50 * time.Millisecond)}
	assert.ErrorIs(t, k.Wait(dl, "a"), backoff.ErrWaitExceedsDeadline)
}

// TestKeyedLimiterGrowthLosesNoKey: while the table grows from nothing to
// 20,000 keys (200,000 in the long mode), rebuilding many times, every key
// keeps its spent bucket.
func TestKeyedLimiterGrowthLosesNoKey(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](1, 2, backoff.WithClock(clk))
	n := 20_000
	if longTests() {
		n = 200_000
	}
	for i := range n {
		require.True(t, k.AllowN(fmt.Sprint("key-", i), 2))
	}
	assert.Equal(t, n, k.Len())
	for i := range n {
		require.False(t, k.Allow(fmt.Sprint("key-", i)), "key %d kept its state", i)
	}
	assert.Equal(t, n, k.Len())
}

// TestKeyedLimiterMemoryFollowsTheRecentKeys: new keys arrive in waves of
// 5,000 and every wave refills before the next: the limiter holds about
// one wave's keys, not the 40,000 it has seen.
func TestKeyedLimiterMemoryFollowsTheRecentKeys(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[int](10, 1, backoff.WithClock(clk))
	const wave = 5_000
	peak := 0
	for w := range 8 {
		for i := range wave {
			require.True(t, k.Allow(w*wave+i))
			if i%64 == 63 { // Len takes every part's lock: sampled, it misses at most 63 keys of a peak
				peak = max(peak, k.Len())
			}
		}
		clk.Step(100 * time.Millisecond) // every bucket is full again
	}
	assert.GreaterOrEqual(t, k.Len(), wave, "the last wave is held")
	assert.Less(t, peak, 3*wave, "refilled keys are dropped as new ones arrive")
}

// TestKeyedLimiterForgetsAStreamOfNewKeys: 50,000 new keys a second, each
// seen once, against a limit of 10/s, so that a key's bucket is full again
// 0.1 s (5,000 keys) after its call. Memory follows the keys whose buckets
// are not full, not the keys seen: the limiter never holds more than a few
// times 5,000 keys, however long the stream (60,000 keys; 300,000 in the
// long mode, BACKOFF_LONG=1).
func TestKeyedLimiterForgetsAStreamOfNewKeys(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[int](10, 1, backoff.WithClock(clk))
	const notFull = 5_000
	keys := 12 * notFull
	if longTests() {
		keys = 60 * notFull
	}
	peak := 0
	for i := range keys {
		require.True(t, k.Allow(i))
		clk.Step(time.Second / (10 * notFull))
		if i%256 == 255 {
			peak = max(peak, k.Len())
		}
	}
	assert.GreaterOrEqual(t, peak, notFull, "the keys not full yet are held")
	assert.Less(t, peak, 3*notFull, "the stream's other keys are dropped")
}

// TestKeyedLimiterKeepsKeysThatComeBack: 3,000 clients each call once a
// second, against a limit of 10/s, so every bucket has refilled by the
// key's next call. The table holds at first only about the keys whose
// buckets are not full, and sees the others come back after it dropped
// them: it grows until it holds them all (within five rounds over the
// clients, which the seeds tried all met: the first inserts every key),
// and then keeps them: a key that comes back between two passes over the
// table is not dropped, so no call re-inserts its key, and no pass or
// rebuild (which would allocate) is ever due again. Two limiters, so two
// hash seeds; twenty in the long mode (BACKOFF_LONG=1).
func TestKeyedLimiterKeepsKeysThatComeBack(t *testing.T) {
	const clients = 3_000
	seeds := 2
	if longTests() {
		seeds = 20
	}
	for range seeds {
		clk := clocktesting.NewFakeClock(epoch)
		k := backoff.NewKeyedLimiter[int](10, 1, backoff.WithClock(clk))
		round := func() {
			for i := range clients {
				if !k.Allow(i) {
					panic("a client that calls once a second is refused")
				}
				clk.Step(time.Second / clients)
			}
		}
		rounds := 0
		for k.Len() < clients {
			require.Less(t, rounds, 6, "rounds until every client is held")
			round()
			rounds++
		}
		assert.Zero(t, testing.AllocsPerRun(3, round), "no key is inserted again: nothing is rebuilt")
		assert.Equal(t, clients, k.Len())
	}
}

// TestKeyedLimiterMaxKeysSharded: from 4096 keys up the bound is split
// over shards; it still holds in total, and keys beyond it still share one
// bucket.
func TestKeyedLimiterMaxKeysSharded(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	clk := clocktesting.NewFakeClock(epoch)
	const maxKeys = 4096
	k := backoff.NewKeyedLimiter[int](1, 1, backoff.WithClock(clk), backoff.WithMaxKeys(maxKeys))
	// Plain checks in the loops: testify's, 50,000 times, were most of the
	// test's time under -race.
	admitted := 0
	for i := range 20_000 {
		if k.Allow(i) {
			admitted++
		}
		if n := k.Len(); n > maxKeys {
			t.Fatalf("key %d: %d keys held, more than %d", i, n, maxKeys)
		}
	}
	// 20,000 keys over 16 shards: every shard reaches its share.
	assert.Equal(t, maxKeys, k.Len())
	assert.Equal(t, maxKeys+1, admitted, "the held keys, and one event for all the others")
	clk.Step(500 * time.Millisecond)
	assert.False(t, k.Allow(-1), "the shared bucket earns at one key's rate")
	for i := range 20_000 {
		if k.Allow(i) {
			t.Fatalf("key %d allowed: no key refilled yet, all are held or share the spent bucket", i)
		}
	}

	clk.Step(time.Second) // every bucket is full again
	admitted = 0
	for i := 20_000; i < 30_000; i++ {
		if k.Allow(i) {
			admitted++
		}
		if n := k.Len(); n > maxKeys {
			t.Fatalf("key %d: %d keys held, more than %d", i, n, maxKeys)
		}
	}
	// Each new key at a full shard looks at two groups of held keys, all
	// refilled: the new keys take their places.
	assert.GreaterOrEqual(t, admitted, maxKeys, "refilled keys make room")
}

// TestKeyedLimiterMaxKeysShardedUneven: a bound that is not a multiple of
// the 16 shards is split with the remainder spread over the first shards, so
// that the limiter still holds exactly that many keys once every shard is at
// its share, not the multiple of 16 below it.
func TestKeyedLimiterMaxKeysShardedUneven(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	clk := clocktesting.NewFakeClock(epoch)
	const maxKeys = 4096 + 7
	k := backoff.NewKeyedLimiter[int](1, 1, backoff.WithClock(clk), backoff.WithMaxKeys(maxKeys))
	for i := range 20_000 {
		k.Allow(i)
		if n := k.Len(); n > maxKeys {
			t.Fatalf("key %d: %d keys held, more than %d", i, n, maxKeys)
		}
	}
	assert.Equal(t, maxKeys, k.Len(), "20,000 keys over 16 shards: every shard reaches its share")
}

// TestKeyedLimiterMaxKeysShardsFrom4096: a bound of exactly 4096 is split
// over the 16 parts, each enforcing its share of 256, so some of 4096 new
// keys find their part full before all are held (the chance that 4096 hashed
// keys fall exactly 256 to a part is nil); below 4096 one part holds the
// bound exactly.
func TestKeyedLimiterMaxKeysShardsFrom4096(t *testing.T) {
	if !keytable.Hashed {
		t.Skip("this build keeps one part whatever the bound")
	}
	for maxKeys, sharded := range map[int]bool{4095: false, 4096: true} {
		clk := clocktesting.NewFakeClock(epoch)
		k := backoff.NewKeyedLimiter[int](1, 1, backoff.WithClock(clk), backoff.WithMaxKeys(maxKeys))
		for i := range maxKeys {
			k.Allow(i)
		}
		if sharded {
			assert.Less(t, k.Len(), maxKeys, "WithMaxKeys(%d): split over 16 parts", maxKeys)
		} else {
			assert.Equal(t, maxKeys, k.Len(), "WithMaxKeys(%d): one part", maxKeys)
		}
	}
}

// TestKeyedLimiterSetKeyLimitOnARefilledKey: a key whose bucket has refilled
// is the same as a key never seen, whether or not its state was dropped yet:
// given a larger burst, it is full under the new burst.
func TestKeyedLimiterSetKeyLimitOnARefilledKey(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](1, 1, backoff.WithClock(clk))
	require.True(t, k.Allow("a"))
	clk.Step(time.Second) // a's bucket is full again, its state still held
	k.SetKeyLimit("a", 1, 5)
	k.SetKeyLimit("never seen", 1, 5)
	assert.True(t, k.AllowN("a", 5), "full under the new burst")
	assert.True(t, k.AllowN("never seen", 5))
}

// TestKeyedLimiterMaxKeysOne: the smallest bound.
func TestKeyedLimiterMaxKeysOne(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](1, 1, backoff.WithClock(clk), backoff.WithMaxKeys(1))
	assert.True(t, k.Allow("a"))
	assert.True(t, k.Allow("b"), "b shares the overflow bucket, which is full")
	assert.False(t, k.Allow("c"), "and now spent")
	assert.Equal(t, 1, k.Len())
	clk.Step(time.Second)
	assert.True(t, k.Allow("c"), "a refilled: c takes its place")
	assert.False(t, k.Allow("c"))
	assert.Equal(t, 1, k.Len())

	unbounded := backoff.NewKeyedLimiter[int](1, 1, backoff.WithClock(clk), backoff.WithMaxKeys(0))
	for i := range 10_000 {
		require.True(t, unbounded.Allow(i), "a bound of 0 is no bound")
	}
}

// TestKeyedLimiterAdmissionUnderContention: goroutines hammer 64 keys,
// with the clock stepped between rounds; no key is admitted more than its
// burst plus its rate times the time elapsed, and the keys refill and are
// dropped and added again along the way.
func TestKeyedLimiterAdmissionUnderContention(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(epoch)
	const rate, burst, keys = 20, 3, 64
	k := backoff.NewKeyedLimiter[int](rate, burst, backoff.WithClock(clk))
	var mu sync.Mutex
	admitted := make([]int, keys)
	elapsed := time.Duration(0)
	for round := range 50 {
		// 0, 1 or 2 tokens a round, below the burst: nothing earned is
		// lost to the cap, so every key is admitted exactly its due.
		step := time.Duration(round%3) * 50 * time.Millisecond
		clk.Step(step)
		elapsed += step
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					key := (i*7 + g*13 + round) % keys
					if k.Allow(key) {
						mu.Lock()
						admitted[key]++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
	}
	limit := burst + int(rate*elapsed.Seconds())
	for key, n := range admitted {
		assert.LessOrEqual(t, n, limit, "key %d", key)
		assert.GreaterOrEqual(t, n, limit-1, "key %d: each round spends what it earned", key)
	}
}

// TestKeyedLimiterConcurrentAllowOnOneKey: goroutines call Allow on one
// held key at once, with the clock still between rounds; each round admits
// exactly what the bucket holds, however the calls interleave: the burst
// at first, what the rate earned after a step, the burst again once the
// bucket has refilled (the common case of a key that comes back).
func TestKeyedLimiterConcurrentAllowOnOneKey(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	const rate, burst, goroutines, calls = 10, 100, 8, 50
	k := backoff.NewKeyedLimiter[string](rate, burst, backoff.WithClock(clk))
	require.True(t, k.Allow("client"))
	round := func() int {
		var admitted sync.WaitGroup
		counts := make([]int, goroutines)
		for g := range goroutines {
			admitted.Add(1)
			go func() {
				defer admitted.Done()
				for range calls {
					if k.Allow("client") {
						counts[g]++
					}
				}
			}()
		}
		admitted.Wait()
		total := 0
		for _, c := range counts {
			total += c
		}
		return total
	}
	assert.Equal(t, burst-1, round(), "the rest of the burst")
	clk.Step(time.Second)
	assert.Equal(t, rate, round(), "what one second earns")
	clk.Step(time.Hour)
	assert.Equal(t, burst, round(), "a refilled bucket: the whole burst")
	assert.Equal(t, 1, k.Len())
}

// TestKeyedLimiterAllowNEdgesOnAHeldKey: AllowN on a held key with n ≤ 0,
// n above the burst (at a rate so high that the tokens it lacks take no
// time to earn) and a key of its own rate answers as a Limiter does.
func TestKeyedLimiterAllowNEdgesOnAHeldKey(t *testing.T) {
	for _, rate := range []float64{2, 1e12} {
		clk := clocktesting.NewFakeClock(epoch)
		k := backoff.NewKeyedLimiter[string](rate, 3, backoff.WithClock(clk))
		l := backoff.NewLimiter(rate, 3, backoff.WithClock(clk))
		require.True(t, k.Allow("a"))
		require.True(t, l.Allow())
		for i, n := range []int{-1, 0, 4, 2, 1, 0, -3, 1, 4} {
			require.Equal(t, l.AllowN(n), k.AllowN("a", n), "rate %g, call %d: AllowN(%d)", rate, i, n)
		}
		clk.Step(700 * time.Millisecond)
		require.Equal(t, l.AllowN(1), k.AllowN("a", 1), "rate %g", rate)
		require.Equal(t, l.AllowN(1), k.AllowN("a", 1), "rate %g", rate)
		assert.False(t, k.AllowN("a", 4), "rate %g: never more than the burst", rate)
		k.SetKeyLimit("a", backoff.InfLimit, 0)
		assert.True(t, k.AllowN("a", 1000), "a key of its own, unlimited rate")
		k.SetKeyLimit("a", 0, 1)
		assert.False(t, k.AllowN("a", 2), "a key of its own burst")
	}
}

// TestKeyedLimiterOnTheRealClock: the default clock is read directly;
// its instants still count from the limiter's construction.
func TestKeyedLimiterOnTheRealClock(t *testing.T) {
	k := backoff.NewKeyedLimiter[string](1, 1)
	assert.True(t, k.Allow("a"))
	assert.False(t, k.Allow("a"), "one per second")
	r := k.Reserve("a")
	require.True(t, r.OK())
	assert.Greater(t, r.Delay(), time.Duration(0), "the next token is a second after the first")
	assert.LessOrEqual(t, r.Delay(), time.Second)
	r.Cancel()
}

// TestKeyedLimiterAllowAllocatesNothing: held keys, and keys coming back
// once the table is sized for them.
func TestKeyedLimiterAllowAllocatesNothing(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](1, 5, backoff.WithClock(clk))
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
		k.Allow(keys[i])
	}
	i := 0
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		k.Allow(keys[i%len(keys)])
		i++
	}))
}

// FuzzKeyedLimiter runs a random sequence of forward clock steps, AllowN,
// Reserve (cancelled at once or not), SetKeyLimit and ClearKeyLimit (which
// give a full bucket a full bucket under the new burst), and floods
// of new keys on a KeyedLimiter, and on one Limiter per key, and requires
// the same answers: dropping a refilled key, growing and rebuilding the
// table never changes what a key is told. (The clock only moves forward
// here: a key dropped while full forgets its latest instant, so after a
// backward step it may earn again an interval its Limiter would not.)
func FuzzKeyedLimiter(f *testing.F) {
	f.Add([]byte{0, 3, 0, 3, 0, 3, 5, 40, 1, 3, 0, 200, 0, 3, 2, 9, 5, 40, 0, 3})
	f.Add([]byte{3, 1, 0, 1, 1, 2, 2, 1, 4, 1, 0, 1, 5, 255, 1, 90, 0, 1, 3, 70})
	f.Add([]byte{5, 100, 5, 100, 1, 0, 5, 100, 0, 7, 2, 7, 1, 255, 0, 7})
	limits := []float64{0, 0.5, 3, 7.3, 10, 1000, backoff.InfLimit}
	f.Fuzz(func(t *testing.T, ops []byte) {
		clk := clocktesting.NewFakeClock(epoch)
		k := backoff.NewKeyedLimiter[int](10, 3, backoff.WithClock(clk))
		model := map[int]*backoff.Limiter{}
		of := func(key int) *backoff.Limiter {
			l, ok := model[key]
			if !ok {
				l = backoff.NewLimiter(10, 3, backoff.WithClock(clk))
				model[key] = l
			}
			return l
		}
		fresh := 1000 // the next key a flood adds
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, int(ops[i+1])
			key := arg % 16
			switch op {
			case 0:
				n := arg / 16 % 5
				if got, want := k.AllowN(key, n), of(key).AllowN(n); got != want {
					t.Fatalf("op %d: AllowN(%d, %d) = %v, Limiter %v", i/2, key, n, got, want)
				}
			case 1:
				clk.Step(time.Duration(arg) * 3 * time.Millisecond)
			case 2, 3:
				rk, rl := k.Reserve(key), of(key).Reserve()
				if rk.OK() != rl.OK() || rk.Delay() != rl.Delay() {
					t.Fatalf("op %d: Reserve(%d) = %v %v, Limiter %v %v", i/2, key, rk.OK(), rk.Delay(), rl.OK(), rl.Delay())
				}
				if op == 3 {
					rk.Cancel()
					rl.Cancel()
				}
			case 4:
				lim, burst := limits[arg/16%len(limits)], arg/16%5
				if arg&0x80 != 0 {
					k.ClearKeyLimit(key)
					lim, burst = 10, 3
				} else {
					k.SetKeyLimit(key, lim, burst)
				}
				if l := of(key); l.Tokens() >= float64(l.Burst()) {
					// A full bucket starts full under its new burst.
					model[key] = backoff.NewLimiter(lim, burst, backoff.WithClock(clk))
				} else {
					l.SetLimit(lim)
					l.SetBurst(burst)
				}
			case 5:
				// New keys, each taking a token: the table grows, and
				// drops the refilled keys when it does.
				for range arg % 64 {
					if !k.Allow(fresh) || !of(fresh).Allow() {
						t.Fatalf("op %d: a new key %d is refused", i/2, fresh)
					}
					fresh++
				}
			}
		}
		for key, l := range model {
			if got, want := k.AllowN(key, 1), l.AllowN(1); got != want {
				t.Fatalf("at the end: AllowN(%d, 1) = %v, Limiter %v", key, got, want)
			}
		}
	})
}
