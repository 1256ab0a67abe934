package clientgobackoff

import (
	"context"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/retrykit/backoff"
)

// RateLimiter is a flowcontrol.RateLimiter whose rate is a
// backoff.AdaptiveRate's: Wait and Accept wait for its next slot, TryAccept
// takes one if it is free. Its answers reach the rate through
// [RateLimiter.WrapTransport]. It is safe for concurrent use.
type RateLimiter struct {
	rate *backoff.AdaptiveRate
}

var _ flowcontrol.RateLimiter = (*RateLimiter)(nil)

// NewRateLimiter returns a RateLimiter that paces with rate. It panics if
// rate is nil.
func NewRateLimiter(rate *backoff.AdaptiveRate) *RateLimiter {
	if rate == nil {
		panic("clientgobackoff: NewRateLimiter: rate must not be nil")
	}
	return &RateLimiter{rate: rate}
}

// Configure makes every client built from cfg pace its requests with a new
// backoff.AdaptiveRate that starts without a limit (backoff.WithInitialRate
// with backoff.InfLimit) until the server's first 429, plus opts (a clock,
// say): it sets cfg.RateLimiter, so that cfg.QPS and cfg.Burst no longer
// apply, and wraps cfg.WrapTransport with [RateLimiter.WrapTransport]. It
// returns the RateLimiter.
func Configure(cfg *rest.Config, opts ...backoff.Option) *RateLimiter {
	opts = append([]backoff.Option{backoff.WithInitialRate(backoff.InfLimit)}, opts...)
	l := NewRateLimiter(backoff.NewAdaptiveRate(opts...))
	cfg.RateLimiter = l
	cfg.Wrap(l.WrapTransport)
	return l
}

// TryAccept takes the next request slot if it is free now.
func (l *RateLimiter) TryAccept() bool { return l.rate.Allow() }

// Accept waits for the next request slot.
func (l *RateLimiter) Accept() { _ = l.rate.Wait(context.Background()) }

// Wait waits for the next request slot, or until ctx ends, with ctx's error.
func (l *RateLimiter) Wait(ctx context.Context) error { return l.rate.Wait(ctx) }

// Stop does nothing: the rate holds no goroutine.
func (l *RateLimiter) Stop() {}

// QPS returns the current rate, in requests per second (+Inf before the
// first 429, as a float32).
func (l *RateLimiter) QPS() float32 { return float32(l.rate.Rate()) }

// WrapTransport returns rt wrapped so that every answer is reported to the
// rate: a 429 (with its Retry-After, in seconds) or a 503 with a
// Retry-After as throttling, any other answer as a success. Errors that are
// no answer report nothing.
func (l *RateLimiter) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return &reporter{rate: l.rate, next: rt}
}

// reporter reports each answer of next to rate.
type reporter struct {
	rate *backoff.AdaptiveRate
	next http.RoundTripper
}

// RoundTrip sends req through the wrapped transport and reports the answer.
func (r *reporter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	wait, hinted := retryAfter(resp)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		r.rate.Throttled(wait)
	case resp.StatusCode == http.StatusServiceUnavailable && hinted:
		r.rate.Throttled(wait)
	default:
		r.rate.Succeeded()
	}
	return resp, nil
}

// retryAfter reads the answer's Retry-After, in seconds as the API server
// writes it.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	d, ok := backoff.ParseRetryAfter(v, time.Time{})
	return d, ok
}
