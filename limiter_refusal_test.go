package backoff_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// TestLimiterRefusalsRacingGrants aims at Allow's refusals without the
// lock. At each of many instants, chosen at random within a few tokens'
// time so that they fall on both sides of the instant a token is earned,
// four goroutines make 40 Allows at once on one limiter. At one instant
// every refusal leaves the bucket as it was and every grant takes exactly
// one token, so the number granted does not depend on the interleaving: it
// must be, round by round, what the plain reference bucket (bucketModel)
// grants to 40 calls in a row. Between some rounds both are changed alike
// (a reservation, a new burst or limit), which must not leave a stale
// refusal behind.
func TestLimiterRefusalsRacingGrants(t *testing.T) {
	for _, tc := range []struct {
		r     float64
		burst int
	}{{1e6, 100}, {10, 5}, {7.3, 3}, {1000, 1}, {3, 1}} {
		clk := clocktesting.NewFakeClock(epoch)
		l := backoff.NewLimiter(tc.r, tc.burst, backoff.WithClock(clk))
		m := &bucketModel{limit: tc.r, burst: tc.burst, tokens: float64(tc.burst), last: epoch}
		rng := rand.New(rand.NewPCG(uint64(tc.r), uint64(tc.burst)))
		perToken := time.Duration(float64(time.Second) / tc.r)
		const rounds, goroutines, calls = 300, 4, 10
		for round := range rounds {
			clk.Step(time.Duration(rng.Int64N(int64(3*perToken) + 1)))
			now := clk.Now()
			switch rng.IntN(10) {
			case 0:
				l.Reserve()
				m.reserve(now, 1, math.MaxInt64)
			case 1:
				burst := 1 + rng.IntN(2*tc.burst)
				l.SetBurst(burst)
				m.settle(now)
				m.burst = burst
			case 2:
				limit := tc.r * (0.5 + rng.Float64())
				l.SetLimit(limit)
				m.settle(now)
				m.limit = limit
			}
			var wg sync.WaitGroup
			var got atomic.Int64
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range calls {
						if l.Allow() {
							got.Add(1)
						}
					}
				}()
			}
			want := 0
			for range goroutines * calls {
				if _, ok := m.reserve(now, 1, 0); ok {
					want++
				}
			}
			wg.Wait()
			require.Equalf(t, int64(want), got.Load(), "r=%v burst=%d round %d: granted concurrently vs by the model", tc.r, tc.burst, round)
			require.Equalf(t, m.advance(now), l.Tokens(), "r=%v burst=%d round %d: tokens left", tc.r, tc.burst, round)
		}
	}
}

// TestLimiterRefusalsWhileClockMoves: two goroutines make 20,000 Allows
// each on a limiter at 1,000,000 per second with a burst of 100 (the bench/
// row's setting, where nearly every call is a refusal) while the clock is
// stepped 2,000 times by 0 to 2 µs; what they admit, and what is left to
// take afterwards, never exceeds burst + rate × elapsed. Under -race this
// also checks that the refusals' lock-free read is synchronised with the
// grants' writes.
func TestLimiterRefusalsWhileClockMoves(t *testing.T) {
	const r, burst, steps, calls = 1e6, 100, 2000, 20_000
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.NewLimiter(r, burst, backoff.WithClock(clk))
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				if l.Allow() {
					admitted.Add(1)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(23, 23))
	for range steps {
		clk.Step(time.Duration(rng.Int64N(3)) * time.Microsecond)
		runtime.Gosched()
	}
	wg.Wait()
	for l.Allow() {
		admitted.Add(1)
	}
	elapsed := clk.Since(epoch)
	require.LessOrEqual(t, admitted.Load(), int64(burst+r*elapsed.Seconds()), "elapsed %v", elapsed)
	require.GreaterOrEqual(t, admitted.Load(), int64(burst), "the burst at least")
}
