package backoff

import (
	"fmt"
	"github.com/retrykit/backoff/internal/keytable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
	"math"
	"math/rand/v2"
	"testing"
	"time"
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
	if t := l.grantedAt.Load(); t >= 0 {
		// The state is in grantedAt (claimLocked would move it, and so keep
		// the lock-free grant from being exercised).
		s = bucketState{tokens: float64(l.burst) - 1, last: time.Duration(t)}
	}
	_, ok := s.take(now, max(n, 0), l.limit, l.burst, 0)
	return ok
}

// TestLimiterLockFreeRefusalMatchesLocked runs random sequences of AllowN,
// ReserveN, Cancel, SetLimit and SetBurst, with the clock stepped by random
// amounts, back, and above all onto refusedBefore and the nanosecond before
// it (and onto grantedAt+refillAfter and the nanosecond before it), and
// checks every AllowN against the locked path's answer for the same instant
// and bucket: a stale or late refusedBefore after any change is a wrong
// refusal, a wrong instant a refusal or a grant off by 1 ns; a lock-free
// grant on a bucket that is not full again is a wrong grant.
func TestLimiterLockFreeRefusalMatchesLocked(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	limits := []float64{0, 0.5, 3, 7.3, 10, 1e6, 1e6 + 1, 3.3e7, InfLimit}
	sequences := 40
	if longTests() {
		sequences = 400
	}
	fastRefusals, fastGrants := 0, 0
	for seq := range sequences {
		rng := rand.New(rand.NewPCG(uint64(seq), 14))
		clk := clocktesting.NewFakeClock(epoch)
		l := NewLimiter(limits[rng.IntN(len(limits)-1)], 1+rng.IntN(5), WithClock(clk))
		var open []Reservation
		for op := range 300 {
			switch rng.IntN(6) {
			case 0, 1:
				if t := time.Duration(l.refusedBefore.Load()); t > 0 && t < maxDuration {
					clk.SetTime(epoch.Add(t - time.Duration(rng.IntN(2)))) // may step back
				}
			case 2:
				if g := l.grantedAt.Load(); g >= 0 && rng.IntN(2) == 0 {
					clk.SetTime(epoch.Add(time.Duration(g + l.refillAfter.Load() - rng.Int64N(2))))
					break
				}
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
				if g := l.grantedAt.Load(); n == 1 && g >= 0 && int64(now)-g >= l.refillAfter.Load() {
					fastGrants++
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
	require.Greater(t, fastGrants, sequences/4, "the lock-free grant was exercised")
}

// reserveForTest takes n tokens from s at now, as Limiter.ReserveN does, and
// returns the reservation, moving *lastEvent to its time-to-act.
func reserveForTest(t *testing.T, s *bucketState, now time.Duration, n int, limit float64, burst int, lastEvent *time.Duration) Reservation {
	t.Helper()
	wait, ok := s.take(now, n, limit, burst, maxDuration)
	require.True(t, ok)
	r := Reservation{ok: true, tokens: n, limit: limit, timeToAct: addInstant(now, wait)}
	*lastEvent = r.timeToAct
	return r
}

// TestBucketGiveBackAtItsTimeToAct: a reservation cancelled at exactly its
// time-to-act still gives its token back (x/time/rate returns nothing only
// when the time-to-act is before the cancel).
func TestBucketGiveBackAtItsTimeToAct(t *testing.T) {
	const limit, burst = 2.0, 1 // a token every 500 ms
	s := bucketState{tokens: burst}
	var lastEvent time.Duration
	reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent) // the burst: at once
	r := reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent)
	require.Equal(t, 500*time.Millisecond, r.timeToAct)

	s.giveBack(&r, 500*time.Millisecond, limit, burst, &lastEvent)
	assert.InDelta(t, 1.0, s.tokensAt(500*time.Millisecond, limit, burst), 1e-9,
		"the token earned by 500 ms, plus the one given back, capped at the burst")
}

// TestBucketGiveBackMovesLastEventBack: cancelling the latest reservation
// moves the latest time-to-act back to the reservation before it, also when
// that one's time is exactly the cancel's instant.
func TestBucketGiveBackMovesLastEventBack(t *testing.T) {
	const limit, burst = 2.0, 1
	s := bucketState{tokens: burst}
	var lastEvent time.Duration
	reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent) // time-to-act 0
	r := reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent)
	require.Equal(t, 500*time.Millisecond, lastEvent)

	s.giveBack(&r, 0, limit, burst, &lastEvent)
	assert.Equal(t, time.Duration(0), lastEvent, "back to the first reservation's time-to-act, which is now")
	assert.InDelta(t, 0.0, s.tokensAt(0, limit, burst), 1e-9, "the burst's token is still taken")
}

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
	t.Parallel() // CPU-bound and self-contained: see TestMain
	rng := rand.New(rand.NewPCG(23, 14))
	rates := []float64{1e-3, 0.5, 1, 3, 7.3, 10, 1e3, 1e6, 1e6 + 1, 3.3e7, 1e9, 0}
	iterations := 3_000
	if longTests() {
		iterations = 30_000
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

// TestDurationFromTokensAtAZeroLimit: a zero limit never earns, so every
// amount of tokens, also none or a negative one (a reservation's tokens
// counted back), is the largest duration, as x/time/rate's
// durationFromTokens has it.
func TestDurationFromTokensAtAZeroLimit(t *testing.T) {
	for _, tokens := range []float64{-1, 0, 1} {
		assert.Equal(t, maxDuration, durationFromTokens(0, tokens), "tokens %v", tokens)
	}
}

// TestBucketGiveBackAtAZeroLimit: cancelling the latest reservation taken at
// a zero limit moves the latest time-to-act to the far future, by
// x/time/rate's rule (the reservation before it would be "never").
func TestBucketGiveBackAtAZeroLimit(t *testing.T) {
	const limit, burst = 0.0, 2
	s := bucketState{tokens: burst}
	var lastEvent time.Duration
	r := reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent)
	s.giveBack(&r, 0, limit, burst, &lastEvent)
	assert.Equal(t, maxDuration, lastEvent)
	assert.InDelta(t, 2.0, s.tokensAt(0, limit, burst), 1e-9, "the token is back")
}

