package redis

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff"
)

// TestCurve: the slow start doubles every 250 ms; after a cut the curve
// starts at 0.8 times the rate found, is back at 0.95 times it 0.72 s
// later, flat for a while, and probes past it after several seconds.
func TestCurve(t *testing.T) {
	slow := curve{slow: true, t0: 1e6, base: 5}
	assert.Equal(t, 5.0, slow.at(1e6))
	assert.InDelta(t, 10.0, slow.at(1e6+250e3), 1e-9)
	assert.InDelta(t, 80.0, slow.at(2e6), 1e-9)
	assert.Equal(t, 5.0, slow.at(0), "an instant before the curve's start reads its start")
	assert.Equal(t, 1e9, slow.at(1e6+60e6), "never infinite")

	cut := curve{t0: 0, base: 100}
	assert.InDelta(t, 80.0, cut.at(0), 1e-9)
	assert.InDelta(t, 95.0, cut.at(int64(sharedClimb*1e6)), 1e-6)
	assert.InDelta(t, 95.0, cut.at(2e6), 1, "flat near the plateau")
	assert.Greater(t, cut.at(10e6), 100.0, "probing past the rate found")
	assert.Equal(t, sharedMinRate, curve{base: 0.01}.at(0), "never below one request every 10 s")
}

// TestCapped: the estimate exceeds twice what the replicas want only when
// one of them wants more than it is given.
func TestCapped(t *testing.T) {
	c := curve{slow: true, base: 10}
	assert.Equal(t, 30.0, capped(1000, c, []float64{5, 10}))
	assert.Equal(t, 10.0, capped(1000, c, []float64{1, 1}), "never below the slow start's base")
	assert.Equal(t, 9.5, capped(1000, curve{base: 10}, []float64{1, 1}), "nor below the plateau after a cut")
	assert.Equal(t, 1000.0, capped(1000, c, []float64{1, math.Inf(1)}))
	assert.Equal(t, 20.0, capped(20, c, []float64{50}))
}

// TestShareOf: max-min fair division of the estimate.
func TestShareOf(t *testing.T) {
	inf := math.Inf(1)
	assert.Equal(t, 25.0, shareOf(100, inf, []float64{inf, inf, inf, inf}), "equal demands, equal shares")
	// Two replicas want 10 each; the other two divide the remaining 80.
	assert.Equal(t, 15.0, shareOf(100, 10, []float64{10, 10, inf, inf}), "a light replica gets what it wants, with headroom")
	assert.Equal(t, 40.0, shareOf(100, inf, []float64{10, 10, inf, inf}))
	// Everyone wants less than an equal share: each gets its demand and an
	// equal part of what is left.
	assert.InDelta(t, 10.0+70.0/3, shareOf(100, 10, []float64{10, 10, 10}), 1e-9)
	assert.Equal(t, 100.0, shareOf(100, inf, nil))
	many := make([]float64, 100)
	for i := range many {
		many[i] = inf
	}
	assert.Equal(t, sharedMinRate, shareOf(1, inf, many), "never below the floor")
	total := 0.0
	demands := []float64{1, 2, 30, 45, inf}
	for _, d := range demands {
		total += min(shareOf(60, d, demands), d)
	}
	assert.InDelta(t, 60.0, total, 1e-9, "what is given and used adds up to the estimate")
}

// TestWantsMore: a replica wants more than it is given when its requests
// wait, are throttled, or use up nearly all its rate without waiting; one
// given headroom over what it sends does not.
func TestWantsMore(t *testing.T) {
	last := backoff.AdaptiveRateStats{Rate: 10, Sent: 5, Waited: 10, Succeeded: 100, Throttled: 1}
	now := last
	now.Succeeded += 10
	assert.True(t, wantsMore(now, last, true), "before its second round trip")
	assert.False(t, wantsMore(now, last, false), "sends half its rate, nothing waits")

	waiting := now
	waiting.Waiting = 1
	assert.True(t, wantsMore(waiting, last, false), "a request waits now")
	waited := now
	waited.Waited += 6
	assert.True(t, wantsMore(waited, last, false), "most requests since the last round trip waited")
	waited.Waited = last.Waited + 5
	assert.False(t, wantsMore(waited, last, false), "half of them waited")
	throttled := now
	throttled.Throttled++
	assert.True(t, wantsMore(throttled, last, false), "throttled since the last round trip")

	usedUp := now
	usedUp.Sent = 9.2
	assert.True(t, wantsMore(usedUp, last, false), "its requests come just after their turns: nothing waits, yet it sends its whole rate")
	headroom := now
	headroom.Rate, headroom.Sent = 15, 10
	assert.False(t, wantsMore(headroom, last, false), "given 1.5 times what it sends")
	unlimited := now
	unlimited.Rate, unlimited.Sent = backoff.InfLimit, 1e6
	assert.False(t, wantsMore(unlimited, last, false), "no rate to use up")
}
