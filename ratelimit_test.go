package backoff_test

import (
	"encoding/binary"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
	"math"
	"math/big"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestDefaultControllerRateLimiterMatchesControllerRuntimeSeries(t *testing.T) {
	l := backoff.DefaultControllerRateLimiter[string](backoff.WithClock(clocktesting.NewFakeClock(epoch)))
	want := controllerRuntimeRequeueSeries()
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
	t.Parallel()
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

// fixedLimiter returns the same delay every time and counts calls, to
// observe what a combining limiter does with its parts.
type fixedLimiter struct {
	delay    time.Duration
	whens    int
	forgets  int
	requeues int
}

func (f *fixedLimiter) When(string) time.Duration { f.whens++; return f.delay }
func (f *fixedLimiter) Forget(string)             { f.forgets++ }
func (f *fixedLimiter) NumRequeues(string) int    { return f.requeues }

func TestMaxOfRateLimiter(t *testing.T) {
	a := &fixedLimiter{delay: time.Second, requeues: 2}
	b := &fixedLimiter{delay: 3 * time.Second, requeues: 7}
	c := &fixedLimiter{delay: -time.Hour, requeues: 1}
	l := backoff.NewMaxOfRateLimiter[string](a, b, c)

	assert.Equal(t, 3*time.Second, l.When("x"), "the longest delay wins")
	assert.Equal(t, []int{1, 1, 1}, []int{a.whens, b.whens, c.whens}, "every limiter counts every When")
	assert.Equal(t, 7, l.NumRequeues("x"))
	l.Forget("x")
	assert.Equal(t, []int{1, 1, 1}, []int{a.forgets, b.forgets, c.forgets})

	neg := backoff.NewMaxOfRateLimiter[string](c)
	assert.Equal(t, time.Duration(0), neg.When("x"), "a negative delay counts as 0")
}

func TestMaxOfRateLimiterEmpty(t *testing.T) {
	// The constructor refuses no limiters (a hot requeue loop); the zero
	// value, which nobody builds by mistake, still answers 0.
	assert.PanicsWithValue(t, "backoff: NewMaxOfRateLimiter: limiters must hold at least one limiter, got 0", func() {
		backoff.NewMaxOfRateLimiter[string]()
	})
	var l backoff.MaxOfRateLimiter[string]
	assert.Equal(t, time.Duration(0), l.When("x"))
	assert.Equal(t, 0, l.NumRequeues("x"))
	l.Forget("x")
}

func TestMaxOfRateLimiterCopiesLimiters(t *testing.T) {
	parts := []backoff.RateLimiter[string]{&fixedLimiter{delay: time.Second}}
	l := backoff.NewMaxOfRateLimiter(parts...)
	parts[0] = &fixedLimiter{delay: time.Hour}
	assert.Equal(t, time.Second, l.When("x"), "changing the caller's slice afterwards has no effect")
}

func TestMaxOfRateLimiterItemCounts(t *testing.T) {
	exp := backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)
	fs := backoff.NewItemFastSlowRateLimiter[string](50*time.Millisecond, time.Minute, 3)
	l := backoff.NewMaxOfRateLimiter[string](exp, fs)
	want := []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, time.Minute}
	assert.Equal(t, want, whenN[string](t, l, "x", 4))
	assert.Equal(t, 4, l.NumRequeues("x"))
	l.Forget("x")
	assert.Equal(t, 0, exp.NumRequeues("x"))
	assert.Equal(t, 0, fs.NumRequeues("x"))
}

func TestWithMaxWaitRateLimiter(t *testing.T) {
	inner := backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Hour)
	l := backoff.NewWithMaxWaitRateLimiter[string](inner, 5*time.Second)
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	assert.Equal(t, want, whenN[string](t, l, "x", len(want)))
	assert.Equal(t, 5, l.NumRequeues("x"), "the inner limiter's count")
	l.Forget("x")
	assert.Equal(t, 0, inner.NumRequeues("x"))
	assert.Equal(t, time.Second, l.When("x"))

	zero := backoff.NewWithMaxWaitRateLimiter[string](inner, 0)
	assert.Equal(t, time.Duration(0), zero.When("y"), "a zero maxDelay makes every delay 0")
	assert.Equal(t, 1, zero.NumRequeues("y"), "while the inner limiter still counts")

	neg := backoff.NewWithMaxWaitRateLimiter[string](&fixedLimiter{delay: -time.Second}, time.Second)
	assert.Equal(t, time.Duration(0), neg.When("x"), "a negative inner delay is returned as 0")
}

