package backoff_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/internal/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// sendAt sends n requests through r, one every interval, each answered
// with a success.
func sendAt(t *testing.T, r *backoff.AdaptiveRate, clk *testingclock.FakeClock, n int, interval time.Duration) {
	t.Helper()
	for range n {
		if r.Allow() {
			r.Succeeded()
		}
		clk.Step(interval)
	}
}

// TestAdaptiveRateStartsSlow: the rate starts at DefaultInitialRate and
// every success adds one request per second until the first throttling
// answer; WithInitialRate(InfLimit) starts with no limit instead.
func TestAdaptiveRateStartsSlow(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk))
	assert.Equal(t, float64(backoff.DefaultInitialRate), r.Rate())
	require.True(t, r.Allow())
	assert.False(t, r.Allow(), "the next slot is 1/rate later")
	r.Succeeded()
	assert.Equal(t, float64(backoff.DefaultInitialRate+1), r.Rate())
	sendAt(t, r, clk, 100, 10*time.Millisecond) // asking 100/s for 1 s
	assert.InDelta(t, 2.7*backoff.DefaultInitialRate, r.Rate(), backoff.DefaultInitialRate,
		"the rate grows by about e in a second of successes")

	slow := backoff.NewAdaptiveRate(backoff.WithClock(clk))
	sendAt(t, slow, clk, 600, time.Second) // one request a second for 10 minutes
	assert.LessOrEqual(t, slow.Rate(), float64(backoff.DefaultInitialRate+1),
		"once the send rate is measured, the rate grows no further than four times it")

	unlimited := backoff.NewAdaptiveRate(backoff.WithClock(clk), backoff.WithInitialRate(backoff.InfLimit))
	for range 1000 {
		require.True(t, unlimited.Allow())
		unlimited.Succeeded()
	}
	assert.Equal(t, backoff.InfLimit, unlimited.Rate(), "successes alone set no limit")

	assert.Equal(t, 2.5, backoff.NewAdaptiveRate(backoff.WithInitialRate(2.5)).Rate())
}

func TestAdaptiveRateCutsToTheRateThatMetTheQuota(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk), backoff.WithInitialRate(backoff.InfLimit))
	sendAt(t, r, clk, 30, 100*time.Millisecond) // 10 per second for 3 s
	r.Throttled(0)
	assert.InDelta(t, 8, r.Rate(), 0.5, "0.8 times the rate requests were sent at")
	cut := r.Rate()
	r.Throttled(0)
	assert.Equal(t, cut, r.Rate(), "a throttle within one interval answers a request sent before the cut")

	// Paced at the new rate: one request per 1/rate.
	assert.True(t, r.Allow())
	assert.False(t, r.Allow())
	clk.Step(time.Duration(float64(time.Second) / cut))
	assert.True(t, r.Allow())
}

// TestAdaptiveRateCutsAgainForRequestsSentAfterTheCut: a throttling answer
// to a request sent after the last cut cuts again. With nothing in flight
// at the cut, that is any answer from one request interval after it, and
// none before; a Wait that its ctx ended sent no request.
func TestAdaptiveRateCutsAgainForRequestsSentAfterTheCut(t *testing.T) {
	clk := &armingClock{testingclock.NewFakeClock(epoch), make(chan time.Duration)}
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk))
	sendAt(t, r, clk.FakeClock, 10, time.Second) // 1 per second, each answered at once
	require.True(t, r.Allow())
	// A Wait for the next slot that ends with its ctx. (Only one: a later
	// Wait may reuse its timer, which armingClock would not report.)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Wait(ctx) }()
	waitFor(t, "Wait's timer", clk.armed, clk)
	cancel()
	require.ErrorIs(t, waitFor(t, "Wait to return", done, clk), context.Canceled)
	r.Succeeded() // the one request sent is answered: nothing is in flight
	r.Throttled(0)
	cut := r.Rate()
	clk.Step(time.Duration(float64(time.Second) / cut))
	r.Throttled(0)
	again := r.Rate()
	assert.Less(t, again, cut, "one interval after a cut with nothing in flight: a request sent after it")
	clk.Step(time.Duration(float64(time.Second)/again) - 1)
	r.Throttled(0)
	assert.Equal(t, again, r.Rate(), "within one interval of the cut: an answer to a request sent before it")
}

