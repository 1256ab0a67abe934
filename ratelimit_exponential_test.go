package backoff_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// seed003Series is the requeue series of a controller-runtime item that
// keeps failing (seed 003): 5 ms·2^n for n = 0…17, the last being 655.36 s
// exactly, then the 1000 s cap.
func seed003Series() []time.Duration {
	var want []time.Duration
	for n := range 18 {
		want = append(want, (5*time.Millisecond)<<n)
	}
	return append(want, 1000*time.Second, 1000*time.Second, 1000*time.Second)
}

func TestItemExponentialSeed003Series(t *testing.T) {
	l := backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second)
	want := seed003Series()
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
