package backoff_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

func TestDefaultControllerRateLimiterSeed003Series(t *testing.T) {
	l := backoff.DefaultControllerRateLimiter[string](backoff.WithClock(clocktesting.NewFakeClock(epoch)))
	want := seed003Series()
	assert.Equal(t, want, whenN[string](t, l, "ns/a", len(want)))
	assert.Equal(t, len(want), l.NumRequeues("ns/a"))
	l.Forget("ns/a")
	assert.Equal(t, 0, l.NumRequeues("ns/a"))
	assert.Equal(t, 5*time.Millisecond, l.When("ns/a"), "starts over after Forget")
}

func TestDefaultControllerRateLimiterBurst(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.DefaultControllerRateLimiter[int](backoff.WithClock(clk))
	// 150 items fail at the same instant, once each.
	got := make([]time.Duration, 150)
	for item := range got {
		got[item] = l.When(item)
	}
	for i := range 100 {
		require.Equal(t, 5*time.Millisecond, got[i], "item %d: within the burst, its own 5 ms", i)
	}
	for k := 1; k <= 10; k++ {
		assert.Equal(t, time.Duration(k)*100*time.Millisecond, got[99+k], "call %d", 100+k)
	}
	// The bucket's float64 arithmetic is client-go's (x/time/rate), rounding
	// included: 41 tokens owed at 10 per second is 4.0999999999999996 s.
	assert.Equal(t, 4099999999*time.Nanosecond, got[140], "call 141")
	assert.Equal(t, 5*time.Second, got[149], "call 150")
	for item := range got {
		require.Equal(t, 1, l.NumRequeues(item))
	}

	clk.Step(5 * time.Second) // 50 tokens earned: the 50 owed are paid
	assert.Equal(t, 100*time.Millisecond, l.When(0), "the bucket is empty, not owing")
	l.Forget(1)
	clk.Step(time.Second)
	assert.Equal(t, 10*time.Millisecond, l.When(2), "the item's own delay wins once the bucket has tokens")
	assert.Equal(t, 5*time.Millisecond, l.When(1), "Forget reset the item, not the bucket")
}

func TestDefaultControllerRateLimiterOptions(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.DefaultControllerRateLimiter[int](backoff.WithClock(clk),
		backoff.WithRequeueJitter(1), backoff.WithMaxTrackedItems(50))
	seen := map[time.Duration]bool{}
	for item := range 80 {
		d := l.When(item)
		require.GreaterOrEqual(t, d, 5*time.Millisecond)
		require.LessOrEqual(t, d, 10*time.Millisecond)
		seen[d] = true
	}
	assert.Greater(t, len(seen), 60, "the jitter reaches the exponential part")
	tracked := 0
	for item := range 80 {
		if l.NumRequeues(item) > 0 {
			tracked++
		}
	}
	assert.Equal(t, 50, tracked, "the bound reaches the exponential part")
	assert.Equal(t, 0, l.NumRequeues(0), "the least recently failed items were dropped")
}

// TestDefaultControllerRateLimiterIsMaxOfParts replays one random history of
// failures, Forgets and clock steps on the default limiter and on the
// composition it documents itself to be.
func TestDefaultControllerRateLimiterIsMaxOfParts(t *testing.T) {
	for _, opts := range [][]backoff.Option{nil, {backoff.WithMaxTrackedItems(7)}} {
		clk := clocktesting.NewFakeClock(epoch)
		opts = append(opts, backoff.WithClock(clk))
		got := backoff.DefaultControllerRateLimiter[int](opts...)
		want := backoff.NewMaxOfRateLimiter[int](
			backoff.NewItemExponentialFailureRateLimiter[int](backoff.DefaultControllerBaseDelay, backoff.DefaultControllerMaxDelay, opts...),
			backoff.NewBucketRateLimiter[int](backoff.DefaultControllerQPS, backoff.DefaultControllerBurst, opts...),
		)
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range 5000 {
			item := rng.IntN(20)
			switch op := rng.IntN(20); {
			case op < 12:
				require.Equal(t, want.When(item), got.When(item), "call %d", i)
			case op < 15:
				got.Forget(item)
				want.Forget(item)
			case op < 16:
				clk.Step(time.Duration(rng.Int64N(int64(3 * time.Second))))
			case op < 17:
				clk.Step(-time.Duration(rng.Int64N(int64(time.Second))))
			default:
				require.Equal(t, want.NumRequeues(item), got.NumRequeues(item), "call %d", i)
			}
		}
	}
}

