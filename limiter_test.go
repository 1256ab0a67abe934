package backoff_test

import (
	"context"
	"errors"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newFakeLimiter(r float64, burst int) (*backoff.Limiter, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(epoch)
	return backoff.NewLimiter(r, burst, backoff.WithClock(clk)), clk
}

func TestLimiterAllowBurstThenRate(t *testing.T) {
	l, clk := newFakeLimiter(10, 5)
	for i := range 5 {
		require.True(t, l.Allow(), "call %d is within the burst", i+1)
	}
	assert.False(t, l.Allow(), "the burst is spent")
	assert.InDelta(t, 0, l.Tokens(), 1e-9)
	clk.Step(99 * time.Millisecond)
	assert.False(t, l.Allow(), "0.99 of a token is not a token")
	clk.Step(time.Millisecond)
	assert.True(t, l.Allow())
	assert.False(t, l.AllowN(0+2), "two tokens are not there")
	clk.Step(time.Hour)
	assert.Equal(t, 5.0, l.Tokens(), "refills up to the burst, no more")
	assert.False(t, l.AllowN(6), "more than the burst is never allowed")
	assert.True(t, l.AllowN(5))
	assert.True(t, l.AllowN(0))
	assert.True(t, l.AllowN(-3), "a negative n counts as 0")
	assert.InDelta(t, 0, l.Tokens(), 1e-9, "and takes nothing")
	assert.Equal(t, 10.0, l.Limit())
	assert.Equal(t, 5, l.Burst())
}

func TestLimiterReserve(t *testing.T) {
	l, clk := newFakeLimiter(10, 2)
	var delays []time.Duration
	for range 5 {
		r := l.Reserve()
		require.True(t, r.OK())
		delays = append(delays, r.Delay())
	}
	assert.Equal(t, []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}, delays)

	r := l.ReserveN(3)
	assert.False(t, r.OK(), "more than the burst")
	assert.Equal(t, time.Duration(math.MaxInt64), r.Delay())
	r.Cancel() // does nothing

	last := l.Reserve()
	assert.Equal(t, 400*time.Millisecond, last.Delay())
	clk.Step(50 * time.Millisecond)
	assert.Equal(t, 350*time.Millisecond, last.Delay(), "Delay counts from the clock's now")
	before := l.Tokens()
	last.Cancel()
	assert.InDelta(t, before+1, l.Tokens(), 1e-9, "the latest reservation gives its token back")
	last.Cancel()
	assert.InDelta(t, before+1, l.Tokens(), 1e-9, "a second Cancel gives nothing")
	assert.Equal(t, 350*time.Millisecond, l.Reserve().Delay(), "the next reservation takes the cancelled one's place")
}

func TestLimiterCancelBehindOthers(t *testing.T) {
	l, _ := newFakeLimiter(10, 1)
	require.True(t, l.Allow())
	first := l.Reserve() // 100 ms
	second := l.Reserve()
	require.Equal(t, 200*time.Millisecond, second.Delay())
	before := l.Tokens()
	first.Cancel()
	// second counts on first's token: giving it back would let a third
	// reservation be served before second.
	assert.InDelta(t, before, l.Tokens(), 1e-9)
}

func TestLimiterCancelAfterItsTime(t *testing.T) {
	l, clk := newFakeLimiter(10, 1)
	require.True(t, l.Allow())
	r := l.Reserve()
	clk.Step(150 * time.Millisecond)
	before := l.Tokens()
	r.Cancel()
	assert.Equal(t, before, l.Tokens(), "a reservation whose time has come gives nothing back")
}

func TestLimiterInfinite(t *testing.T) {
	for _, r := range []float64{backoff.InfLimit, math.Inf(1)} {
		l, _ := newFakeLimiter(r, 0)
		assert.Equal(t, backoff.InfLimit, l.Limit())
		for range 1000 {
			require.True(t, l.Allow())
		}
		assert.True(t, l.AllowN(1_000_000), "n above the burst is allowed when unlimited")
		res := l.ReserveN(7)
		assert.True(t, res.OK())
		assert.Zero(t, res.Delay())
		res.Cancel()
		require.NoError(t, l.WaitN(context.Background(), 100))
	}
}

