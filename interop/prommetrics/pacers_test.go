package prommetrics_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/prommetrics"
)

// TestPacersExportState: each pacer's series read its state at the scrape,
// and a removed pacer's series go.
func TestPacersExportState(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	pacers := prommetrics.NewPacers()
	require.NoError(t, reg.Register(pacers))
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	l := backoff.NewAdaptiveLimiter(backoff.WithClock(fc), backoff.WithInitialLimit(8))
	p, ok := l.TryAcquire()
	require.True(t, ok)
	defer p.Release()
	r := backoff.NewAdaptiveRate(backoff.WithClock(fc))
	th := backoff.NewThrottler(1, time.Minute, backoff.WithClock(fc))
	for range 100 {
		if th.Allow() {
			th.Record(false)
		}
	}
	pacers.Add("db", l)
	pacers.Add("api", r)
	pacers.Add("search", th)
	pacers.Add("static", backoff.NewLimiter(10, 1)) // accepted, no series

	want := `
# HELP adaptive_limiter_inflight Permits of the adaptive limiter held now: calls in flight.
# TYPE adaptive_limiter_inflight gauge
adaptive_limiter_inflight{name="db"} 1
# HELP adaptive_limiter_limit The adaptive limiter's current concurrency limit.
# TYPE adaptive_limiter_limit gauge
adaptive_limiter_limit{name="db"} 8
# HELP adaptive_rate_requests_per_second The adaptive rate's current rate, in requests per second; +Inf while it has no limit.
# TYPE adaptive_rate_requests_per_second gauge
adaptive_rate_requests_per_second{name="api"} 5
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"adaptive_limiter_inflight", "adaptive_limiter_limit", "adaptive_rate_requests_per_second"))
	got, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range got {
		if f.GetName() == "throttler_rejected_total" {
			assert.Equal(t, float64(th.Rejected()), f.GetMetric()[0].GetCounter().GetValue())
			assert.Positive(t, f.GetMetric()[0].GetCounter().GetValue())
		}
	}

	r.Throttled(0)
	rate := r.Rate()
	require.False(t, math.IsInf(rate, 1))
	pacers.Remove("db")
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the rate and the throttler's counter")
	assert.PanicsWithValue(t, "prommetrics: Pacers.Add: name must not be empty", func() { pacers.Add("", l) })
	assert.PanicsWithValue(t, "prommetrics: Pacers.Add: p must not be nil", func() { pacers.Add("x", nil) })
}

// TestPacersExportBreaker: a Breaker's state, its changes into each state
// and its refusals are read at the scrape; reading the state of a breaker
// whose open time has passed finds it half-open.
func TestPacersExportBreaker(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	pacers := prommetrics.NewPacers()
	require.NoError(t, reg.Register(pacers))
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := backoff.NewBreaker(backoff.WithClock(fc), backoff.WithBreakerConsecutiveFailures(1),
		backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: time.Second}))
	pacers.Add("orders", b)

	p, err := b.Allow()
	require.NoError(t, err)
	p.Done(context.Background(), errors.New("connection refused")) // trips
	for range 3 {
		_, err := b.Allow()
		require.ErrorIs(t, err, backoff.ErrBreakerOpen)
	}
	want := `
# HELP breaker_rejected_total Calls the circuit breaker refused.
# TYPE breaker_rejected_total counter
breaker_rejected_total{name="orders"} 3
# HELP breaker_state 1 for the circuit breaker's current state, 0 for the others.
# TYPE breaker_state gauge
breaker_state{name="orders",state="closed"} 0
breaker_state{name="orders",state="half-open"} 0
breaker_state{name="orders",state="open"} 1
# HELP breaker_transitions_total Changes of the circuit breaker into each state.
# TYPE breaker_transitions_total counter
breaker_transitions_total{name="orders",to="closed"} 0
breaker_transitions_total{name="orders",to="half-open"} 0
breaker_transitions_total{name="orders",to="open"} 1
`
	names := []string{"breaker_rejected_total", "breaker_state", "breaker_transitions_total"}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), names...))

	fc.Step(time.Second)
	want = strings.NewReplacer(
		`state="half-open"} 0`, `state="half-open"} 1`,
		`state="open"} 1`, `state="open"} 0`,
		`to="half-open"} 0`, `to="half-open"} 1`,
	).Replace(want)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), names...), "the scrape finds it half-open")

	pacers.Remove("orders")
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Zero(t, n)
}
