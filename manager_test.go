package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff"
)

// wtArmedDelays calls m.Backoff n times and returns the delay each call set.
func wtArmedDelays(t *testing.T, hc *handshakeClock, m backoff.BackoffManager, n int) []time.Duration {
	t.Helper()
	var got []time.Duration
	for i := 0; i < n; i++ {
		m.Backoff()
		got = append(got, hc.nextArmed(t, nil))
	}
	return got
}

func TestExponentialBackoffManagerGrowsToMax(t *testing.T) {
	hc := newHandshakeClock()
	m := backoff.NewExponentialBackoffManager(time.Second, 10*time.Second, time.Minute, 2, 0, backoff.WithClock(hc))
	s := time.Second
	assert.Equal(t, []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 10 * s, 10 * s, 10 * s}, wtArmedDelays(t, hc, m, 7))
}

func TestExponentialBackoffManagerResets(t *testing.T) {
	const reset = 30 * time.Second
	tests := []struct {
		name  string
		quiet time.Duration // fake time between the third and fourth call
		want  time.Duration // the fourth delay
	}{
		{"no reset within resetDuration", reset, 8 * time.Second},
		{"reset after more than resetDuration", reset + 1, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := newHandshakeClock()
			m := backoff.NewExponentialBackoffManager(time.Second, time.Minute, reset, 2, 0, backoff.WithClock(hc))
			wtArmedDelays(t, hc, m, 3)
			hc.Step(tt.quiet)
			assert.Equal(t, []time.Duration{tt.want}, wtArmedDelays(t, hc, m, 1))
		})
	}
}

func TestExponentialBackoffManagerJitter(t *testing.T) {
	hc := newHandshakeClock()
	m := backoff.NewExponentialBackoffManager(time.Second, 4*time.Second, time.Hour, 2, 0.5, backoff.WithClock(hc))
	for i, d := range wtArmedDelays(t, hc, m, 50) {
		base := min(time.Second<<min(i, 2), 4*time.Second)
		assert.GreaterOrEqual(t, d, base, "delay %d", i)
		assert.Less(t, d, base+base/2, "delay %d: jitter adds less than jitter·delay", i)
	}
}

func TestBackoffManagersReuseOneTimer(t *testing.T) {
	hc := newHandshakeClock()
	for name, m := range map[string]backoff.BackoffManager{
		"exponential": backoff.NewExponentialBackoffManager(time.Second, 0, 0, 2, 0, backoff.WithClock(hc)),
		"jittered":    backoff.NewJitteredBackoffManager(time.Second, 0, backoff.WithClock(hc)),
	} {
		first := m.Backoff()
		hc.nextArmed(t, nil)
		assert.Same(t, first, m.Backoff(), name)
		hc.nextArmed(t, nil)
	}
}

func TestJitteredBackoffManager(t *testing.T) {
	hc := newHandshakeClock()
	exact := backoff.NewJitteredBackoffManager(time.Second, 0, backoff.WithClock(hc))
	assert.Equal(t, []time.Duration{time.Second, time.Second}, wtArmedDelays(t, hc, exact, 2))

	jittered := backoff.NewJitteredBackoffManager(time.Second, 0.25, backoff.WithClock(hc))
	for _, d := range wtArmedDelays(t, hc, jittered, 50) {
		assert.GreaterOrEqual(t, d, time.Second)
		assert.Less(t, d, 1250*time.Millisecond)
	}

	zero := backoff.NewJitteredBackoffManager(0, 0.5, backoff.WithClock(hc))
	assert.Equal(t, []time.Duration{0}, wtArmedDelays(t, hc, zero, 1))
}

func TestBackoffUntilWithExponentialManager(t *testing.T) {
	hc := newHandshakeClock()
	m := backoff.NewExponentialBackoffManager(time.Second, 10*time.Second, time.Minute, 2, 0, backoff.WithClock(hc))
	stop := make(chan struct{})
	ran := make(chan time.Duration)
	done := wtGo(func() { backoff.BackoffUntil(func() { ran <- hc.elapsed() }, m, true, stop) })
	var got []time.Duration
	for i := 0; i < 7; i++ {
		got = append(got, waitFor(t, "the next run of f", ran, hc))
		d := hc.nextArmed(t, done)
		if i < 6 {
			hc.Step(d)
		}
	}
	close(stop)
	waitFor(t, "BackoffUntil to return after stop was closed", done, hc)
	s := time.Second
	assert.Equal(t, []time.Duration{0, 1 * s, 3 * s, 7 * s, 15 * s, 25 * s, 35 * s}, got)
}

func TestBackoffManagersRejectBadArguments(t *testing.T) {
	s := time.Second
	tests := []struct {
		name string
		make func()
		want string
	}{
		{"zero init", func() { backoff.NewExponentialBackoffManager(0, s, s, 2, 0) },
			"backoff: NewExponentialBackoffManager: initBackoff must be positive, got 0s"},
		{"negative max", func() { backoff.NewExponentialBackoffManager(s, -s, s, 2, 0) },
			"backoff: NewExponentialBackoffManager: maxBackoff must not be negative, got -1s"},
		{"max below init", func() { backoff.NewExponentialBackoffManager(2*s, s, s, 2, 0) },
			"backoff: NewExponentialBackoffManager: maxBackoff must be 0 or at least initBackoff (2s), got 1s"},
		{"negative reset", func() { backoff.NewExponentialBackoffManager(s, s, -s, 2, 0) },
			"backoff: NewExponentialBackoffManager: resetDuration must not be negative, got -1s"},
		{"NaN factor", func() { backoff.NewExponentialBackoffManager(s, s, s, math.NaN(), 0) },
			"backoff: NewExponentialBackoffManager: backoffFactor must be a finite number ≥ 0, got NaN"},
		{"negative jitter", func() { backoff.NewExponentialBackoffManager(s, s, s, 2, -1) },
			"backoff: NewExponentialBackoffManager: jitter must be a finite number ≥ 0, got -1"},
		{"negative duration", func() { backoff.NewJitteredBackoffManager(-s, 0) },
			"backoff: NewJitteredBackoffManager: duration must not be negative, got -1s"},
		{"infinite jitter", func() { backoff.NewJitteredBackoffManager(s, math.Inf(1)) },
			"backoff: NewJitteredBackoffManager: jitter must be a finite number ≥ 0, got +Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.make)
		})
	}
}