func TestLimiterZeroLimitAndBurst(t *testing.T) {
	l, clk := newFakeLimiter(0, 2)
	assert.True(t, l.Allow())
	assert.True(t, l.Allow())
	clk.Step(1000 * time.Hour)
	assert.False(t, l.Allow(), "a zero limit earns nothing (x/time/rate: a zero Limit allows no events)")
	r := l.Reserve()
	assert.True(t, r.OK(), "as with x/time/rate, the reservation is granted ...")
	assert.Equal(t, time.Duration(math.MaxInt64), r.Delay(), "... for never")

	z, _ := newFakeLimiter(10, 0)
	assert.False(t, z.Allow(), "a zero burst allows nothing")
	assert.ErrorIs(t, z.Wait(context.Background()), backoff.ErrExceedsBurst)
}

func TestLimiterBadInput(t *testing.T) {
	assert.PanicsWithValue(t, "backoff: NewLimiter: r must not be negative or NaN, got -1", func() { backoff.NewLimiter(-1, 1) })
	assert.PanicsWithValue(t, "backoff: NewLimiter: r must not be negative or NaN, got NaN", func() { backoff.NewLimiter(math.NaN(), 1) })
	assert.PanicsWithValue(t, "backoff: NewLimiter: burst must not be negative, got -1", func() { backoff.NewLimiter(1, -1) })

	l, _ := newFakeLimiter(10, 5)
	l.SetLimit(-3)
	assert.Equal(t, 0.0, l.Limit(), "a negative rate at call time counts as 0")
	l.SetLimit(math.NaN())
	assert.Equal(t, 0.0, l.Limit())
	l.SetLimit(math.Inf(1))
	assert.Equal(t, backoff.InfLimit, l.Limit())
	l.SetBurst(-1)
	assert.Equal(t, 0, l.Burst())
}

func TestLimiterSetLimitAndBurst(t *testing.T) {
	l, clk := newFakeLimiter(10, 10)
	require.True(t, l.AllowN(10))
	clk.Step(500 * time.Millisecond) // 5 tokens earned at 10/s
	l.SetLimit(1)
	assert.InDelta(t, 5, l.Tokens(), 1e-9, "tokens earned before SetLimit are kept")
	clk.Step(time.Second)
	assert.InDelta(t, 6, l.Tokens(), 1e-9, "and later ones are earned at the new rate")
	l.SetBurst(2)
	assert.InDelta(t, 2, l.Tokens(), 1e-9, "capped at the new burst")
	assert.False(t, l.AllowN(3))
	assert.True(t, l.AllowN(2))
}

func TestLimiterClockBackwards(t *testing.T) {
	l, clk := newFakeLimiter(1, 1)
	require.True(t, l.Allow())
	clk.Step(time.Second)
	require.True(t, l.Allow())
	clk.SetTime(epoch) // back one second
	assert.False(t, l.Allow(), "going back earns nothing")
	clk.SetTime(epoch.Add(time.Second))
	assert.False(t, l.Allow(), "the second already earned is not earned again")
	clk.SetTime(epoch.Add(2 * time.Second))
	assert.True(t, l.Allow())
}