func TestDefaultControllerRateLimiterConcurrent(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.DefaultControllerRateLimiter[int](backoff.WithClock(clk))
	const goroutines, rounds = 8, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				item := g*rounds + r // every When a first failure
				if d := l.When(item); d < 5*time.Millisecond || d > 30*time.Second {
					t.Errorf("delay %v out of [5ms, 30s]", d)
				}
				_ = l.NumRequeues(item)
				l.Forget(item)
			}
		}()
	}
	waitForCall(t, "the concurrent callers to finish", wg.Wait)
	// 400 tokens taken at one instant from a bucket of 100: the next call
	// owes 301 tokens, 30.1 s at 10 per second, whatever the interleaving.
	assert.InDelta(t, float64(30100*time.Millisecond), float64(l.When(-1)), 1)
}

func TestDefaultControllerConstants(t *testing.T) {
	assert.Equal(t, 5*time.Millisecond, backoff.DefaultControllerBaseDelay)
	assert.Equal(t, 1000*time.Second, backoff.DefaultControllerMaxDelay)
	assert.InDelta(t, 10.0, backoff.DefaultControllerQPS, 0)
	assert.Equal(t, 100, backoff.DefaultControllerBurst)
}

func TestRateLimiterBadInput(t *testing.T) {
	nop := backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Second)
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"exponential negative baseDelay", func() { backoff.NewItemExponentialFailureRateLimiter[string](-1, time.Second) },
			"backoff: NewItemExponentialFailureRateLimiter: baseDelay must be positive, got -1ns"},
		{"exponential zero baseDelay", func() { backoff.NewItemExponentialFailureRateLimiter[string](0, time.Second) },
			"backoff: NewItemExponentialFailureRateLimiter: baseDelay must be positive, got 0s"},
		{"exponential negative maxDelay", func() { backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, -time.Second) },
			"backoff: NewItemExponentialFailureRateLimiter: maxDelay must not be negative, got -1s"},
		{"exponential maxDelay below baseDelay", func() { backoff.NewItemExponentialFailureRateLimiter[string](2*time.Second, time.Second) },
			"backoff: NewItemExponentialFailureRateLimiter: maxDelay must not be less than baseDelay 2s, got 1s"},
		{"exponential zero maxDelay", func() { backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 0) },
			"backoff: NewItemExponentialFailureRateLimiter: maxDelay must not be less than baseDelay 5ms, got 0s"},
		{"fast-slow negative fastDelay", func() { backoff.NewItemFastSlowRateLimiter[string](-1, time.Second, 1) },
			"backoff: NewItemFastSlowRateLimiter: fastDelay must not be negative, got -1ns"},
		{"fast-slow negative slowDelay", func() { backoff.NewItemFastSlowRateLimiter[string](0, -time.Second, 1) },
			"backoff: NewItemFastSlowRateLimiter: slowDelay must not be negative, got -1s"},
		{"fast-slow slowDelay below fastDelay", func() { backoff.NewItemFastSlowRateLimiter[string](time.Second, time.Millisecond, 1) },
			"backoff: NewItemFastSlowRateLimiter: slowDelay must not be less than fastDelay 1s, got 1ms"},
		{"fast-slow negative maxFastAttempts", func() { backoff.NewItemFastSlowRateLimiter[string](0, time.Second, -1) },
			"backoff: NewItemFastSlowRateLimiter: maxFastAttempts must not be negative, got -1"},
		{"bucket NaN limit", func() { backoff.NewBucketRateLimiter[string](math.NaN(), 1) },
			"backoff: NewBucketRateLimiter: limit must be positive, got NaN"},
		{"bucket negative limit", func() { backoff.NewBucketRateLimiter[string](-1, 1) },
			"backoff: NewBucketRateLimiter: limit must be positive, got -1"},
		{"bucket -Inf limit", func() { backoff.NewBucketRateLimiter[string](math.Inf(-1), 1) },
			"backoff: NewBucketRateLimiter: limit must be positive, got -Inf"},
		{"bucket zero limit", func() { backoff.NewBucketRateLimiter[string](0, 1) },
			"backoff: NewBucketRateLimiter: limit must be positive, got 0"},
		{"bucket zero burst", func() { backoff.NewBucketRateLimiter[string](10, 0) },
			"backoff: NewBucketRateLimiter: burst must be at least 1, got 0"},
		{"bucket negative burst", func() { backoff.NewBucketRateLimiter[string](math.Inf(1), -5) },
			"backoff: NewBucketRateLimiter: burst must be at least 1, got -5"},
		{"max-of nil first", func() { backoff.NewMaxOfRateLimiter[string](nil, nop) },
			"backoff: NewMaxOfRateLimiter: limiters[0] must not be nil, got <nil>"},
		{"max-of nil second", func() { backoff.NewMaxOfRateLimiter[string](nop, nil) },
			"backoff: NewMaxOfRateLimiter: limiters[1] must not be nil, got <nil>"},
		{"max-wait nil limiter", func() { backoff.NewWithMaxWaitRateLimiter[string](nil, time.Second) },
			"backoff: NewWithMaxWaitRateLimiter: limiter must not be nil, got <nil>"},
		{"max-wait negative maxDelay", func() { backoff.NewWithMaxWaitRateLimiter[string](nop, -time.Second) },
			"backoff: NewWithMaxWaitRateLimiter: maxDelay must not be negative, got -1s"},
		{"jitter negative", func() { backoff.WithRequeueJitter(-0.5) },
			"backoff: WithRequeueJitter: maxFactor must be a finite number ≥ 0, got -0.5"},
		{"jitter NaN", func() { backoff.WithRequeueJitter(math.NaN()) },
			"backoff: WithRequeueJitter: maxFactor must be a finite number ≥ 0, got NaN"},
		{"jitter infinite", func() { backoff.WithRequeueJitter(math.Inf(1)) },
			"backoff: WithRequeueJitter: maxFactor must be a finite number ≥ 0, got +Inf"},
		{"max tracked negative", func() { backoff.WithMaxTrackedItems(-1) },
			"backoff: WithMaxTrackedItems: n must not be negative, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.call)
		})
	}
}

