package backoff

import (
	"strconv"
	"time"
)

// MaxOfRateLimiter combines rate limiters: each When asks every one of them,
// in order, and returns the longest delay, so that an item waits for the
// strictest of them. Every limiter sees every When, so each keeps its own
// count (and a token bucket spends a token even when another limiter's delay
// is longer). NumRequeues is the largest count of any of them, and Forget
// forgets the item in all of them.
//
// It behaves as client-go's workqueue.MaxOfRateLimiter, except that a
// negative delay from a limiter of another package counts as 0 instead of
// being returned, and the constructor copies the limiters and rejects nil
// ones and an empty list.
//
// A MaxOfRateLimiter is safe for concurrent use if its limiters are, and adds
// no allocation of its own. Its zero value has no limiters: When returns 0.
type MaxOfRateLimiter[T comparable] struct {
	limiters []RateLimiter[T]
}

// NewMaxOfRateLimiter returns a [MaxOfRateLimiter] over limiters. It panics
// if a limiter is nil, or if there is none: client-go's returns 0 from every
// When then, so a queue would requeue a failing item at once, in a hot loop.
func NewMaxOfRateLimiter[T comparable](limiters ...RateLimiter[T]) *MaxOfRateLimiter[T] {
	if len(limiters) == 0 {
		badArgument("NewMaxOfRateLimiter", "limiters must hold at least one limiter", 0)
	}
	for i, l := range limiters {
		if l == nil {
			badArgument("NewMaxOfRateLimiter", "limiters["+strconv.Itoa(i)+"] must not be nil", l)
		}
	}
	return &MaxOfRateLimiter[T]{limiters: append([]RateLimiter[T](nil), limiters...)}
}

// When calls When on every limiter and returns the longest delay, or 0 if
// all of them return 0 or less. It blocks only if a limiter's When does.
func (l *MaxOfRateLimiter[T]) When(item T) time.Duration {
	var d time.Duration
	for _, rl := range l.limiters {
		d = max(d, rl.When(item))
	}
	return d
}

// Forget calls Forget on every limiter.
func (l *MaxOfRateLimiter[T]) Forget(item T) {
	for _, rl := range l.limiters {
		rl.Forget(item)
	}
}

// NumRequeues returns the largest NumRequeues of the limiters, or 0.
func (l *MaxOfRateLimiter[T]) NumRequeues(item T) int {
	n := 0
	for _, rl := range l.limiters {
		n = max(n, rl.NumRequeues(item))
	}
	return n
}

// WithMaxWaitRateLimiter caps the delays of another rate limiter: When
// returns the inner limiter's delay, but no more than maxDelay. Forget and
// NumRequeues are the inner limiter's.
//
// It behaves as client-go's workqueue.WithMaxWaitRateLimiter, except that a
// negative delay from an inner limiter of another package is returned as 0,
// and the constructor rejects a nil limiter and a negative maxDelay.
//
// A WithMaxWaitRateLimiter is safe for concurrent use if the inner limiter
// is, and adds no allocation of its own. Its zero value is not usable (its
// methods panic): use [NewWithMaxWaitRateLimiter].
type WithMaxWaitRateLimiter[T comparable] struct {
	limiter  RateLimiter[T]
	maxDelay time.Duration
}

// NewWithMaxWaitRateLimiter returns a [WithMaxWaitRateLimiter] that caps
// limiter's delays at maxDelay. A maxDelay of 0 makes every delay 0 while the
// inner limiter still counts failures. A nil limiter or a negative maxDelay
// panics.
func NewWithMaxWaitRateLimiter[T comparable](limiter RateLimiter[T], maxDelay time.Duration) *WithMaxWaitRateLimiter[T] {
	const where = "NewWithMaxWaitRateLimiter"
	if limiter == nil {
		badArgument(where, "limiter must not be nil", limiter)
	}
	mustNotBeNegative(where, "maxDelay", maxDelay)
	return &WithMaxWaitRateLimiter[T]{limiter: limiter, maxDelay: maxDelay}
}

// When returns the inner limiter's delay for item, clamped to
// [0, maxDelay]. It blocks only if the inner limiter's When does.
func (l *WithMaxWaitRateLimiter[T]) When(item T) time.Duration {
	return min(max(l.limiter.When(item), 0), l.maxDelay)
}

// Forget calls the inner limiter's Forget.
func (l *WithMaxWaitRateLimiter[T]) Forget(item T) {
	l.limiter.Forget(item)
}

// NumRequeues returns the inner limiter's NumRequeues.
func (l *WithMaxWaitRateLimiter[T]) NumRequeues(item T) int {
	return l.limiter.NumRequeues(item)
}