// controllerRuntimeRequeueSeries is the requeue series of a controller-runtime item that
// keeps failing: 5 ms·2^n for n = 0…17, the last being 655.36 s
// exactly, then the 1000 s cap.
func controllerRuntimeRequeueSeries() []time.Duration {
	var want []time.Duration
	for n := range 18 {
		want = append(want, (5*time.Millisecond)<<n)
	}
	return append(want, 1000*time.Second, 1000*time.Second, 1000*time.Second)
}

func TestItemExponentialMatchesControllerRuntimeSeries(t *testing.T) {
	l := backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second)
	want := controllerRuntimeRequeueSeries()
	require.Equal(t, 655360*time.Millisecond, want[17], "5ms·2^17 is 655.36 s to the nanosecond")
	assert.Equal(t, want, whenN[string](t, l, "ns/a", len(want)))
	assert.Equal(t, len(want), l.NumRequeues("ns/a"))
	for range 1000 {
		require.Equal(t, 1000*time.Second, l.When("ns/a"), "stays at the cap however many failures")
	}
	assert.Equal(t, len(want)+1000, l.NumRequeues("ns/a"))
}

func TestItemExponentialPerItemAndForget(t *testing.T) {
	l := backoff.NewItemExponentialFailureRateLimiter[int](time.Second, time.Minute)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, whenN[int](t, l, 1, 3))
	assert.Equal(t, time.Second, l.When(2), "each item has its own count")
	assert.Equal(t, 3, l.NumRequeues(1))
	assert.Equal(t, 1, l.NumRequeues(2))
	assert.Equal(t, 0, l.NumRequeues(3), "an unknown item has no requeues")

	l.Forget(1)
	assert.Equal(t, 0, l.NumRequeues(1))
	assert.Equal(t, time.Second, l.When(1), "starts over after Forget")
	assert.Equal(t, 2*time.Second, l.When(2), "Forget touches only its item")
	l.Forget(3) // unknown: no effect
	assert.Equal(t, 1, l.NumRequeues(1))
}

func TestItemExponentialBounds(t *testing.T) {
	const maxInt = time.Duration(math.MaxInt64)
	tests := []struct {
		name      string
		base, max time.Duration
		want      []time.Duration
	}{
		{"max equals base", time.Second, time.Second, []time.Duration{time.Second, time.Second}},
		// client-go: float64(MaxInt64/4)·4 rounds to 2^63, which is not
		// > math.MaxInt64 as a float, and converts to a negative Duration.
		{"client-go's negative case", maxInt / 4, maxInt, []time.Duration{maxInt / 4, maxInt / 4 * 2, maxInt / 4 * 4, maxInt}},
		{"base near MaxInt64", maxInt - 1, maxInt, []time.Duration{maxInt - 1, maxInt, maxInt}},
		{"odd base", 3, 100, []time.Duration{3, 6, 12, 24, 48, 96, 100, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := backoff.NewItemExponentialFailureRateLimiter[string](tt.base, tt.max)
			assert.Equal(t, tt.want, whenN[string](t, l, "x", len(tt.want)))
		})
	}
}

func TestItemExponentialManyFailures(t *testing.T) {
	t.Parallel()
	l := backoff.NewItemExponentialFailureRateLimiter[string](time.Nanosecond, time.Duration(math.MaxInt64))
	prev := time.Duration(0)
	for n := range 5000 {
		d := l.When("x")
		require.GreaterOrEqual(t, d, prev, "failure %d", n)
		prev = d
	}
	assert.Equal(t, time.Duration(math.MaxInt64), prev, "saturates instead of wrapping")
}

func TestItemExponentialJitter(t *testing.T) {
	t.Parallel()
	const base, ceiling = time.Second, 10 * time.Second
	l := backoff.NewItemExponentialFailureRateLimiter[int](base, ceiling, backoff.WithRequeueJitter(0.5))
	firsts := map[time.Duration]bool{}
	atEight := 0
	for item := range 500 {
		unjittered := []time.Duration{1, 2, 4, 8, 10, 10}
		for i, d := range whenN[int](t, l, item, len(unjittered)) {
			u := unjittered[i] * time.Second
			require.GreaterOrEqual(t, d, u, "never below the unjittered delay")
			require.LessOrEqual(t, d, min(u+u/2, ceiling), "within the factor and never above the cap")
			if u == 8*time.Second && d == ceiling {
				atEight++
			}
			if i == 0 {
				firsts[d] = true
			}
		}
		require.Equal(t, 6, l.NumRequeues(item))
	}
	assert.Greater(t, len(firsts), 400, "first delays of items failing together are spread out")
	assert.Positive(t, atEight, "8 s + up to 4 s of jitter is capped at 10 s for some items")
}