func TestAdaptiveRateHonoursRetryAfter(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk), backoff.WithInitialRate(backoff.InfLimit))
	sendAt(t, r, clk, 30, 100*time.Millisecond)
	r.Throttled(3 * time.Second)
	clk.Step(3*time.Second - time.Millisecond)
	assert.False(t, r.Allow(), "nothing before the Retry-After has passed")
	clk.Step(time.Millisecond)
	assert.True(t, r.Allow())
	// The rate is cut to the share the quota granted: 30 successes over the
	// 5 s from the start to the end of the Retry-After, less the last second
	// of it, which a header in whole seconds cannot resolve, times 0.8.
	assert.InDelta(t, 0.8*30/5.0, r.Rate(), 0.2)
}

func TestAdaptiveRateClimbsBackAndProbesSlowly(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk), backoff.WithInitialRate(backoff.InfLimit))
	sendAt(t, r, clk, 200, 10*time.Millisecond) // 100 per second for 2 s
	r.Throttled(0)
	ceiling := r.Rate() / 0.8
	clk.Step(time.Duration(float64(time.Second) / r.Rate()))
	require.True(t, r.Allow())
	r.Succeeded()
	assert.InDelta(t, 0.8*ceiling, r.Rate(), 0.02*ceiling, "the curve starts at the cut")
	rates := map[int]float64{}
	for i := range 1300 { // 13 s, asking far more than the rate allows
		if r.Allow() {
			r.Succeeded()
		}
		clk.Step(10 * time.Millisecond)
		if (i+1)%100 == 0 {
			rates[(i+1)/100] = r.Rate()
		}
	}
	assert.InDelta(t, 0.95*ceiling, rates[1], 0.02*ceiling, "just below the ceiling in about a second")
	assert.Less(t, rates[4], ceiling, "then flat")
	assert.Greater(t, rates[4], 0.95*ceiling)
	assert.InDelta(t, ceiling, rates[5], 0.05*ceiling, "back to the ceiling after about 5 s")
	assert.Greater(t, rates[12], 1.8*ceiling, "and faster the longer no throttle comes")
}

func TestAdaptiveRateWait(t *testing.T) {
	// slowed returns an AdaptiveRate cut to 0.8 per second, on a clock that
	// reports each timer it creates.
	slowed := func() (*backoff.AdaptiveRate, *armingClock) {
		clk := &armingClock{testingclock.NewFakeClock(epoch), make(chan time.Duration)}
		r := backoff.NewAdaptiveRate(backoff.WithClock(clk))
		sendAt(t, r, clk.FakeClock, 10, time.Second) // 1 per second
		r.Throttled(0)
		require.NoError(t, r.Wait(context.Background()), "the first slot is free")
		return r, clk
	}
	rate := 0.8
	interval := time.Duration(float64(time.Second) / rate)

	r, clk := slowed()
	done := make(chan error)
	go func() { done <- r.Wait(context.Background()) }()
	d := waitFor(t, "Wait's timer", clk.armed, clk)
	assert.InDelta(t, float64(interval), float64(d), float64(50*time.Millisecond), "one interval at the cut rate")
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before the clock moved", err)
	default:
	}
	clk.Step(d - 1)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before its time", err)
	default:
	}
	clk.Step(1)
	assert.NoError(t, waitFor(t, "Wait to return", done, clk))

	r, clk = slowed()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- r.Wait(ctx) }()
	waitFor(t, "Wait's timer", clk.armed, clk)
	cancel()
	assert.ErrorIs(t, waitFor(t, "Wait to return", done, clk), context.Canceled)
	assert.ErrorIs(t, r.Wait(ctx), context.Canceled, "a done context fails at once")
	assert.False(t, r.Allow(), "the slot given back is the next one, 1/rate after the last")
	clk.Step(interval + 50*time.Millisecond)
	assert.True(t, r.Allow())
}

