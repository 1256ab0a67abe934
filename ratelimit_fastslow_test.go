package backoff_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

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
