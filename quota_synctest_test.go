//go:build go1.25

package backoff_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// TestAdaptiveRateQuotaInUnits: 10 goroutines send 1,000 requests that cost
// between 1 and 4,000 units each (tokens, say) against a quota of 200,000
// units per minute, pacing them with WaitN and reporting what each answer
// says is left with Quota: at most one throttling answer, with at least 95%
// of the quota used.
func TestAdaptiveRateQuotaInUnits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, window = 200_000, time.Minute
		r := backoff.NewAdaptiveRate()
		start := time.Now()
		var mu sync.Mutex
		windowAt, used, spent, throttled := start, 0, 0, 0
		send := func(cost int) (left int, reset time.Duration, ok bool) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			for now.Sub(windowAt) >= window {
				windowAt, used = windowAt.Add(window), 0
			}
			if ok = used+cost <= limit; ok {
				used += cost
				spent += cost
			} else {
				throttled++
			}
			return limit - used, windowAt.Add(window).Sub(now), ok
		}
		rng := rand.New(rand.NewPCG(1, 2))
		costs := make(chan int, 1000)
		for range 1000 {
			costs <- 1 + rng.IntN(4000)
		}
		close(costs)
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for cost := range costs {
					for {
						require.NoError(t, r.WaitN(context.Background(), cost))
						left, reset, ok := send(cost)
						// Headers in whole seconds, rounded up, as servers send them.
						r.Quota(float64(left), time.Duration(math.Ceil(reset.Seconds()))*time.Second)
						if ok {
							r.Succeeded()
							break
						}
						r.Throttled(reset)
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		share := float64(spent) / (elapsed.Seconds() / window.Seconds() * limit)
		t.Logf("%d units in %v, %d throttled, %.1f%% of the quota used", spent, elapsed, throttled, 100*share)
		assert.LessOrEqual(t, throttled, 1)
		assert.GreaterOrEqual(t, share, 0.95)
	})
}

// TestAdaptiveRateStatsCountsWaits: Waited grows when a request has to wait
// for its turn, and Waiting counts the requests waiting now.
func TestAdaptiveRateStatsCountsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := backoff.NewAdaptiveRate()
		r.Steer(1)
		require.True(t, r.Allow())
		done := make(chan error)
		go func() { done <- r.Wait(t.Context()) }()
		synctest.Wait()
		st := r.Stats()
		assert.Equal(t, 1, st.Waiting)
		assert.Equal(t, uint64(1), st.Waited)
		time.Sleep(time.Second)
		require.NoError(t, <-done)
		assert.Equal(t, 0, r.Stats().Waiting)
	})
}
