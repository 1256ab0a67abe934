package backoff_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

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
