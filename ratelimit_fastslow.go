package backoff

import "time"

// ItemFastSlowRateLimiter delays each item by fastDelay for its first
// maxFastAttempts failures, then by slowDelay for every later failure, until
// the item is forgotten. Two steps are easier to follow in logs than an
// exponential series, and suit work that either succeeds on a quick retry or
// needs an outside change (a missing dependency, a quota) to succeed at all.
//
// The delays are client-go's (workqueue.ItemFastSlowRateLimiter), with these
// differences: the constructor rejects a slowDelay below fastDelay (see
// [NewItemFastSlowRateLimiter]); [WithRequeueJitter] spreads the delays of
// items that fail together; [WithMaxTrackedItems] bounds the memory of items
// never forgotten; and When, Forget and NumRequeues allocate nothing once the
// item is known.
//
// An ItemFastSlowRateLimiter is safe for concurrent use. Its zero value is
// not usable (When panics): use [NewItemFastSlowRateLimiter].
type ItemFastSlowRateLimiter[T comparable] struct {
	failures        failureCounts[T]
	fastDelay       time.Duration
	slowDelay       time.Duration
	maxFastAttempts int
	jitter          float64
}

// NewItemFastSlowRateLimiter returns an [ItemFastSlowRateLimiter] that
// returns fastDelay for the first maxFastAttempts failures of an item and
// slowDelay after that. It reads [WithRequeueJitter] and
// [WithMaxTrackedItems] and ignores the other options; it never reads the
// clock.
//
// Zero delays are allowed (0 means "retry at once"), and so is a
// maxFastAttempts of 0 (every delay is slowDelay), as in client-go. A
// negative delay or maxFastAttempts panics, and so does a slowDelay below
// fastDelay, which client-go accepts but which contradicts the names and
// usually means swapped arguments.
func NewItemFastSlowRateLimiter[T comparable](fastDelay, slowDelay time.Duration, maxFastAttempts int, opts ...Option) *ItemFastSlowRateLimiter[T] {
	const where = "NewItemFastSlowRateLimiter"
	mustNotBeNegative(where, "fastDelay", fastDelay)
	mustNotBeNegative(where, "slowDelay", slowDelay)
	if slowDelay < fastDelay {
		badArgument(where, "slowDelay must not be less than fastDelay "+fastDelay.String(), slowDelay)
	}
	if maxFastAttempts < 0 {
		badArgument(where, "maxFastAttempts must not be negative", maxFastAttempts)
	}
	c := newConfig(opts).limiter
	l := &ItemFastSlowRateLimiter[T]{
		fastDelay:       fastDelay,
		slowDelay:       slowDelay,
		maxFastAttempts: maxFastAttempts,
		jitter:          c.jitter,
	}
	l.failures.init(c.maxTracked)
	return l
}

// When counts a failure of item and returns fastDelay if it is one of the
// item's first maxFastAttempts failures, slowDelay otherwise. With
// [WithRequeueJitter], a fast delay is drawn from
// [fastDelay, min(fastDelay·(1+maxFactor), slowDelay)] — a fast retry never
// waits longer than a slow one — and a slow delay from
// [slowDelay, slowDelay·(1+maxFactor)), saturating at the largest
// time.Duration. It never blocks and never returns a negative duration.
func (l *ItemFastSlowRateLimiter[T]) When(item T) time.Duration {
	if l.failures.record(item) < l.maxFastAttempts {
		return jitterBelow(l.fastDelay, l.slowDelay, l.jitter)
	}
	return jitterBelow(l.slowDelay, maxDuration, l.jitter)
}

// Forget clears item's failure count, so that its next When returns
// fastDelay again (unless maxFastAttempts is 0).
func (l *ItemFastSlowRateLimiter[T]) Forget(item T) {
	l.failures.forget(item)
}

// NumRequeues returns how many times When was called for item since it was
// last forgotten (or dropped by [WithMaxTrackedItems]).
func (l *ItemFastSlowRateLimiter[T]) NumRequeues(item T) int {
	return l.failures.count(item)
}
