package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// small is docs/retry-budgets.md's scenario scaled down tenfold in rate and threefold in
// time, so that it runs in a blink under the race detector too.
var small = scenario{
	clients:        100,
	outageStart:    5 * time.Second,
	outageEnd:      25 * time.Second,
	duration:       35 * time.Second,
	floorPerSecond: 1,
}

// TestRetryStormShape checks the shape docs/retry-budgets.md shows: without a budget the
// outage quintuples the load; with a 10% budget (1 s window) it stays within
// 1.1 times the normal load plus the floor, every second; both recover within
// a second of the end of the outage.
func TestRetryStormShape(t *testing.T) {
	without, with := small.simulate(0, time.Second), small.simulate(0.1, time.Second)
	a, b := small.summarize(without.load), small.summarize(with.load)
	assert.InDelta(t, 5, a.mean, 0.2, "no budget: %+v", a)
	assert.Equal(t, 5.0, a.peak, "no budget: %+v", a)
	assert.LessOrEqual(t, b.peak, 1.1+0.01, "10%% budget: %+v", b)
	assert.GreaterOrEqual(t, b.mean, 1.05, "the budget allows retries: %+v", b)
	assert.LessOrEqual(t, a.recovery, 1)
	assert.LessOrEqual(t, b.recovery, 1)
	assert.Zero(t, without.refused)
	assert.Positive(t, with.refused)
	for s := 0; s < int(small.outageStart/time.Second); s++ {
		assert.Equal(t, small.clients, without.load[s], "second %d", s)
		assert.Equal(t, small.clients, with.load[s], "second %d", s)
	}
	assert.Equal(t, with, small.simulate(0.1, time.Second), "the simulation is deterministic")

	var out bytes.Buffer
	small.report(&out, time.Second, without, with)
	assert.Contains(t, out.String(), "100 clients, 100 calls/s in total")
	var svg bytes.Buffer
	small.writeSVG(&svg, without.load, with.load)
	require.True(t, strings.HasPrefix(svg.String(), "<svg "))
	assert.Equal(t, 2, strings.Count(svg.String(), "<polyline"))
}

// TestRetryStormLongWindow: with a 10 s window the budget still holds over
// the window, but its retries come in bursts when the window's allowance
// frees up, up to about twice the normal load in one second.
func TestRetryStormLongWindow(t *testing.T) {
	with := small.simulate(0.1, 10*time.Second)
	b := small.summarize(with.load)
	assert.LessOrEqual(t, b.mean, 1.1+0.01+0.02, "%+v", b)
	assert.Greater(t, b.peak, 1.5, "%+v", b)
}

// TestRetryStormReadme runs docs/retry-budgets.md's scenario and checks the figures the
// page quotes. It is skipped under the race detector, which makes it take
// half a minute.
func TestRetryStormReadme(t *testing.T) {
	if raceEnabled {
		t.Skip("slow under the race detector; TestRetryStormShape covers the same code")
	}
	without, with := storm.simulate(0, time.Second), storm.simulate(0.1, time.Second)
	var out bytes.Buffer
	storm.report(&out, time.Second, without, with)
	assert.Contains(t, out.String(), "no budget:  mean 4.96x, peak 5.00x, back to normal 1 s after")
	assert.Contains(t, out.String(), "10% budget: mean 1.10x, peak 1.11x, back to normal 0 s after")
}
