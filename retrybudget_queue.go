package backoff

import "time"

// requeueDelay returns how long a retry that limiter delayed by limiterDelay
// waits, on a queue that spends from b: limiterDelay if b allows the retry
// now; otherwise the time until b would allow one, plus a random spread of up
// to one window so that items refused together come back apart, and at least
// limiterDelay, but no more than the limiter's cap when it has one (see
// [RateLimitingQueue.AddRateLimited]).
func requeueDelay[T comparable](b *RetryBudget, limiter RateLimiter[T], limiterDelay time.Duration) time.Duration {
	if b.TryRetry() {
		return limiterDelay
	}
	wait, ok := b.retryAllowedIn()
	if !ok {
		// Only new requests can make room: try again a window later.
		wait = b.window()
	}
	wait = addDuration(wait, randDuration(b.window()))
	if ceiling, ok := limiterCap(limiter); ok {
		wait = min(wait, ceiling)
	}
	return max(wait, limiterDelay)
}

// window returns the budget's window, as its buckets cover it.
func (b *RetryBudget) window() time.Duration {
	return time.Duration(b.requestBuckets) * b.width
}

// limiterCap returns the longest delay limiter returns for a failing item, for
// the limiters of this package that have one: the maxDelay of the
// exponential limiters (the default's token bucket aside) and of
// WithMaxWaitRateLimiter, the slowDelay of the fast-slow limiter.
func limiterCap[T comparable](limiter RateLimiter[T]) (time.Duration, bool) {
	switch l := limiter.(type) {
	case *ItemExponentialFailureRateLimiter[T]:
		return l.delays.maxDelay, true
	case *defaultControllerRateLimiter[T]:
		return l.delays.maxDelay, true
	case *WithMaxWaitRateLimiter[T]:
		return l.maxDelay, true
	case *ItemFastSlowRateLimiter[T]:
		return l.slowDelay, true
	}
	return 0, false
}