func TestItemExponentialMaxTrackedItems(t *testing.T) {
	l := backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Hour, backoff.WithMaxTrackedItems(3))
	whenN[string](t, l, "a", 2)
	whenN[string](t, l, "b", 2)
	whenN[string](t, l, "c", 2)
	l.When("a") // a is now the most recent failure; b the least recent
	assert.Equal(t, time.Second, l.When("d"), "a new item is tracked from its first failure")

	assert.Equal(t, 0, l.NumRequeues("b"), "the least recently failed item was dropped")
	assert.Equal(t, 3, l.NumRequeues("a"))
	assert.Equal(t, 2, l.NumRequeues("c"))
	assert.Equal(t, 1, l.NumRequeues("d"))

	assert.Equal(t, time.Second, l.When("b"), "a dropped item starts over at baseDelay")
	assert.Equal(t, 0, l.NumRequeues("c"), "and c, now the least recent, made room for it")

	l.Forget("a")
	l.When("e") // the slot a freed: nothing dropped
	assert.Equal(t, 1, l.NumRequeues("b"))
	assert.Equal(t, 1, l.NumRequeues("d"))
	assert.Equal(t, 1, l.NumRequeues("e"))
}

func TestItemExponentialConcurrent(t *testing.T) {
	l := backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Second)
	bounded := backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Second,
		backoff.WithMaxTrackedItems(10), backoff.WithRequeueJitter(1))
	const goroutines, items, rounds = 8, 20, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for item := range items {
					if d := l.When(item); d < 0 || d > time.Second {
						t.Errorf("delay %v out of [0, 1s]", d)
					}
					if d := bounded.When(item); d < 0 || d > time.Second {
						t.Errorf("delay %v out of [0, 1s]", d)
					}
					_ = bounded.NumRequeues(item)
					if g == 0 && r == rounds-1 {
						bounded.Forget(item)
					}
				}
			}
		}()
	}
	waitForCall(t, "the concurrent callers to finish", wg.Wait)
	for item := range items {
		assert.Equal(t, goroutines*rounds, l.NumRequeues(item), "no failure lost or counted twice")
	}
	tracked := 0
	for item := range items {
		if bounded.NumRequeues(item) > 0 {
			tracked++
		}
	}
	assert.LessOrEqual(t, tracked, 10)
}

func TestItemFastSlowSequence(t *testing.T) {
	const fast, slow = 10 * time.Millisecond, 5 * time.Second
	tests := []struct {
		name     string
		attempts int
		want     []time.Duration
	}{
		{"three fast", 3, []time.Duration{fast, fast, fast, slow, slow}},
		{"no fast attempts", 0, []time.Duration{slow, slow}},
		{"one fast", 1, []time.Duration{fast, slow, slow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := backoff.NewItemFastSlowRateLimiter[string](fast, slow, tt.attempts)
			assert.Equal(t, tt.want, whenN[string](t, l, "x", len(tt.want)))
			assert.Equal(t, len(tt.want), l.NumRequeues("x"))
		})
	}
}

func TestItemFastSlowForget(t *testing.T) {
	l := backoff.NewItemFastSlowRateLimiter[int](time.Millisecond, time.Second, 2)
	assert.Equal(t, []time.Duration{time.Millisecond, time.Millisecond, time.Second}, whenN[int](t, l, 1, 3))
	assert.Equal(t, time.Millisecond, l.When(2), "each item has its own count")
	l.Forget(1)
	assert.Equal(t, 0, l.NumRequeues(1))
	assert.Equal(t, time.Millisecond, l.When(1), "fast again after Forget")
	assert.Equal(t, 1, l.NumRequeues(2))
}

func TestItemFastSlowZeroDelays(t *testing.T) {
	l := backoff.NewItemFastSlowRateLimiter[int](0, 0, 1, backoff.WithRequeueJitter(1))
	assert.Equal(t, []time.Duration{0, 0, 0}, whenN[int](t, l, 1, 3), "jitter of zero is zero")
	assert.Equal(t, 3, l.NumRequeues(1))
}

