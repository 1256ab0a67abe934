package httpretry_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

// breakerHarness is a test server behind a Transport paced by a Breaker,
// both on one fake clock that each announced wait steps.
type breakerHarness struct {
	*harness
	breaker *backoff.Breaker
}

// openFor is how long the breakers of these tests stay open after a trip.
const openFor = 30 * time.Second

func newBreakerHarness(t *testing.T, handler http.HandlerFunc, s backoff.Schedule) *breakerHarness {
	t.Helper()
	h := newHarness(t, handler)
	b := backoff.NewBreaker(backoff.WithClock(h.clock), backoff.WithBreakerConsecutiveFailures(2),
		backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: openFor}))
	h.rt = httpretry.NewTransport(h.meter, s, backoff.WithClock(h.clock), backoff.WithPacer(b),
		backoff.WithNotify(func(_ int, _ error, next time.Duration) {
			h.mu.Lock()
			h.waits = append(h.waits, next)
			h.mu.Unlock()
			h.clock.Step(next)
		}))
	return &breakerHarness{harness: h, breaker: b}
}

// TestBreakerRefusalSendsNothing: a request that an open breaker refuses is
// not sent, its body is closed, and RoundTrip returns an error that
// errors.Is matches with backoff.ErrBreakerOpen.
func TestBreakerRefusalSendsNothing(t *testing.T) {
	var s script
	h := newBreakerHarness(t, s.handler(step{status: http.StatusServiceUnavailable}), backoff.Schedule{Steps: 1})
	for range 2 {
		resp, _, err := h.do(t, context.Background(), http.MethodGet, nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	}
	require.Equal(t, backoff.BreakerOpen, h.breaker.State())

	body := &closeCounter{Reader: strings.NewReader("x")}
	req, err := http.NewRequest(http.MethodPut, h.srv.URL, body)
	require.NoError(t, err)
	resp, err := h.rt.RoundTrip(req)
	require.ErrorIs(t, err, backoff.ErrBreakerOpen)
	assert.Nil(t, resp)
	calls, _ := s.requests()
	assert.Equal(t, 2, calls, "the refused request was not sent")
	assert.EqualValues(t, 2, h.meter.attempts.Load())
	assert.Equal(t, 1, body.closes(), "the body is closed, as a RoundTripper must")
}

// TestRetryWaitsForTheBreaker: a request whose retries trip the breaker
// waits, on the fake clock, for the breaker's Retry-After (the rest of its
// open time) instead of spending its attempts on refusals, and its next
// attempt is the probe that closes the breaker.
func TestRetryWaitsForTheBreaker(t *testing.T) {
	var s script
	h := newBreakerHarness(t, s.handler(
		step{status: http.StatusServiceUnavailable},
		step{status: http.StatusServiceUnavailable},
		step{status: http.StatusOK, body: "back"},
	), backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 4})
	resp, body, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "back", body)
	// 503 at 0; 503 at 100ms trips the breaker until 30.1s; the attempt at
	// 300ms is refused and waits the 29.8s left; the probe at 30.1s succeeds.
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, openFor - 200*time.Millisecond},
		h.recordedWaits())
	calls, _ := s.requests()
	assert.Equal(t, 3, calls, "the refused attempt sent nothing")
	assert.Equal(t, backoff.BreakerHalfOpen, h.breaker.State(), "one probe of three succeeded")
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	*strings.Reader
	mu sync.Mutex
	n  int
}

func (c *closeCounter) Close() error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

func (c *closeCounter) closes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