// TestDurationFromTokensAtTwoToThe63: tokens whose time is exactly 2^63 ns,
// which float64(maxDuration) rounds to, saturate at the largest duration
// instead of converting out of range (to the smallest duration on amd64).
func TestDurationFromTokensAtTwoToThe63(t *testing.T) {
	tokens := math.Ldexp(1, 63) / float64(time.Second) // at a limit of 1 per second
	assert.Equal(t, math.Ldexp(1, 63), tokens*float64(time.Second), "the product is exactly 2^63")
	assert.Equal(t, maxDuration, durationFromTokens(1, tokens))
}

// TestKeyedLimiterTableBound: every part of a limiter stops adding keys at
// its table's bound (keytable.MaxLen) even without WithMaxKeys or with a
// larger one, and a bound below it is split as before.
func TestKeyedLimiterTableBound(t *testing.T) {
	k := NewKeyedLimiter[int](1, 1)
	for i := range k.shards {
		assert.Equal(t, keytable.MaxLen, k.shards[i].maxKeys, "part %d", i)
	}
	k = NewKeyedLimiter[int](1, 1, WithMaxKeys(1<<62))
	for i := range k.shards {
		assert.LessOrEqual(t, k.shards[i].maxKeys, keytable.MaxLen, "part %d", i)
		assert.GreaterOrEqual(t, k.shards[i].maxKeys, min(1<<62/len(k.shards), keytable.MaxLen), "part %d", i)
	}
	k = NewKeyedLimiter[int](1, 1, WithMaxKeys(5000))
	sum := 0
	for i := range k.shards {
		sum += k.shards[i].maxKeys
	}
	assert.Equal(t, 5000, sum)
}

// TestKeyedLimiterAtTheTableBound: parts that reach their table's bound
// send new keys to the shared bucket, as WithMaxKeys does: no panic, and
// the keys beyond it together get one key's burst, not one each. The bound
// is lowered here to what a test can fill.
func TestKeyedLimiterAtTheTableBound(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
	k := NewKeyedLimiter[string](1, 3, WithClock(clk))
	const perPart = 4
	for i := range k.shards {
		k.shards[i].maxKeys = perPart
	}
	held := len(k.shards) * perPart
	admitted := 0
	for i := range 10_000 {
		require.NotPanics(t, func() {
			if k.Allow(fmt.Sprint("key-", i)) {
				admitted++
			}
		})
	}
	assert.Equal(t, held, k.Len())
	assert.Equal(t, held+3, admitted, "each held key once, and the shared bucket's burst of 3")
}