// TestLimiterAdmissionBound is the property: over any interval, the tokens
// admitted never exceed burst + rate × (the time the clock advanced past the
// latest instant seen before). Goroutines call AllowN concurrently while the
// clock stands; between rounds the clock is stepped forward or back.
func TestLimiterAdmissionBound(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	for _, tc := range []struct {
		r     float64
		burst int
	}{{10, 5}, {3, 2}, {7.3, 4}, {1000, 1}, {0.5, 3}} {
		l, clk := newFakeLimiter(tc.r, tc.burst)
		rng := rand.New(rand.NewPCG(1, uint64(tc.burst)))
		const goroutines = 4
		rounds := 100
		if longTests() {
			rounds = 400 // the long mode (CI runs it without -race)
		}
		admitted := make([]int64, rounds+1) // admitted[i]: tokens in round i
		highWater := make([]time.Duration, rounds+1)
		var hw time.Duration
		for round := 1; round <= rounds; round++ {
			// Forward up to 1 s, or back up to 1 s (never before the start).
			step := time.Duration(rng.Int64N(int64(2*time.Second))) - time.Second
			next := clk.Now().Add(step)
			if next.Before(epoch) {
				next = epoch
			}
			clk.SetTime(next)
			hw = max(hw, next.Sub(epoch))
			highWater[round] = hw
			var wg sync.WaitGroup
			var sum atomic.Int64
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 20 {
						n := 1 + (g+i)%tc.burst
						if l.AllowN(n) {
							sum.Add(int64(n))
						}
					}
				}()
			}
			wg.Wait()
			admitted[round] = sum.Load()
		}
		for i := 1; i <= rounds; i++ {
			var total int64
			for j := i; j <= rounds; j++ {
				total += admitted[j]
				earned := tc.r * (highWater[j] - highWater[i]).Seconds()
				require.LessOrEqualf(t, float64(total), float64(tc.burst)+earned+1e-9,
					"r=%v burst=%d rounds %d..%d", tc.r, tc.burst, i, j)
			}
		}
	}
}

// TestLimiterContention hammers one limiter from two goroutines while the
// clock advances 10 s in 10 ms steps (both goroutines make their calls
// concurrently within each step): what they admit is at most burst + rate ×
// 10 s, exactly, and no token is lost either.
func TestLimiterContention(t *testing.T) {
	t.Parallel()
	const r, burst, steps = 100.0, 10, 1000
	l, clk := newFakeLimiter(r, burst)
	var admitted atomic.Int64
	for range steps {
		clk.Step(10 * time.Millisecond)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 8 {
					if l.Allow() {
						admitted.Add(1)
					}
				}
			}()
		}
		wg.Wait()
	}
	assert.LessOrEqual(t, admitted.Load(), int64(burst+r*10), "never more than burst + rate × elapsed")
	assert.GreaterOrEqual(t, admitted.Load(), int64(burst+r*10)-1, "and nothing lost but float rounding")
}

// deadlineCtx is a context whose deadline is a fake-clock instant and which
// is never done by itself, so that a test can give Wait a deadline without a
// real timer.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func TestLimiterWaitReturnsWhenStepped(t *testing.T) {
	clk := newHandshakeClock()
	l := backoff.NewLimiter(10, 1, backoff.WithClock(clk))
	require.NoError(t, l.Wait(context.Background()), "the burst: no wait")
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background()) }()
	require.Equal(t, 100*time.Millisecond, clk.nextArmed(t, nil))
	clk.Step(99 * time.Millisecond)
	assert.Zero(t, clk.fired.Load(), "not before its time")
	clk.Step(time.Millisecond)
	assert.Equal(t, int64(1), clk.fired.Load(), "exactly at its time")
	require.NoError(t, waitFor(t, "Wait to return", done))
	assert.False(t, clk.HasWaiters())
}

// TestLimiterWaitWithATokenArmsNoTimer: a Wait that finds its tokens returns
// at once, on a FakeClock that is never stepped, and arms no timer (a timer
// of 0 would wait there for a step that never comes).
func TestLimiterWaitWithATokenArmsNoTimer(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := backoff.NewLimiter(1, 2, backoff.WithClock(clk))
	k := backoff.NewKeyedLimiter[string](1, 2, backoff.WithClock(clk))
	done := make(chan error, 2)
	go func() {
		done <- l.Wait(context.Background())
		done <- k.Wait(context.Background(), "a")
	}()
	require.NoError(t, waitFor(t, "Limiter.Wait with a token to return", done, clk))
	require.NoError(t, waitFor(t, "KeyedLimiter.Wait with a token to return", done, clk))
	assert.False(t, clk.HasWaiters(), "no timer left armed")
	assert.True(t, l.Allow(), "the second token of the burst is still there")
}