// TestAdaptiveRateWaitGivesBackOnlyAFreeSlot: a Wait that gives up gives
// its slot back only if no later request holds the slot after it. Here a
// second Wait holds it: giving the first slot back would let a third
// request go one interval before the second, above the rate.
func TestAdaptiveRateWaitGivesBackOnlyAFreeSlot(t *testing.T) {
	clk := &armingClock{testingclock.NewFakeClock(epoch), make(chan time.Duration)}
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk), backoff.WithInitialRate(1))
	require.True(t, r.Allow()) // the slot at 0 s
	ctx, cancel := context.WithCancel(context.Background())
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- r.Wait(ctx) }()
	assert.Equal(t, time.Second, waitFor(t, "the first Wait's timer", clk.armed, clk))
	go func() { second <- r.Wait(context.Background()) }()
	assert.Equal(t, 2*time.Second, waitFor(t, "the second Wait's timer", clk.armed, clk))
	cancel()
	assert.ErrorIs(t, waitFor(t, "the first Wait to return", first, clk), context.Canceled)

	clk.Step(time.Second)
	assert.False(t, r.Allow(), "1 s: the first slot stays unused, the second Wait holds the next")
	clk.Step(time.Second)
	assert.NoError(t, waitFor(t, "the second Wait to return at 2 s", second, clk))
	assert.False(t, r.Allow(), "2 s: the second Wait took this slot")
	clk.Step(time.Second)
	assert.True(t, r.Allow(), "3 s: the next slot")
}

