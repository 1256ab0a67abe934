package backoff

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// lockedAllowN is AllowN's answer by the locked path alone, on a copy of
// the bucket: what the lock-free refusal must agree with.
func lockedAllowN(l *Limiter, now time.Duration, n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limit == InfLimit {
		return true
	}
	s := l.bucket
	_, ok := s.take(now, max(n, 0), l.limit, l.burst, 0)
	return ok
}

// TestLimiterLockFreeRefusalMatchesLocked runs random sequences of AllowN,
// ReserveN, Cancel, SetLimit and SetBurst, with the clock stepped by random
// amounts, back, and above all onto refusedBefore and the nanosecond before
// it, and checks every AllowN against the locked path's answer for the
// same instant and bucket: a stale or late refusedBefore after any change
// is a wrong refusal, a wrong instant a refusal or a grant off by 1 ns.
func TestLimiterLockFreeRefusalMatchesLocked(t *testing.T) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	limits := []float64{0, 0.5, 3, 7.3, 10, 1e6, 1e6 + 1, 3.3e7, InfLimit}
	sequences := 400
	if testing.Short() {
		sequences = 40
	}
	fastRefusals := 0
	for seq := range sequences {
		rng := rand.New(rand.NewPCG(uint64(seq), 14))
		clk := testingclock.NewFakeClock(epoch)
		l := NewLimiter(limits[rng.IntN(len(limits)-1)], 1+rng.IntN(5), WithClock(clk))
		var open []Reservation
		for op := range 300 {
			switch rng.IntN(6) {
			case 0, 1:
				if t := time.Duration(l.refusedBefore.Load()); t > 0 && t < maxDuration {
					clk.SetTime(epoch.Add(t - time.Duration(rng.IntN(2)))) // may step back
				}
			case 2:
				clk.Step(time.Duration(rng.Int64N(int64(time.Microsecond))))
			case 3:
				clk.Step(time.Duration(rng.Int64N(int64(time.Second))))
			case 4:
				clk.Step(-time.Duration(rng.Int64N(int64(time.Millisecond))))
			}
			now := l.now()
			where := fmt.Sprintf("sequence %d op %d, limit %v burst %d at %d (refused before %d)",
				seq, op, l.Limit(), l.Burst(), now, l.refusedBefore.Load())
			switch k := rng.IntN(20); {
			case k < 12:
				n := rng.IntN(3)
				want := lockedAllowN(l, now, n)
				if n > 0 && int64(now) < l.refusedBefore.Load() {
					fastRefusals++
				}
				require.Equal(t, want, l.AllowN(n), "AllowN(%d): %s", n, where)
			case k < 15:
				open = append(open, l.ReserveN(rng.IntN(3)))
			case k < 18:
				if len(open) > 0 {
					i := rng.IntN(len(open))
					open[i].Cancel()
					open = append(open[:i], open[i+1:]...)
				}
			case k < 19:
				l.SetLimit(limits[rng.IntN(len(limits))])
			default:
				l.SetBurst(rng.IntN(6))
			}
		}
	}
	require.Greater(t, fastRefusals, sequences, "the lock-free refusal was exercised")
}