func TestItemFastSlowJitter(t *testing.T) {
	const fast, slow = time.Second, 1200 * time.Millisecond
	l := backoff.NewItemFastSlowRateLimiter[int](fast, slow, 2, backoff.WithRequeueJitter(0.5))
	fastSeen, slowSeen := map[time.Duration]bool{}, map[time.Duration]bool{}
	cappedFast := 0
	for item := range 300 {
		for i, d := range whenN[int](t, l, item, 4) {
			if i < 2 {
				require.GreaterOrEqual(t, d, fast)
				require.LessOrEqual(t, d, slow, "a fast retry never waits longer than a slow one")
				if d == slow {
					cappedFast++
				}
				fastSeen[d] = true
			} else {
				require.GreaterOrEqual(t, d, slow)
				require.Less(t, d, slow+slow/2)
				slowSeen[d] = true
			}
		}
	}
	assert.Greater(t, len(fastSeen), 100, "fast delays vary")
	assert.Greater(t, len(slowSeen), 500, "slow delays vary")
	assert.Positive(t, cappedFast)
}

func TestItemFastSlowMaxTrackedItems(t *testing.T) {
	l := backoff.NewItemFastSlowRateLimiter[string](time.Millisecond, time.Second, 1, backoff.WithMaxTrackedItems(2))
	whenN[string](t, l, "a", 3)
	l.When("b")
	l.When("c") // drops a, the least recently failed
	assert.Equal(t, 0, l.NumRequeues("a"))
	assert.Equal(t, time.Millisecond, l.When("a"), "a dropped item is fast again")
	assert.Equal(t, 0, l.NumRequeues("b"))
	assert.Equal(t, 1, l.NumRequeues("c"))
}

func TestItemFastSlowConcurrent(t *testing.T) {
	l := backoff.NewItemFastSlowRateLimiter[int](time.Millisecond, time.Second, 10)
	const goroutines, items, rounds = 8, 10, 40
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				for item := range items {
					l.When(item)
					_ = l.NumRequeues(item)
				}
			}
		}()
	}
	waitForCall(t, "the concurrent callers to finish", wg.Wait)
	for item := range items {
		assert.Equal(t, goroutines*rounds, l.NumRequeues(item))
	}
}

// abs64 maps any int64 to a non-negative one (MinInt64 to MaxInt64).
func abs64(v int64) int64 {
	if v < 0 {
		return -(v + 1)
	}
	return v
}

// FuzzItemExponential checks, for any base and cap and up to 5,000 failures,
// that every delay is exactly min(base·2^n, max) computed in big integers
// (so in [0, max] and non-decreasing), and with jitter that it stays within
// [that, min(that·(1+f), max)].
func FuzzItemExponential(f *testing.F) {
	f.Add(int64(5*time.Millisecond), int64(1000*time.Second), uint16(25), uint8(0))
	f.Add(int64(math.MaxInt64/4), int64(math.MaxInt64), uint16(5), uint8(0))
	f.Add(int64(math.MaxInt64-1), int64(math.MaxInt64), uint16(3), uint8(100))
	f.Add(int64(1), int64(math.MaxInt64), uint16(4000), uint8(50))
	f.Add(int64(0), int64(0), uint16(10), uint8(255))
	f.Add(int64(3), int64(time.Hour), uint16(70), uint8(1))
	f.Fuzz(func(t *testing.T, a, b int64, failures uint16, jitter uint8) {
		// The constructor rejects a base of 0 (a hot requeue loop).
		base, maxDelay := time.Duration(max(min(abs64(a), abs64(b)), 1)), time.Duration(max(abs64(a), abs64(b), 1))
		n := int(failures % 5000)
		factor := float64(jitter) / 64 // 0 to about 4
		plain := backoff.NewItemExponentialFailureRateLimiter[int](base, maxDelay)
		jittered := backoff.NewItemExponentialFailureRateLimiter[int](base, maxDelay, backoff.WithRequeueJitter(factor))
		bigMax := big.NewInt(int64(maxDelay))
		want := new(big.Int)
		prev := time.Duration(0)
		for i := range n {
			want.Lsh(big.NewInt(int64(base)), uint(i))
			if want.Cmp(bigMax) > 0 {
				want.Set(bigMax)
			}
			d := plain.When(0)
			if int64(d) != want.Int64() || d < prev {
				t.Fatalf("base %v max %v failure %d: got %v, want %v (previous %v)", base, maxDelay, i, d, want, prev)
			}
			prev = d
			j := jittered.When(0)
			// The jitter is at most factor·d; the slack covers float64 rounding.
			if j < d || j > maxDelay || float64(j-d) > float64(d)*factor*(1+1e-9)+1 {
				t.Fatalf("base %v max %v failure %d factor %v: jittered %v outside [%v, min(%v·(1+f), max)]",
					base, maxDelay, i, factor, j, d, d)
			}
		}
		if plain.NumRequeues(0) != n {
			t.Fatalf("NumRequeues %d, want %d", plain.NumRequeues(0), n)
		}
	})
}

