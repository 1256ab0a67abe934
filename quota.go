package backoff

import (
	"time"

	"github.com/retrykit/backoff/internal/optionhook"
)

func init() {
	// httpretry reports the quotas its answers carry to the pacer of its
	// options, when that is an AdaptiveRate.
	optionhook.Pacer = func(opts any) any {
		var cfg config
		cfg.apply(opts.([]Option))
		return cfg.retry.pacer
	}
}

// Quota reports what a server said of its quota in an answer: remaining
// requests may still be sent before reset has passed (the IETF RateLimit
// field's r and t, X-RateLimit-Remaining and -Reset; package httpretry
// reads them when the pacer of its requests is an AdaptiveRate). Until
// reset has passed, or the next report, the rate is what is left spent
// evenly over what is left of the window: remaining, less the requests sent
// and not yet answered (they will spend it too), over reset (less half a
// second when reset is in whole seconds: headers round it up). So a client
// paces at its quota from its first answer, before any throttling answer,
// and successes do not raise the rate meanwhile. With nothing left every
// request is held until reset, as by a Retry-After, and so is a request of
// more units ([AdaptiveRate.WaitN]) than are left; [AdaptiveRate.AllowN]
// refuses it. Like every rate of an
// AdaptiveRate, the rate is never below one request every 10 s.
//
// A report with reset ≤ 0, or with remaining negative or NaN, is ignored;
// a throttling answer reported with [AdaptiveRate.Throttled] still cuts the
// rate. Quota allocates nothing and is safe for concurrent use.
func (r *AdaptiveRate) Quota(remaining float64, reset time.Duration) {
	if !(remaining >= 0) || reset <= 0 {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	until := addInstant(now, reset)
	r.slowStart = false
	// Requests given a slot and not answered, less those still waiting
	// for theirs: sent, and about to spend the quota.
	inFlight := float64(r.sentTotal - min(r.answered+uint64(r.waiting), r.sentTotal))
	left := remaining - inFlight
	if now < r.quotaUntil && until <= r.quotaUntil+time.Second && until >= r.quotaUntil-time.Second {
		// The same window as the last report's (its reset, give or take a
		// header's rounding and an answer's latency): an answer to an
		// earlier request may arrive after a later one and say more is
		// left than the slots taken since have left. What is left only
		// falls within a window, and the earliest reset read is the truest.
		left = min(left, r.quotaLeft)
		r.quotaUntil = min(r.quotaUntil, until)
	} else {
		r.quotaUntil = until
	}
	r.quotaLeft = left
	if left < 1 {
		r.holdLocked(now, until)
		return
	}
	if r.steered {
		// The report is the whole quota's, and the rate this client's
		// share of it: the coordinator that steers it sets the share.
		return
	}
	// A reset in whole seconds, as headers give it, is the true one rounded
	// up, by half a second on average: the rate spreads what is left over
	// half a second less, or it would leave some of every window unused.
	span := reset
	if reset%time.Second == 0 {
		span -= time.Second / 2
	}
	span = min(span, r.quotaUntil-now)
	v := left / span.Seconds()
	// Once the report is old, the rate grows from here as after a cut
	// that found this rate: the window's rate is where the quota was.
	r.ceiling, r.cutAt, r.climb = v, max(now, 1), 0
	r.setRateLocked(now, v)
}

// overQuotaLocked reports whether a request of n units would spend more
// than the last report left: it then waits for the reset.
func (r *AdaptiveRate) overQuotaLocked(now time.Duration, n float64) bool {
	return now < r.quotaUntil && r.quotaLeft < n
}