func TestLimiterWaitCancelled(t *testing.T) {
	clk := newHandshakeClock()
	l := backoff.NewLimiter(10, 1, backoff.WithClock(clk))
	require.True(t, l.Allow())
	cause := errors.New("client went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	clk.nextArmed(t, nil)
	require.True(t, clk.HasWaiters())
	cancel(cause)
	err := waitFor(t, "Wait to return", done)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, cause, "the cause is reported")
	assert.EqualError(t, err, "context canceled: client went away", "the message names both")
	assert.False(t, clk.HasWaiters(), "no timer is left on the clock")
	assert.InDelta(t, 0, l.Tokens(), 1e-9, "the token is given back")

	// The timer is reused by the next wait (one NewTimer, then Resets).
	go func() { done <- l.Wait(context.Background()) }()
	assert.Equal(t, 100*time.Millisecond, clk.nextArmed(t, nil))
	clk.Step(100 * time.Millisecond)
	require.NoError(t, waitFor(t, "Wait to return", done))
}

func TestLimiterWaitPlainFakeClockCancelled(t *testing.T) {
	l, clk := newFakeLimiter(1, 1)
	require.True(t, l.Allow())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, l.Wait(ctx), context.Canceled, "a done context returns at once")
	assert.False(t, clk.HasWaiters())
	assert.InDelta(t, 0, l.Tokens(), 1e-9, "and takes nothing")
}

func TestLimiterWaitDeadline(t *testing.T) {
	clk := newHandshakeClock()
	l := backoff.NewLimiter(10, 1, backoff.WithClock(clk))
	require.True(t, l.Allow())
	ctx := deadlineCtx{Context: context.Background(), deadline: clk.Now().Add(99 * time.Millisecond)}
	err := l.Wait(ctx)
	assert.ErrorIs(t, err, backoff.ErrWaitExceedsDeadline)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, clk.HasWaiters())
	assert.InDelta(t, 0, l.Tokens(), 1e-9, "no token taken")
	assert.ErrorIs(t, l.WaitN(ctx, 2), backoff.ErrExceedsBurst)

	ctx.deadline = clk.Now().Add(100 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	require.Equal(t, 100*time.Millisecond, clk.nextArmed(t, nil), "a wait that fits the deadline waits")
	clk.Step(100 * time.Millisecond)
	require.NoError(t, waitFor(t, "Wait to return", done))
}

// bucketModel is the reference for FuzzLimiter: a token bucket written as
// plainly as possible, in time.Time, with the arithmetic x/time/rate uses and
// a latest instant that never moves back.
type bucketModel struct {
	limit, tokens float64
	burst         int
	last          time.Time
}

func (m *bucketModel) advance(now time.Time) float64 {
	tokens := m.tokens
	if now.After(m.last) {
		tokens += now.Sub(m.last).Seconds() * m.limit
	}
	return math.Min(tokens, float64(m.burst))
}

func (m *bucketModel) settle(now time.Time) {
	m.tokens = m.advance(now)
	if now.After(m.last) {
		m.last = now
	}
}

// reserve returns the wait for n tokens at now and takes them if the wait
// is at most maxWait.
func (m *bucketModel) reserve(now time.Time, n int, maxWait time.Duration) (time.Duration, bool) {
	if m.limit == backoff.InfLimit {
		return 0, true
	}
	left := m.advance(now) - float64(n)
	var wait time.Duration
	if left < 0 {
		if m.limit == 0 {
			wait = math.MaxInt64
		} else if w := -left / m.limit * 1e9; w >= math.MaxInt64 {
			wait = math.MaxInt64
		} else {
			wait = time.Duration(w)
		}
	}
	if n > m.burst || wait > maxWait {
		return wait, false
	}
	m.tokens = left
	if now.After(m.last) {
		m.last = now
	}
	return wait, true
}