// FuzzBucket drives a bucket with any limit and burst through a sequence of
// calls and clock steps, forwards and backwards, and checks that it never
// panics on a valid configuration, never returns a negative delay, never
// shortens the delay between two calls at one instant, and returns 0 at once
// when unlimited.
func FuzzBucket(f *testing.F) {
	step := func(ds ...int64) []byte {
		var out []byte
		for _, d := range ds {
			out = binary.LittleEndian.AppendUint64(out, uint64(d))
		}
		return out
	}
	f.Add(10.0, 100, uint8(150), step(0, int64(time.Second), -int64(time.Hour), int64(time.Hour)))
	f.Add(3.0, 2, uint8(3), step(1, 333333333, 0, -1, 7))
	f.Add(1e-300, 1, uint8(4), step(math.MaxInt64, math.MinInt64))
	f.Add(math.MaxFloat64, 1, uint8(2), step(math.MaxInt64, math.MaxInt64, 1))
	f.Add(math.Inf(1), 1, uint8(10), step(5))
	f.Add(0.001, math.MaxInt, uint8(1), step(1, 2, 3))
	f.Fuzz(func(t *testing.T, limit float64, burst int, callsPerStep uint8, steps []byte) {
		if !(limit > 0) || burst < 1 {
			defer func() {
				if recover() == nil {
					t.Fatalf("limit %v burst %d: want a panic", limit, burst)
				}
			}()
			backoff.NewBucketRateLimiter[int](limit, burst)
			return
		}
		clk := clocktesting.NewFakeClock(epoch)
		l := backoff.NewBucketRateLimiter[int](limit, burst, backoff.WithClock(clk))
		calls := int(callsPerStep)%64 + 1
		for len(steps) > 0 {
			var s int64
			if len(steps) >= 8 {
				s = int64(binary.LittleEndian.Uint64(steps))
				steps = steps[8:]
			} else {
				s, steps = int64(steps[0]), nil
			}
			clk.SetTime(clk.Now().Add(time.Duration(s)))
			prev := time.Duration(-1)
			for range calls {
				d := l.When(0)
				if d < 0 || d < prev {
					t.Fatalf("limit %v burst %d step %v: delay %v after %v", limit, burst, time.Duration(s), d, prev)
				}
				if math.IsInf(limit, 1) && d != 0 {
					t.Fatalf("unlimited bucket waited %v", d)
				}
				prev = d
			}
		}
	})
}

// benchKeys are 1,000 keys shaped like a controller's namespace/name keys.
var benchKeys = func() []string {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("default/object-%d", i)
	}
	return keys
}()

// benchLimiter runs op over benchKeys, serially and from parallel goroutines
// that start at different keys (any worker may fail any item).
func benchLimiter(b *testing.B, op func(key string)) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			op(benchKeys[i%len(benchKeys)])
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var start atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(397))
			for pb.Next() {
				op(benchKeys[i%len(benchKeys)])
				i++
			}
		})
	})
}

func BenchmarkItemExponentialWhen(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []backoff.Option
	}{
		{"plain", nil},
		{"jitter", []backoff.Option{backoff.WithRequeueJitter(0.1)}},
		{"bounded", []backoff.Option{backoff.WithMaxTrackedItems(2000)}},
		// Half the keys fit: every When drops the least recently failed key.
		{"evicting", []backoff.Option{backoff.WithMaxTrackedItems(500)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second, bc.opts...)
			benchLimiter(b, func(k string) { l.When(k) })
		})
	}
}

func BenchmarkItemFastSlowWhen(b *testing.B) {
	l := backoff.NewItemFastSlowRateLimiter[string](5*time.Millisecond, 10*time.Second, 3)
	benchLimiter(b, func(k string) { l.When(k) })
}

