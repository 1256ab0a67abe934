package backoff_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/internal/keytable"
)

// TestKeyedLimiterGrowthLosesNoKey: while the table grows from nothing to
// 50,000 keys, rebuilding many times, every key keeps its spent bucket.
func TestKeyedLimiterGrowthLosesNoKey(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](1, 2, backoff.WithClock(clk))
	const n = 50_000
	for i := range n {
		require.True(t, k.AllowN(fmt.Sprint("key-", i), 2))
	}
	assert.Equal(t, n, k.Len())
	for i := range n {
		require.False(t, k.Allow(fmt.Sprint("key-", i)), "key %d kept its state", i)
	}
	assert.Equal(t, n, k.Len())
}

// TestKeyedLimiterMemoryFollowsTheKeysNotFull: new keys arrive in waves of
// 5,000 and every wave refills before the next: the limiter holds about
// one wave's keys, not the 60,000 it has seen.
func TestKeyedLimiterMemoryFollowsTheKeysNotFull(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[int](10, 1, backoff.WithClock(clk))
	const wave = 5_000
	peak := 0
	for w := range 12 {
		for i := range wave {
			require.True(t, k.Allow(w*wave+i))
			peak = max(peak, k.Len())
		}
		clk.Step(100 * time.Millisecond) // every bucket is full again
	}
	assert.GreaterOrEqual(t, k.Len(), wave, "the last wave is held")
	assert.Less(t, peak, 3*wave, "refilled keys are dropped as new ones arrive")
}

// TestKeyedLimiterMaxKeysSharded: from 4096 keys up the bound is split
// over shards; it still holds in total, and keys beyond it still share one
// bucket.
func TestKeyedLimiterMaxKeysSharded(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	const maxKeys = 4096
	k := backoff.NewKeyedLimiter[int](1, 1, backoff.WithClock(clk), backoff.WithMaxKeys(maxKeys))
	admitted := 0
	for i := range 20_000 {
		if k.Allow(i) {
			admitted++
		}
		require.LessOrEqual(t, k.Len(), maxKeys)
	}
	// 20,000 keys over 16 shards: every shard reaches its share.
	assert.Equal(t, maxKeys, k.Len())
	assert.Equal(t, maxKeys+1, admitted, "the held keys, and one event for all the others")
	clk.Step(500 * time.Millisecond)
	assert.False(t, k.Allow(-1), "the shared bucket earns at one key's rate")
	for i := range 20_000 {
		require.False(t, k.Allow(i), "no key refilled yet: all are held, or share the spent bucket")
	}

	clk.Step(time.Second) // every bucket is full again
	admitted = 0
	for i := 20_000; i < 30_000; i++ {
		if k.Allow(i) {
			admitted++
		}
		require.LessOrEqual(t, k.Len(), maxKeys)
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
	clk := clocktesting.NewFakeClock(epoch)
	const maxKeys = 4096 + 7
	k := backoff.NewKeyedLimiter[int](1, 1, backoff.WithClock(clk), backoff.WithMaxKeys(maxKeys))
	for i := range 20_000 {
		k.Allow(i)
		require.LessOrEqual(t, k.Len(), maxKeys)
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

	unbounded := backoff.NewKeyedLimiter[int](1, 1, backoff.WithClock(clk), backoff.WithMaxKeys(-5))
	for i := range 10_000 {
		require.True(t, unbounded.Allow(i), "a negative bound is no bound")
	}
}

// TestKeyedLimiterAdmissionUnderContention: goroutines hammer 64 keys,
// with the clock stepped between rounds; no key is admitted more than its
// burst plus its rate times the time elapsed, and the keys refill and are
// dropped and added again along the way.
func TestKeyedLimiterAdmissionUnderContention(t *testing.T) {
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