// FuzzLimiter runs a random sequence of clock steps (forward and back),
// AllowN, ReserveN, SetLimit and SetBurst on a Limiter and on bucketModel,
// and requires the same answers; and, for Allow alone, that what was
// admitted never exceeds burst + rate × the time the clock advanced past
// its latest instant (no interval is earned twice).
func FuzzLimiter(f *testing.F) {
	f.Add([]byte{2, 2, 2, 2, 0, 10, 2, 3, 1, 40, 2, 2, 0, 90, 3, 3})
	f.Add([]byte{4, 0, 2, 2, 5, 9, 0, 255, 2, 2, 2, 3, 1, 1, 1, 200, 0, 7})
	f.Add([]byte{0, 1, 2, 1, 2, 1, 2, 1, 1, 3, 0, 3, 2, 1})
	limits := []float64{0, 0.5, 3, 7.3, 10, 1000, backoff.InfLimit}
	f.Fuzz(func(t *testing.T, ops []byte) {
		clk := clocktesting.NewFakeClock(epoch)
		l := backoff.NewLimiter(10, 3, backoff.WithClock(clk))
		m := &bucketModel{limit: 10, burst: 3, tokens: 3, last: epoch}
		// Admission bound, checked while the limit and burst are the
		// initial ones and only Allow takes tokens.
		bounded, admitted, highWater := true, 0, epoch
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, int(ops[i+1])
			now := clk.Now()
			switch op {
			case 0:
				clk.Step(time.Duration(arg) * 7 * time.Millisecond)
			case 1:
				clk.Step(-time.Duration(arg) * 5 * time.Millisecond)
			case 2:
				n := arg % 5
				_, want := m.reserve(now, n, 0)
				if got := l.AllowN(n); got != want {
					t.Fatalf("op %d: AllowN(%d) = %v, model %v", i/2, n, got, want)
				}
				if want {
					admitted += n
				}
			case 3:
				n := arg % 5
				wait, ok := m.reserve(now, n, math.MaxInt64)
				r := l.ReserveN(n)
				if r.OK() != ok || (ok && r.Delay() != wait) {
					t.Fatalf("op %d: ReserveN(%d) = %v %v, model %v %v", i/2, n, r.OK(), r.Delay(), ok, wait)
				}
				bounded = false
			case 4:
				lim := limits[arg%len(limits)]
				m.settle(now)
				m.limit = lim
				l.SetLimit(lim)
				bounded = false
			case 5:
				b := arg % 6
				m.settle(now)
				m.burst = b
				l.SetBurst(b)
				bounded = false
			}
			if clk.Now().After(highWater) {
				highWater = clk.Now()
			}
			if bounded {
				limit := 10 * highWater.Sub(epoch).Seconds()
				if float64(admitted) > 3+limit+1e-9 {
					t.Fatalf("op %d: admitted %d > burst 3 + %v earned", i/2, admitted, limit)
				}
			}
		}
		if got, want := l.Tokens(), m.advance(clk.Now()); got != want && m.limit != backoff.InfLimit {
			t.Fatalf("Tokens = %v, model %v", got, want)
		}
	})
}

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
	t.Parallel()
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
	t.Parallel()
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

// TestLimiterGrantsWhileClockMovesStayWithinTheRate: two goroutines make
// 20,000 Allows each on a limiter at 1e9 per second with a burst of 5 (a
// token per nanosecond: the bucket is full again at every call that comes a
// nanosecond after the last grant, which is when a grant takes no lock)
// while the clock is stepped 4,000 times by 0 to 2 ns, with SetBurst and
// Tokens in between; what they admit, and what is left to take afterwards,
// never exceeds the bursts + rate × elapsed. Under -race this also checks
// that the lock-free grants are synchronised with the locked calls.
func TestLimiterGrantsWhileClockMovesStayWithinTheRate(t *testing.T) {
	t.Parallel()
	const r, burst, steps = 1e9, 5, 4000
	l, clk := newFakeLimiter(r, burst)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20_000 {
				if l.Allow() {
					admitted.Add(1)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var elapsed time.Duration
	for i := range steps {
		d := time.Duration(rng.IntN(3))
		clk.Step(d)
		elapsed += d
		switch i % 1000 {
		case 500:
			l.SetBurst(burst) // the same burst: refills nothing, settles the bucket
		case 700:
			assert.LessOrEqual(t, l.Tokens(), float64(burst))
		}
		runtime.Gosched()
	}
	wg.Wait()
	left := max(l.Tokens(), 0)
	assert.LessOrEqual(t, float64(admitted.Load())+left, float64(burst)+r*elapsed.Seconds()+1e-6,
		"never more than burst + rate × elapsed")
}
