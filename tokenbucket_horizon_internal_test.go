package backoff

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// takesOne is take's own answer for AllowN(1) at now, on a copy.
func takesOne(s bucketState, now time.Duration, limit float64, burst int) bool {
	_, ok := s.take(now, 1, limit, burst, 0)
	return ok
}

// TestFirstGrantOfOneIsExact: for random buckets (rates from 1e-3 to 1e9
// per second, token counts around the refusal boundary and far from it,
// latest instants near second boundaries and far out), take refuses AllowN(1)
// one nanosecond before firstGrantOfOne's instant and grants at it, and
// agrees with the instant's side at random instants before and after (the
// monotonicity the lock-free refusal relies on).
func TestFirstGrantOfOneIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 14))
	rates := []float64{1e-3, 0.5, 1, 3, 7.3, 10, 1e3, 1e6, 1e6 + 1, 3.3e7, 1e9, 0}
	iterations := 30_000
	if testing.Short() {
		iterations = 3_000
	}
	for i := range iterations {
		limit := rates[rng.IntN(len(rates))]
		if rng.IntN(4) == 0 {
			limit = math.Exp(rng.Float64()*40 - 20) // any magnitude, 2e-9 to 5e8
		}
		burst := rng.IntN(12)
		if rng.IntN(8) == 0 {
			burst = rng.IntN(1 << 40)
		}
		var s bucketState
		switch rng.IntN(4) {
		case 0:
			s.tokens = rng.Float64() * 2 // 0 to 2: around a token
		case 1:
			s.tokens = 1 - rng.Float64()*1e-6 // a hair short of a token
		case 2:
			s.tokens = -rng.Float64() * float64(burst+1) * 3 // owed by reservations
		default:
			s.tokens = float64(rng.IntN(burst+3)) - rng.Float64()
		}
		switch rng.IntN(3) {
		case 0:
			s.last = time.Duration(rng.Int64N(int64(10 * time.Second)))
		case 1:
			s.last = time.Duration(rng.Int64N(1<<20))*time.Second - time.Duration(rng.Int64N(3)) // at a second boundary
		default:
			s.last = time.Duration(rng.Int64N(math.MaxInt64 / 2))
		}
		first := s.firstGrantOfOne(limit, burst)
		where := func(what string, at time.Duration) string {
			return fmt.Sprintf("%s: first grant %d for tokens %v, last %d, limit %v, burst %d, at %d (case %d)",
				what, first, s.tokens, s.last, limit, burst, at, i)
		}
		if first > 0 {
			require.False(t, takesOne(s, first-1, limit, burst), where("granted before", first-1))
		}
		if first < maxDuration {
			require.True(t, takesOne(s, first, limit, burst), where("refused at", first))
		}
		for range 4 {
			at := time.Duration(rng.Int64N(int64(maxDuration)))
			if rng.IntN(2) == 0 {
				at = max(first+time.Duration(rng.Int64N(2001))-1000, 0)
			}
			if at < first || first < maxDuration { // maxDuration itself: either answer
				require.Equal(t, at >= first, takesOne(s, at, limit, burst), where("disagrees", at))
			}
		}
	}
}

// TestFirstGrantOfOneEdges: the answers without a search.
func TestFirstGrantOfOneEdges(t *testing.T) {
	empty := bucketState{tokens: 0, last: time.Second}
	require.Equal(t, time.Duration(0), empty.firstGrantOfOne(InfLimit, 0), "an infinite limit grants always")
	require.Equal(t, maxDuration, empty.firstGrantOfOne(10, 0), "a zero burst grants nothing")
	require.Equal(t, maxDuration, empty.firstGrantOfOne(0, 5), "a zero limit never earns")
	full := bucketState{tokens: 5, last: time.Second}
	require.Equal(t, time.Duration(0), full.firstGrantOfOne(10, 5), "a token held grants at every instant")
	require.Equal(t, time.Duration(0), full.firstGrantOfOne(0, 5))
	// 10 per second from empty at 1 s: the token is earned at 1.1 s, or a
	// nanosecond sooner if rounding leaves a wait of under 1 ns.
	got := empty.firstGrantOfOne(10, 5)
	require.InDelta(t, float64(1100*time.Millisecond), float64(got), 1)
	require.False(t, takesOne(empty, got-1, 10, 5))
	require.True(t, takesOne(empty, got, 10, 5))
}
