package backoff

import (
	"time"
)

// BucketRateLimiter is a token bucket shared by all items: it bounds how fast
// items are requeued overall, whichever items they are, so that a burst of
// failures (a whole cache resync failing at once, say) cannot flood the
// queue. It holds up to burst tokens and gains limit tokens per second; each
// When takes one token, and when none is left it returns how long until the
// token it took would have been earned. Tokens are taken at once even when
// the caller will wait, so concurrent callers queue up: at one instant, the
// first burst calls return 0 and each later call waits 1/limit longer than
// the one before.
//
// The delays are those of client-go's workqueue.BucketRateLimiter, which is a
// golang.org/x/time/rate Limiter's Reserve().Delay(): the same token
// arithmetic in float64, so that a test ported from client-go sees the same
// values, to the nanosecond, for a clock that only moves forward, rounding
// included: at 10 per second, the 41st token owed is 4.099999999 s away, not
// 4.1 s. The differences:
//
//   - Time comes from the clock given with [WithClock], not time.Now, so the
//     bucket can be tested with a fake clock; and it is read once per When,
//     not twice, which with the allocation x/time/rate's Reservation costs
//     makes a When less than half as expensive.
//   - If the clock goes backwards, the bucket earns nothing until it passes
//     the latest instant it has seen. x/time/rate moves its reference instant
//     back with the clock, so a clock that steps back and forth (a wall clock
//     corrected by NTP, a fake clock set by hand) earns the same interval
//     twice.
//   - The constructor rejects a zero limit and a burst below 1, which in
//     client-go make every When after the first burst return x/time/rate's
//     InfDuration (about 292 years): the item is parked for good.
//
// Forget does nothing and NumRequeues returns 0, as in client-go: the bucket
// is a shared budget, not a per-item memory.
//
// A BucketRateLimiter is safe for concurrent use and allocates nothing. Its
// zero value is not usable (When panics): use [NewBucketRateLimiter].
type BucketRateLimiter[T comparable] struct {
	// Each When is the wait of a Limiter's ReserveN(1), made without the
	// Reservation's second clock read.
	lim Limiter
}

// NewBucketRateLimiter returns a [BucketRateLimiter] that allows limit
// requeues per second on average and up to burst at once. The bucket starts
// full. It reads the time from the clock given with [WithClock] (the real
// clock by default) and ignores the other options.
//
// A limit of math.Inf(1) means no limiting: every When returns 0 and takes no
// token, as with x/time/rate's Inf. A limit that is zero, negative or NaN
// panics, and so does a burst below 1: neither bounds a rate (client-go
// accepts them and parks items for about 292 years).
func NewBucketRateLimiter[T comparable](limit float64, burst int, opts ...Option) *BucketRateLimiter[T] {
	const where = "NewBucketRateLimiter"
	if !(limit > 0) {
		badArgument(where, "limit must be positive", limit)
	}
	if burst < 1 {
		badArgument(where, "burst must be at least 1", burst)
	}
	c := newConfig(opts)
	l := &BucketRateLimiter[T]{lim: Limiter{clock: c.clock, epoch: c.clock.Now()}}
	l.lim.init(limit, burst)
	return l
}

// When takes a token and returns how long the caller must wait for it: 0
// while the bucket holds a token, otherwise the time the bucket needs to earn
// back what it owes, which grows by 1/limit with every call until time passes.
// The item is ignored. The delay is never negative and saturates at the
// largest time.Duration. When never blocks.
func (l *BucketRateLimiter[T]) When(T) time.Duration {
	// The clock is read before the lock is taken, to keep the lock short;
	// callers racing past each other look like a clock going back by a few
	// nanoseconds, which the bucket handles.
	now := l.lim.now()
	l.lim.mu.Lock()
	wait := l.lim.takeOneLocked(now)
	l.lim.mu.Unlock()
	return wait
}

// Forget does nothing: the bucket's tokens are shared by all items, and
// forgetting one item does not give any back.
func (l *BucketRateLimiter[T]) Forget(T) {}

// NumRequeues returns 0: the bucket does not count per item.
func (l *BucketRateLimiter[T]) NumRequeues(T) int { return 0 }

// tokenBucket is a token bucket without a lock or a clock of its own, for
// the default controller limiter, which guards it with the failure counts'
// lock. It is the same arithmetic as [Limiter]'s. The zero value is not
// usable: call init.
type tokenBucket struct {
	limit float64 // tokens earned per second; > 0, InfLimit for no limit
	burst int
	state bucketState
}

func (b *tokenBucket) init(limit float64, burst int) {
	b.limit = sanitizeLimit(limit)
	b.burst = burst
	b.state.tokens = float64(burst)
}

// takeLocked takes one token at instant now and returns how long the caller
// must wait for it.
func (b *tokenBucket) takeLocked(now time.Duration) time.Duration {
	if b.limit == InfLimit {
		return 0
	}
	wait, _ := b.state.take(max(now, 0), 1, b.limit, b.burst, maxDuration)
	return wait
}
