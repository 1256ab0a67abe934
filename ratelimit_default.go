package backoff

import (
	"time"

	"k8s.io/utils/clock"
)

// The numbers of [DefaultControllerRateLimiter], which are client-go's: a
// failing item waits 5 ms, 10 ms, 20 ms and so on, doubling up to 655.36 s
// at its 18th failure, then 1000 s from the 19th on; and all items together
// are requeued at 10 per second on average, with bursts of 100.
const (
	// DefaultControllerBaseDelay is the delay after an item's first failure.
	DefaultControllerBaseDelay = 5 * time.Millisecond
	// DefaultControllerMaxDelay caps the delay of an item that keeps failing.
	DefaultControllerMaxDelay = 1000 * time.Second
	// DefaultControllerQPS is the overall requeue rate, in items per second,
	// that the token bucket allows on average.
	DefaultControllerQPS = 10.0
	// DefaultControllerBurst is how many requeues the token bucket allows at
	// once before it starts spacing them 1/DefaultControllerQPS apart.
	DefaultControllerBurst = 100
)

// DefaultControllerRateLimiter returns the rate limiter that Kubernetes
// controllers use unless told otherwise (client-go's
// DefaultTypedControllerRateLimiter, and controller-runtime's default): the
// larger of
//
//   - a per-item exponential delay, [DefaultControllerBaseDelay]·2^failures
//     capped at [DefaultControllerMaxDelay] (5 ms, 10 ms, 20 ms … 655.36 s,
//     then 1000 s for good), from [NewItemExponentialFailureRateLimiter], and
//   - a token bucket shared by all items, [DefaultControllerQPS] per second
//     with bursts of [DefaultControllerBurst], from [NewBucketRateLimiter]:
//     when more than 100 items fail at one instant, the 101st waits 100 ms,
//     the 102nd 200 ms, and so on, whatever their own failure counts.
//
// Every When goes to both parts, so it spends a token even when the item's
// own delay is the longer; Forget resets the item's failure count (the
// bucket's tokens are shared and stay spent); NumRequeues is the item's
// failure count.
//
// The options reach both parts: the clock (read by the bucket),
// [WithRequeueJitter] and [WithMaxTrackedItems] (read by the exponential
// part). Without options the delays are exactly client-go's.
//
// The result behaves exactly as
//
//	NewMaxOfRateLimiter[T](
//		NewItemExponentialFailureRateLimiter[T](DefaultControllerBaseDelay, DefaultControllerMaxDelay, opts...),
//		NewBucketRateLimiter[T](DefaultControllerQPS, DefaultControllerBurst, opts...),
//	)
//
// but holds both parts under one lock, which makes a When and a Forget
// together cost well under half of client-go's. It is safe for concurrent
// use, and its When and Forget allocate nothing.
func DefaultControllerRateLimiter[T comparable](opts ...Option) RateLimiter[T] {
	c := newConfig(opts)
	l := &defaultControllerRateLimiter[T]{
		delays: doublingDelays{
			baseDelay: DefaultControllerBaseDelay,
			maxDelay:  DefaultControllerMaxDelay,
			jitter:    c.limiter.jitter,
		},
		clock: c.clock,
		epoch: c.clock.Now(),
	}
	l.failures.init(c.limiter.maxTracked)
	l.bucket.init(DefaultControllerQPS, DefaultControllerBurst)
	return l
}

// defaultControllerRateLimiter is what
// NewMaxOfRateLimiter(NewItemExponentialFailureRateLimiter(…),
// NewBucketRateLimiter(…)) would be, with the same results, fused so that a
// When takes one lock instead of two and makes no interface calls: the
// default limiter is the one nearly every controller runs, and its When and
// Forget are on the path of every requeue. The bucket is guarded by the
// failure counts' lock.
type defaultControllerRateLimiter[T comparable] struct {
	failures failureCounts[T]
	bucket   tokenBucket // guarded by failures.mu
	delays   doublingDelays
	clock    clock.PassiveClock
	epoch    time.Time
}

func (l *defaultControllerRateLimiter[T]) When(item T) time.Duration {
	now := l.clock.Since(l.epoch) // outside the lock; see BucketRateLimiter.When
	l.failures.mu.Lock()
	n := l.failures.recordLocked(item)
	wait := l.bucket.takeLocked(now)
	l.failures.mu.Unlock()
	return max(l.delays.after(n), wait)
}

func (l *defaultControllerRateLimiter[T]) Forget(item T) {
	l.failures.forget(item)
}

func (l *defaultControllerRateLimiter[T]) NumRequeues(item T) int {
	return l.failures.count(item)
}
