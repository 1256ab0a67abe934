package backoff

import "time"

// ItemExponentialFailureRateLimiter delays each item by baseDelay·2^n, where
// n is how many times When was called for that item since it was last
// forgotten: the first failure waits baseDelay, the second twice that, and so
// on, up to maxDelay, which every later failure waits. It is the per-item half
// of [DefaultControllerRateLimiter].
//
// The delays are client-go's (workqueue.ItemExponentialFailureRateLimiter),
// with these differences:
//
//   - They are computed in integers, so 5 ms·2^17 is 655.36 s to the
//     nanosecond, and they saturate at maxDelay whatever the failure count and
//     base. client-go computes in float64 and converts back: with a baseDelay
//     of math.MaxInt64/4 its third delay is negative, which a queue takes as
//     "now".
//   - The constructor rejects a baseDelay of 0 (a hot requeue loop) and a
//     maxDelay below baseDelay (see [NewItemExponentialFailureRateLimiter]).
//   - [WithRequeueJitter] spreads the delays of items that fail together, and
//     [WithMaxTrackedItems] bounds the memory of items never forgotten.
//   - When, Forget and NumRequeues allocate nothing once the item is known,
//     and When costs less than half of client-go's.
//
// An ItemExponentialFailureRateLimiter is safe for concurrent use. Its zero
// value is not usable (When panics): use
// [NewItemExponentialFailureRateLimiter].
type ItemExponentialFailureRateLimiter[T comparable] struct {
	failures failureCounts[T]
	delays   doublingDelays
}

// doublingDelays is the delay arithmetic of
// ItemExponentialFailureRateLimiter, shared with the default limiter: a delay
// that doubles with each failure, up to a maximum.
type doublingDelays struct {
	baseDelay time.Duration
	maxDelay  time.Duration
	jitter    float64 // WithRequeueJitter's maxFactor; 0 for none
}

// after returns the delay after n earlier failures.
func (s doublingDelays) after(n int) time.Duration {
	d := min(shiftDuration(s.baseDelay, n), s.maxDelay)
	return jitterBelow(d, s.maxDelay, s.jitter)
}

// NewItemExponentialFailureRateLimiter returns an
// [ItemExponentialFailureRateLimiter] whose delays start at baseDelay and
// double with each failure of an item, up to maxDelay. It reads
// [WithRequeueJitter] and [WithMaxTrackedItems] and ignores the other
// options; it never reads the clock.
//
// A baseDelay ≤ 0 or a negative maxDelay panics, and so does a maxDelay
// below baseDelay. client-go accepts a baseDelay of 0, which makes every
// delay 0, so that a failing item is requeued at once, for ever, in a hot
// loop; it accepts the latter too and returns maxDelay for every failure,
// which is rarely what the caller meant: the usual cause is swapped
// arguments, or a maxDelay of 0 meant as "no limit".
func NewItemExponentialFailureRateLimiter[T comparable](baseDelay, maxDelay time.Duration, opts ...Option) *ItemExponentialFailureRateLimiter[T] {
	const where = "NewItemExponentialFailureRateLimiter"
	mustBePositive(where, "baseDelay", baseDelay)
	mustNotBeNegative(where, "maxDelay", maxDelay)
	if maxDelay < baseDelay {
		badArgument(where, "maxDelay must not be less than baseDelay "+baseDelay.String(), maxDelay)
	}
	c := newConfig(opts).limiter
	l := &ItemExponentialFailureRateLimiter[T]{
		delays: doublingDelays{baseDelay: baseDelay, maxDelay: maxDelay, jitter: c.jitter},
	}
	l.failures.init(c.maxTracked)
	return l
}

// When counts a failure of item and returns baseDelay·2^n capped at
// maxDelay, n being the failures counted before this one (so the first When
// returns baseDelay). With [WithRequeueJitter] the delay is drawn from
// [d, min(d + maxFactor·d, maxDelay)]. It never blocks, never returns a
// negative duration, and never more than maxDelay.
func (l *ItemExponentialFailureRateLimiter[T]) When(item T) time.Duration {
	return l.delays.after(l.failures.record(item))
}

// Forget clears item's failure count, so that its next When returns
// baseDelay again. Call it when the item was processed successfully.
func (l *ItemExponentialFailureRateLimiter[T]) Forget(item T) {
	l.failures.forget(item)
}

// NumRequeues returns how many times When was called for item since it was
// last forgotten (or dropped by [WithMaxTrackedItems]).
func (l *ItemExponentialFailureRateLimiter[T]) NumRequeues(item T) int {
	return l.failures.count(item)
}

// jitterBelow returns d plus up to maxFactor·d of jitter, but no more than
// ceiling; a d already at or above ceiling, or a maxFactor of 0, leaves d
// unchanged.
func jitterBelow(d, ceiling time.Duration, maxFactor float64) time.Duration {
	if maxFactor == 0 || d >= ceiling {
		return d
	}
	return min(Jitter(d, maxFactor), ceiling)
}