func TestAdaptiveRateConcurrentUse(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if r.Allow() {
					if (i+g)%7 == 0 {
						r.Throttled(time.Duration(i%3) * time.Millisecond)
					} else {
						r.Succeeded()
					}
				}
				if i%50 == 0 {
					clk.Step(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	assert.Greater(t, r.Rate(), 0.0)
}

func TestAdaptiveRateBadInput(t *testing.T) {
	assert.PanicsWithValue(t, "backoff: AdaptiveRate.Wait: ctx must not be nil, got <nil>", func() {
		//lint:ignore SA1012 the nil context is the bad input under test
		_ = backoff.NewAdaptiveRate().Wait(nil) //nolint:staticcheck
	})
	for _, r := range []float64{0, -1, math.NaN(), math.Inf(-1)} {
		assert.PanicsWithValue(t, fmt.Sprintf("backoff: WithInitialRate: r must be a positive number of requests per second, got %v", r),
			func() { backoff.WithInitialRate(r) })
	}
}

func BenchmarkAdaptiveRateAllowSucceeded(b *testing.B) {
	r := backoff.NewAdaptiveRate()
	b.ReportAllocs()
	for range b.N {
		if r.Allow() {
			r.Succeeded()
		}
	}
}

// TestAdaptiveRateIdleTimeDoesNotWaterDownTheShare: a client idle for an
// hour, then sending 50/s for 10 s, all accepted, then throttled with a
// 1 s Retry-After, estimates its share from the 10 s it sent, not from the
// hour: its rate falls to about 0.8 × 500/10 s (a Retry-After of one second
// may mean any wait up to a second), not to the floor.
func TestAdaptiveRateIdleTimeDoesNotWaterDownTheShare(t *testing.T) {
	for _, idle := range []time.Duration{0, time.Minute, time.Hour} {
		fc := testingclock.NewFakeClock(epoch)
		r := backoff.NewAdaptiveRate(backoff.WithClock(fc), backoff.WithInitialRate(backoff.InfLimit))
		fc.Step(idle)
		for range 500 {
			require.True(t, r.Allow())
			r.Succeeded()
			fc.Step(20 * time.Millisecond)
		}
		r.Throttled(time.Second)
		assert.InDelta(t, 0.8*500/10.0, r.Rate(), 1, "after %v idle", idle)
	}
}

// aloneWithQuota runs one client alone with a quota of quota requests per
// second (a token bucket holding a second's worth) for 2 minutes, on a
// fake clock: the client sends whenever its AdaptiveRate allows, as many
// requests in flight as that makes, each answered rtt later, a 429 with a
// Retry-After in whole seconds if hint is set and with none otherwise. It
// returns the requests accepted per second from 30 s on, as a share of the
// quota.
func aloneWithQuota(quota float64, rtt time.Duration, hint bool) float64 {
	const from, to = 30 * time.Second, 120 * time.Second
	const evTry, evAnswer = 0, 1
	clk := testingclock.NewFakeClock(epoch)
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk))
	var q sim.Agenda
	tokens, filled := quota, time.Duration(0)
	var accepted []bool // by request
	var lastSent, hold time.Duration
	good := 0
	q.Schedule(0, evTry, 0)
	for q.Len() > 0 {
		e := q.Next()
		if e.At > to {
			break
		}
		clk.SetTime(epoch.Add(e.At))
		switch e.Kind {
		case evTry:
			if r.Allow() {
				lastSent = e.At
				tokens, filled = min(tokens+(e.At-filled).Seconds()*quota, quota), e.At
				accepted = append(accepted, tokens >= 1)
				if tokens >= 1 {
					tokens--
				}
				q.Schedule(e.At+rtt, evAnswer, len(accepted)-1)
			}
			// The next try: when the rate frees the next slot or the hold
			// ends, whichever is ahead; a short poll if neither is.
			next := e.At + 50*time.Microsecond
			for _, free := range [...]time.Duration{lastSent + time.Duration(float64(time.Second)/r.Rate()), hold} {
				if free > e.At && (next == e.At+50*time.Microsecond || free < next) {
					next = free
				}
			}
			q.Schedule(next, evTry, 0)
		case evAnswer:
			if accepted[e.ID] {
				r.Succeeded()
				if e.At >= from {
					good++
				}
				continue
			}
			var retryAfter time.Duration
			if hint {
				retryAfter = max(time.Duration(math.Ceil(max(1-tokens, 0)/quota))*time.Second, time.Second)
				hold = max(hold, e.At+retryAfter)
			}
			r.Throttled(retryAfter)
		}
	}
	return float64(good) / (to - from).Seconds() / quota
}

// TestAdaptiveRateAloneUsesItsQuota: a client alone with its quota uses
// most of it, from 2 to 2,000 requests per second and with 20 or 200 ms
// round trips, that is with up to 400 requests in flight when the quota
// first answers 429: those answers come after the cut that the first of
// them made and must not cut again (each would take another fifth off the
// rate). A Retry-After holds the client for a whole second at each probe
// past the quota, which at 2 requests per second is a fair share of the
// time.
//
// At 2,000 requests per second a run is half a million events, seconds
// under the race detector: those runs are part of the long mode
// (BACKOFF_LONG=1, which CI runs without -race).
func TestAdaptiveRateAloneUsesItsQuota(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	quotas := []float64{2, 100}
	if longTests() {
		quotas = append(quotas, 2000)
	}
	for _, quota := range quotas {
		for _, rtt := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond} {
			for _, hint := range []bool{false, true} {
				share := aloneWithQuota(quota, rtt, hint)
				t.Logf("quota %v/s, round trip %v, Retry-After %v: %.0f%% of the quota", quota, rtt, hint, 100*share)
				want := 0.85
				if hint && quota < 10 {
					want = 0.7
				}
				assert.GreaterOrEqual(t, share, want, "quota %v/s, round trip %v, Retry-After %v", quota, rtt, hint)
			}
		}
	}
}
