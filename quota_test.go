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

// TestAdaptiveRateQuota: a reported quota sets the rate to what is left,
// less the requests in flight, spread over the time to the reset; successes
// do not raise it until the reset; nothing left holds every request until
// the reset; nonsense reports change nothing.
func TestAdaptiveRateQuota(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	r := backoff.NewAdaptiveRate(backoff.WithClock(clk))

	for _, bad := range []struct {
		remaining float64
		reset     time.Duration
	}{{math.NaN(), time.Second}, {-1, time.Second}, {10, 0}, {10, -time.Second}} {
		r.Quota(bad.remaining, bad.reset)
		assert.Equal(t, float64(backoff.DefaultInitialRate), r.Rate(), "Quota(%v, %v) is ignored", bad.remaining, bad.reset)
	}

	r.Quota(100, 10*time.Second)
	assert.InDelta(t, 100/9.5, r.Rate(), 1e-9, "100 left for 10 s, in whole seconds: over 9.5 s")
	r = backoff.NewAdaptiveRate(backoff.WithClock(clk))
	r.Quota(100, 10*time.Second+time.Millisecond)
	assert.InDelta(t, 100/10.001, r.Rate(), 1e-9, "100 left for 10.001 s")
	for range 20 {
		require.True(t, r.Allow())
		r.Succeeded()
		clk.Step(101 * time.Millisecond)
	}
	assert.InDelta(t, 100/10.001, r.Rate(), 1e-9, "successes do not raise a reported rate")

	// Five requests sent and not answered will spend the quota too.
	for range 5 {
		clk.Step(101 * time.Millisecond)
		require.True(t, r.Allow())
	}
	r.Quota(25, 2*time.Second+time.Millisecond)
	assert.InDelta(t, 20/2.001, r.Rate(), 1e-9, "(25 - 5 in flight) / 2.001 s")

	r.Quota(0, 3*time.Second)
	clk.Step(3*time.Second - time.Millisecond)
	assert.False(t, r.Allow(), "nothing left: held until the reset")
	clk.Step(time.Millisecond)
	assert.True(t, r.Allow())
}