func BenchmarkBucketWhen(b *testing.B) {
	// The real clock: reading it is most of the cost.
	l := backoff.NewBucketRateLimiter[string](10, 100)
	benchLimiter(b, func(k string) { l.When(k) })
}

func BenchmarkMaxOfWhen(b *testing.B) {
	l := backoff.NewMaxOfRateLimiter[string](
		backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
		backoff.NewItemFastSlowRateLimiter[string](5*time.Millisecond, 10*time.Second, 3),
	)
	benchLimiter(b, func(k string) { l.When(k) })
}

func BenchmarkWithMaxWaitWhen(b *testing.B) {
	l := backoff.NewWithMaxWaitRateLimiter[string](
		backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second), time.Minute)
	benchLimiter(b, func(k string) { l.When(k) })
}

func BenchmarkDefaultControllerWhenForget(b *testing.B) {
	l := backoff.DefaultControllerRateLimiter[string]()
	benchLimiter(b, func(k string) {
		l.When(k)
		l.Forget(k)
	})
}

// whenN calls l.When(item) n times and returns the delays.
func whenN[T comparable](t *testing.T, l backoff.RateLimiter[T], item T, n int) []time.Duration {
	t.Helper()
	got := make([]time.Duration, n)
	for i := range got {
		got[i] = l.When(item)
	}
	return got
}

func TestBucketRateLimiterBurstThenSpacing(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.NewBucketRateLimiter[string](10, 100, backoff.WithClock(clk))
	for i := range 100 {
		require.Zero(t, l.When("x"), "call %d is within the burst", i+1)
	}
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond},
		whenN[string](t, l, "y", 3), "each call past the burst waits 1/limit longer")
	assert.Zero(t, l.NumRequeues("x"))
	l.Forget("x") // gives no token back
	assert.Equal(t, 400*time.Millisecond, l.When("x"))
}

func TestBucketRateLimiterRefill(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.NewBucketRateLimiter[int](10, 5, backoff.WithClock(clk))
	whenN[int](t, l, 0, 5) // empty the bucket
	clk.Step(250 * time.Millisecond)
	// 2.5 tokens earned: two calls pass, the third owes half a token.
	assert.Equal(t, []time.Duration{0, 0, 50 * time.Millisecond}, whenN[int](t, l, 0, 3))
	clk.Step(time.Hour)
	assert.Equal(t, []time.Duration{0, 0, 0, 0, 0, 100 * time.Millisecond}, whenN[int](t, l, 0, 6),
		"the bucket refills up to burst, no more")
}

// TestBucketRateLimiterMatchesXTimeRate replays sequences recorded from
// golang.org/x/time/rate v0.16.0 (ReserveN(t, 1).DelayFrom(t), which is what
// client-go's BucketRateLimiter returns): limits that are not a divisor of a
// second, odd clock steps, refills across the cap.
func TestBucketRateLimiterMatchesXTimeRate(t *testing.T) {
	type call struct{ step, want time.Duration }
	tests := []struct {
		limit float64
		burst int
		calls []call
	}{
		{limit: 3, burst: 2, calls: []call{
			{0, 0},
			{0, 0},
			{0, 333333333},
			{0, 666666666},
			{0, 1000000000},
			{1, 1333333332},
			{333333333, 1333333332},
			{0, 1666666666},
			{1000000000, 999999999},
			{7, 1333333325},
			{2000000000, 0},
			{0, 0},
			{0, 333333333},
			{0, 666666666},
			{0, 1000000000},
		}},
		{limit: 7.3, burst: 4, calls: []call{
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 136986301},
			{0, 273972602},
			{123456789, 287502115},
			{0, 424488416},
			{0, 561474717},
			{987654321, 0},
			{1, 0},
			{1, 0},
			{5000000000, 0},
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 136986301},
			{0, 273972602},
			{0, 410958904},
		}},
		{limit: 0.5, burst: 1, calls: []call{
			{0, 0},
			{0, 2000000000},
			{0, 4000000000},
			{1500000000, 4500000000},
			{0, 6500000000},
			{10000000000, 0},
			{0, 2000000000},
			{0, 4000000000},
		}},
		{limit: 1e+06, burst: 10, calls: []call{
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 0},
			{0, 1000},
			{0, 2000},
			{0, 3000},
			{3, 3997},
			{500, 4496},
			{0, 5497},
			{0, 6497},
			{999, 6497},
			{0, 7497},
		}},
	}
	for _, tt := range tests {
		t.Run("", func(t *testing.T) {
			clk := clocktesting.NewFakeClock(epoch)
			l := backoff.NewBucketRateLimiter[string](tt.limit, tt.burst, backoff.WithClock(clk))
			for i, c := range tt.calls {
				clk.Step(c.step)
				assert.Equal(t, c.want, l.When("x"), "limit %v burst %d call %d", tt.limit, tt.burst, i)
			}
		})
	}
}

