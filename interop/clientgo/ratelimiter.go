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
	// inFlight caps the requests in flight, when Configure made the
	// RateLimiter: see firstContactLimit.
	inFlight *backoff.AdaptiveLimiter
}

// firstContactLimit is how many requests Configure lets be in flight at
// first: client-go's default burst. A rate learned from 429s starts without
// a limit, so that nothing waits while the server has room; but many
// goroutines starting together would then send everything at once, and
// overflow API Priority and Fairness's seats and queue before the first 429
// came back. A backoff.AdaptiveLimiter starting at this limit spreads that
// first contact, and learns from latency how many requests the server
// serves without queueing them.
const firstContactLimit = 10

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
// say), and caps the requests in flight with a backoff.AdaptiveLimiter that
// starts at 10, client-go's default burst (backoff.WithInitialLimit in opts
// changes it), so that many goroutines starting at once do not overflow the
// server's queue before its first 429: it sets cfg.RateLimiter, so that cfg.QPS and cfg.Burst no longer
// apply, and wraps cfg.WrapTransport with [RateLimiter.WrapTransport]. It
// returns the RateLimiter.
func Configure(cfg *rest.Config, opts ...backoff.Option) *RateLimiter {
	opts = append([]backoff.Option{backoff.WithInitialRate(backoff.InfLimit), backoff.WithInitialLimit(firstContactLimit)}, opts...)
	l := NewRateLimiter(backoff.NewAdaptiveRate(opts...))
	l.inFlight = backoff.NewAdaptiveLimiter(opts...)
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
	return &reporter{rate: l.rate, inFlight: l.inFlight, next: rt}
}

// reporter reports each answer of next to rate, and holds a permit of
// inFlight, if any, while the request is in flight.
type reporter struct {
	rate     *backoff.AdaptiveRate
	inFlight *backoff.AdaptiveLimiter
	next     http.RoundTripper
}

// RoundTrip sends req through the wrapped transport and reports the answer.
func (r *reporter) RoundTrip(req *http.Request) (*http.Response, error) {
	var permit backoff.Permit
	if r.inFlight != nil {
		var err error
		if permit, err = r.inFlight.Acquire(req.Context()); err != nil {
			return nil, err
		}
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		if r.inFlight != nil {
			permit.Release()
		}
		return resp, err
	}
	wait, hinted := retryAfter(resp)
	throttled := resp.StatusCode == http.StatusTooManyRequests ||
		resp.StatusCode == http.StatusServiceUnavailable && hinted
	if r.inFlight != nil {
		if throttled {
			permit.Drop()
		} else {
			permit.Record()
		}
	}
	if throttled {
		r.rate.Throttled(wait)
	} else {
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
