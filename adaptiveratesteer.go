package backoff

import (
	"math"
	"time"
)

// An AdaptiveRate learns its quota alone by default. When several clients
// (the replicas of a service) share one quota, each learning it alone keeps
// finding it with throttled requests of its own; a coordinator that hears
// all of them (package github.com/retrykit/backoff/interop/redis's
// SharedRate, through Redis) learns it once for all and hands each client its
// share. These are the hooks it steers an AdaptiveRate with: the AdaptiveRate
// goes on pacing the client's requests, holding them through a Retry-After
// or an exhausted quota report, while the coordinator sets the rate.

// steerMaxRate is the highest rate Steer sets, in requests per second: a
// finite stand-in for +Inf, so that a steered rate is always a spacing.
const steerMaxRate = 1e9

// WithOnThrottled makes an [AdaptiveRate] call f after each throttling
// answer it is told of ([AdaptiveRate.Throttled]) that is not stale (see
// AdaptiveRate's doc: an answer to a request sent before the last cut is),
// with the answer's Retry-After, on the goroutine that reported it and
// outside the AdaptiveRate's lock. It is how a coordinator that steers the
// AdaptiveRate (see [AdaptiveRate.Steer]) hears of the quota being met. f must
// be fast. WithOnThrottled panics if f is nil. Other constructors ignore it.
func WithOnThrottled(f func(retryAfter time.Duration)) Option {
	mustNotBeNil("WithOnThrottled", "f", f == nil)
	return valueOption(optionOnThrottled, f)
}

// Steer sets the rate to v requests per second and hands the rate to the
// caller until [AdaptiveRate.Unsteer]: while steered, successes do not
// raise the rate and throttling answers do not cut it (their Retry-After
// still holds every request, and [WithOnThrottled] hears of them), and a
// quota report ([AdaptiveRate.Quota]) still holds requests when nothing is
// left but does not set the rate, which is the caller's share of the quota
// the report speaks of. Requests waiting in Wait move with the new rate. A
// steered rate below the last one counts as a cut: throttling answers to the
// requests in flight then are stale. v below one request every 10 s, NaN
// included, counts as that; v above 10⁹ as 10⁹. Steer allocates nothing but
// when it wakes waiting requests, and is safe for concurrent use.
func (r *AdaptiveRate) Steer(v float64) {
	if !(v >= rateMin) {
		v = rateMin
	}
	v = min(v, steerMaxRate)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steered = true
	r.slowStart = false
	if r.rate != InfLimit && v < r.rate {
		// The answers to the requests in flight now were sent at the
		// rate being cut: they say nothing of the new one. Unlike a cut
		// of its own law, the next request interval is not stale too:
		// the cut was made for many clients, and the first request any
		// of them sends after it says whether it was deep enough.
		// Requests still waiting for their slots are not in flight: they
		// will go at the new rate.
		r.cutHold = r.hold
		r.staleLeft = min(r.sentTotal-min(r.answered+uint64(r.waiting), r.sentTotal), uint64(math.Ceil(r.sent))+1)
	}
	r.setRateLocked(now, v)
}

// Unsteer gives the rate back to the AdaptiveRate's own law, from the rate
// it has now: successes raise it along the cubic curve, as after a cut that
// found the quota there, and throttling answers cut it. It does nothing if
// the AdaptiveRate is not steered. It allocates nothing and is safe for
// concurrent use.
func (r *AdaptiveRate) Unsteer() {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.steered {
		return
	}
	r.steered = false
	r.ceiling, r.cutAt, r.climb = r.rate, max(now, 1), 0
	r.succeeded, r.countedFrom = 0, now
}

// AdaptiveRateStats is what an [AdaptiveRate] has seen: the counters only
// grow (read them twice to compute rates), the rest is the present.
type AdaptiveRateStats struct {
	// Rate is the rate allowed now, in requests per second ([InfLimit] for
	// none).
	Rate float64
	// Sent is the rate at which requests are actually sent, in units per
	// second (requests, for Wait and Allow), smoothed over the last second
	// or so.
	Sent float64
	// Waiting is the number of requests waiting in Wait now.
	Waiting int
	// Waited counts the requests that had to wait in Wait for their turn:
	// when it grows, the client wants more than its rate.
	Waited uint64
	// Succeeded and Throttled count the answers reported.
	Succeeded, Throttled uint64
	// Steered says whether the rate is steered ([AdaptiveRate.Steer]).
	Steered bool
}

// Stats returns what the AdaptiveRate has seen. It allocates nothing and is
// safe for concurrent use.
func (r *AdaptiveRate) Stats() AdaptiveRateStats {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.measureLocked(now)
	return AdaptiveRateStats{
		Rate:      r.rate,
		Sent:      r.sent,
		Waiting:   r.waiting,
		Waited:    r.waited,
		Succeeded: r.succeededTotal,
		Throttled: r.throttledAll,
		Steered:   r.steered,
	}
}