func TestBucketRateLimiterClockBackwards(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.NewBucketRateLimiter[string](10, 100, backoff.WithClock(clk))
	whenN[string](t, l, "x", 100)
	assert.Equal(t, 100*time.Millisecond, l.When("x"))

	clk.SetTime(epoch.Add(-time.Hour))
	assert.Equal(t, 200*time.Millisecond, l.When("x"), "no refill and no negative delay going backwards")
	clk.SetTime(epoch.Add(-2 * time.Hour))
	assert.Equal(t, 300*time.Millisecond, l.When("x"))
	// x/time/rate would credit the hour it went back to as earned again here;
	// the bucket earns only past the latest instant it has seen.
	clk.SetTime(epoch)
	assert.Equal(t, 400*time.Millisecond, l.When("x"), "the re-traversed interval is not earned twice")
	clk.SetTime(epoch.Add(time.Second))
	assert.Equal(t, []time.Duration{0, 0, 0, 0, 0, 0, 100 * time.Millisecond}, whenN[string](t, l, "x", 7),
		"earning resumes past the latest instant: 10 tokens, 4 owed")
}

func TestBucketRateLimiterClockBeforeConstruction(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.NewBucketRateLimiter[string](1, 2, backoff.WithClock(clk))
	clk.SetTime(time.Time{}) // year 1
	assert.Equal(t, []time.Duration{0, 0, time.Second}, whenN[string](t, l, "x", 3))
	// The bucket earns from the construction time on, not from year 1: 3 s
	// pay the token owed and refill to burst.
	clk.SetTime(epoch.Add(3 * time.Second))
	assert.Equal(t, []time.Duration{0, 0, time.Second}, whenN[string](t, l, "x", 3))
}

func TestBucketRateLimiterUnlimited(t *testing.T) {
	l := backoff.NewBucketRateLimiter[string](math.Inf(1), 1, backoff.WithClock(clocktesting.NewFakeClock(epoch)))
	for i := range 1000 {
		require.Zero(t, l.When("x"), "call %d", i)
	}
}

func TestBucketRateLimiterExtremes(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	slow := backoff.NewBucketRateLimiter[string](1e-300, 1, backoff.WithClock(clk))
	assert.Zero(t, slow.When("x"))
	assert.Equal(t, time.Duration(math.MaxInt64), slow.When("x"), "saturates instead of overflowing")
	assert.Equal(t, time.Duration(math.MaxInt64), slow.When("x"))

	fast := backoff.NewBucketRateLimiter[string](math.MaxFloat64, 1, backoff.WithClock(clk))
	whenN[string](t, fast, "x", 10)
	clk.Step(math.MaxInt64) // earns +Inf tokens, capped at burst
	assert.Equal(t, []time.Duration{0, 0}, whenN[string](t, fast, "x", 2))

	big := backoff.NewBucketRateLimiter[string](1, math.MaxInt, backoff.WithClock(clk))
	assert.Zero(t, big.When("x"))
}

func TestBucketRateLimiterConcurrent(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.NewBucketRateLimiter[int](10, 100, backoff.WithClock(clk))
	const goroutines, calls = 8, 50
	var wg sync.WaitGroup
	delays := make([][]time.Duration, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				delays[g] = append(delays[g], l.When(i))
			}
		}()
	}
	waitForCall(t, "the concurrent callers to finish", wg.Wait)
	// At one instant the 400 calls took 400 tokens: whatever the
	// interleaving, together they saw the delays of 400 calls in a row.
	var got []time.Duration
	for _, ds := range delays {
		got = append(got, ds...)
	}
	serial := backoff.NewBucketRateLimiter[int](10, 100, backoff.WithClock(clocktesting.NewFakeClock(epoch)))
	assert.ElementsMatch(t, whenN[int](t, serial, 0, goroutines*calls), got)
}