func TestRateLimiterZeroValues(t *testing.T) {
	// Documented as not usable: they panic rather than misbehave quietly.
	assert.Panics(t, func() { new(backoff.ItemExponentialFailureRateLimiter[string]).When("x") })
	assert.Panics(t, func() { new(backoff.ItemFastSlowRateLimiter[string]).When("x") })
	assert.Panics(t, func() { new(backoff.BucketRateLimiter[string]).When("x") })
	assert.Panics(t, func() { new(backoff.WithMaxWaitRateLimiter[string]).When("x") })
}

func TestWithMaxTrackedItemsZeroMeansUnbounded(t *testing.T) {
	l := backoff.NewItemExponentialFailureRateLimiter[int](time.Second, time.Hour,
		backoff.WithMaxTrackedItems(1), backoff.WithMaxTrackedItems(0))
	for item := range 100 {
		l.When(item)
	}
	for item := range 100 {
		require.Equal(t, 1, l.NumRequeues(item), "the later option wins: no bound")
	}
}

// Every limiter type satisfies the interface.
var (
	_ backoff.RateLimiter[string] = (*backoff.ItemExponentialFailureRateLimiter[string])(nil)
	_ backoff.RateLimiter[string] = (*backoff.ItemFastSlowRateLimiter[string])(nil)
	_ backoff.RateLimiter[string] = (*backoff.BucketRateLimiter[string])(nil)
	_ backoff.RateLimiter[string] = (*backoff.MaxOfRateLimiter[string])(nil)
	_ backoff.RateLimiter[string] = (*backoff.WithMaxWaitRateLimiter[string])(nil)
)
