//go:build go1.25

package backoff_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hedging on the real clock, in a synctest bubble (see synctest_test.go,
// whose //go:debug line covers this file too): synctest.Wait shows what the
// hedge's goroutine is doing once it blocks, without polling.

// TestSynctestHedgeWaitsForThePacer: a hedge is an attempt like any other:
// it waits for the Limiter's next token before it is sent.
func TestSynctestHedgeWaitsForThePacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := backoff.NewLimiter(20, 1) // a token every 50ms; the first attempt takes the one there is
		start := time.Now()
		var calls atomic.Int32
		hedgeAt := make(chan time.Duration, 1)
		err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) error {
			if calls.Add(1) == 1 {
				time.Sleep(hedgeDelay)
				synctest.Wait()
				assert.Equal(t, int32(1), calls.Load(), "the hedge waits for a token")
				assert.Equal(t, 50*time.Millisecond, <-hedgeAt, "and is sent when it comes")
				<-ctx.Done()
				return ctx.Err()
			}
			hedgeAt <- time.Since(start)
			return nil
		}, backoff.WithPacer(l), backoff.WithHedge(hedgeDelay))
		require.NoError(t, err)
		assert.Equal(t, int32(2), calls.Load())
	})
}

// TestSynctestHedgeRefusedByThePacerIsSuppressed: a Throttler that refuses
// the hedge suppresses it, as a budget does; the attempt in flight goes on.
func TestSynctestHedgeRefusedByThePacerIsSuppressed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := backoff.NewThrottler(2, time.Minute)
		var calls atomic.Int32
		err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) error {
			calls.Add(1)
			for range 10000 {
				th.Allow() // requests and no acceptance: the Throttler refuses 9999 in 10000
			}
			before := th.Rejected()
			time.Sleep(hedgeDelay)
			synctest.Wait()
			assert.Equal(t, before+1, th.Rejected(), "the hedge asked the Throttler, which refused")
			assert.NoError(t, ctx.Err(), "the attempt in flight goes on")
			return nil
		}, backoff.WithPacer(th), backoff.WithHedge(hedgeDelay))
		require.NoError(t, err)
		assert.Equal(t, int32(1), calls.Load(), "the refused hedge was not sent")
	})
}

// TestSynctestHedgedCallsUnderLoad: many concurrent RetryValue calls with
// hedges, stragglers, late answers and failures. Every success is either
// returned or released, exactly once; nothing leaks (goleak) or races
// (-race).
func TestSynctestHedgedCallsUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := backoff.NewRetryBudget(0.5, 100, time.Second)
		hd := backoff.NewHedgeDelay(0.9, time.Millisecond, 100*time.Millisecond)
		var succeeded, released atomic.Int64
		var returned atomic.Int64
		var wg sync.WaitGroup
		for g := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				var mu sync.Mutex // rng is not safe for concurrent use
				draw := func() float64 { mu.Lock(); defer mu.Unlock(); return rng.Float64() }
				for range 20 {
					v, err := backoff.RetryValue(context.Background(), backoff.Schedule{Steps: 4, Duration: time.Millisecond},
						func(ctx context.Context) (int, error) {
							latency := time.Duration(1+4*draw()) * time.Millisecond
							if draw() < 0.05 {
								latency *= 20 // a straggler
							}
							select {
							case <-time.After(latency):
							case <-ctx.Done():
								if draw() < 0.3 {
									succeeded.Add(1)
									return 1, nil // an answer that came as the cancellation did
								}
								return 0, ctx.Err()
							}
							if draw() < 0.2 {
								return 0, errHedgeTest
							}
							succeeded.Add(1)
							return 1, nil
						},
						backoff.WithHedge(10*time.Millisecond), backoff.WithHedgeDelay(hd), backoff.WithMaxHedges(2),
						backoff.WithRetryBudget(budget),
						backoff.WithHedgeRelease(func(v any) {
							assert.Equal(t, 1, v)
							released.Add(1)
						}))
					if err == nil {
						assert.Equal(t, 1, v)
						returned.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, succeeded.Load(), returned.Load()+released.Load(), "every success returned or released once")
		assert.Positive(t, released.Load(), "some late answers were released")
		_, learned := hd.Delay()
		assert.True(t, learned)
	})
}
