package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// TestAdaptiveRateSteered: while steered, the rate is the one Steer set:
// successes do not raise it and throttling answers do not cut it, but a
// Retry-After still holds every request, and WithOnThrottled hears of each
// answer that is not stale.
func TestAdaptiveRateSteered(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	var heard []time.Duration
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk), backoff.WithOnThrottled(func(ra time.Duration) { heard = append(heard, ra) }))
	r.Steer(40)
	assert.Equal(t, 40.0, r.Rate())
	sendAt(t, r, clk, 200, 25*time.Millisecond)
	assert.Equal(t, 40.0, r.Rate(), "successes do not raise a steered rate")

	require.True(t, r.Allow())
	r.Throttled(2 * time.Second)
	assert.Equal(t, 40.0, r.Rate(), "a throttling answer does not cut a steered rate")
	assert.Equal(t, []time.Duration{2 * time.Second}, heard)
	clk.Step(1990 * time.Millisecond)
	assert.False(t, r.Allow(), "the Retry-After holds requests")
	clk.Step(10 * time.Millisecond)
	assert.True(t, r.Allow())
	r.Succeeded()

	// A cut by Steer: the answers to the requests in flight are stale.
	clk.Step(time.Second)
	require.True(t, r.Allow())
	clk.Step(25 * time.Millisecond)
	require.True(t, r.Allow())
	r.Steer(20)
	r.Throttled(0)
	r.Throttled(0)
	assert.Len(t, heard, 1, "answers to requests sent before the cut are not passed on")
	clk.Step(time.Second)
	require.True(t, r.Allow())
	r.Throttled(0)
	assert.Equal(t, []time.Duration{2 * time.Second, 0}, heard, "an answer to a request sent after the cut is")

	st := r.Stats()
	assert.True(t, st.Steered)
	assert.Equal(t, 20.0, st.Rate)
	assert.Equal(t, uint64(4), st.Throttled)
	assert.Equal(t, uint64(201), st.Succeeded)
}

// TestAdaptiveRateUnsteer: Unsteer gives the rate back to the law, which
// goes on from the steered rate as after a cut that found it.
func TestAdaptiveRateUnsteer(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk))
	r.Steer(50)
	sendAt(t, r, clk, 100, 20*time.Millisecond)
	r.Unsteer()
	assert.False(t, r.Stats().Steered)
	sendAt(t, r, clk, 50, 20*time.Millisecond)
	assert.InDelta(t, 0.95*50, r.Rate(), 1, "the curve's plateau, just below where the quota was")
	sendAt(t, r, clk, 1500, 10*time.Millisecond) // 15 s of asking 100/s
	assert.Greater(t, r.Rate(), 55.0, "then it probes past it")

	require.True(t, r.Allow())
	r.Throttled(0)
	assert.InDelta(t, 0.8*100, r.Rate(), 5, "a throttling answer cuts again, from the rate requests were sent at")
	r.Unsteer() // not steered: nothing happens
	assert.False(t, r.Stats().Steered)
}

// TestAdaptiveRateSteeredQuota: a quota report holds requests when nothing
// is left, but does not set a steered rate, which is a share of it.
func TestAdaptiveRateSteeredQuota(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk))
	r.Steer(10)
	r.Quota(500, 10*time.Second)
	assert.Equal(t, 10.0, r.Rate(), "the report is the whole quota's")
	r.Quota(0, 3*time.Second)
	clk.Step(2 * time.Second)
	assert.False(t, r.Allow(), "nothing left: held until the reset")
	clk.Step(time.Second)
	assert.True(t, r.Allow())
}

// TestAdaptiveRateSteerClamps: Steer never sets a rate below one request
// every 10 s or above 10⁹ a second.
func TestAdaptiveRateSteerClamps(t *testing.T) {
	r := backoff.NewAdaptiveRate(backoff.WithClock(testingclock.NewFakeClock(epoch)))
	for _, v := range []float64{math.NaN(), -1, 0, 0.01} {
		r.Steer(v)
		assert.Equal(t, 0.1, r.Rate(), "Steer(%v)", v)
	}
	r.Steer(math.Inf(1))
	assert.Equal(t, 1e9, r.Rate())
}
