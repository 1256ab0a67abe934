package backoff

import (
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
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
	clock  clock.PassiveClock
	epoch  time.Time // the clock's time at construction; see When
	mu     sync.Mutex
	bucket tokenBucket // guarded by mu
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
	l := &BucketRateLimiter[T]{clock: c.clock, epoch: c.clock.Now()}
	l.bucket.init(limit, burst)
	return l
}

// When takes a token and returns how long the caller must wait for it: 0
// while the bucket holds a token, otherwise the time the bucket needs to earn
// back what it owes, which grows by 1/limit with every call until time passes.
// The item is ignored. The delay is never negative and saturates at the
// largest time.Duration. When never blocks.
func (l *BucketRateLimiter[T]) When(T) time.Duration {
	if l.bucket.unlimited {
		return 0
	}
	// Since, not Now: with the real clock it reads only the monotonic clock,
	// one system clock read instead of time.Now's two, which is most of the
	// cost of a When. It is read before the lock is taken, to keep the lock
	// short; callers racing past each other look like a clock going back by
	// a few nanoseconds, which the bucket handles.
	now := l.clock.Since(l.epoch)
	l.mu.Lock()
	owed := l.bucket.takeLocked(now)
	l.mu.Unlock()
	return l.bucket.delay(owed)
}

// Forget does nothing: the bucket's tokens are shared by all items, and
// forgetting one item does not give any back.
func (l *BucketRateLimiter[T]) Forget(T) {}

// NumRequeues returns 0: the bucket does not count per item.
func (l *BucketRateLimiter[T]) NumRequeues(T) int { return 0 }

// tokenBucket is the arithmetic of BucketRateLimiter, kept apart from the
// clock and the lock so that the default limiter can share its lock with the
// failure counts. Instants are durations since an epoch, as the clock's Since
// returns them; they may be negative (a clock set back before the epoch) and
// saturate at the extremes. The zero value is not usable: call init.
type tokenBucket struct {
	limit     float64 // tokens earned per second; > 0
	burst     float64 // most tokens held; ≥ 1
	unlimited bool    // limit is +Inf: never take, never wait

	// tokens is negative while callers are waiting for tokens they already
	// took: -tokens is what the bucket owes as of last.
	tokens float64
	// last is the latest instant the bucket has seen, ≥ 0. It never moves
	// back, so no interval is earned twice, and now-last cannot overflow.
	last time.Duration
}

func (b *tokenBucket) init(limit float64, burst int) {
	b.limit = limit
	b.burst = float64(burst)
	b.unlimited = math.IsInf(limit, 1)
	b.tokens = b.burst
}

// takeLocked takes one token at instant now and returns how many tokens the
// bucket owes after it (≤ 0 if none), for delay.
func (b *tokenBucket) takeLocked(now time.Duration) (owed float64) {
	if now > b.last {
		// Sum, then cap, in this order and in float64, as x/time/rate does, so
		// that the delays agree to the nanosecond.
		b.tokens = min(b.tokens+(now-b.last).Seconds()*b.limit, b.burst)
		b.last = now
	}
	b.tokens--
	return -b.tokens
}

// delay returns how long the bucket takes to earn owed tokens: 0 if owed ≤
// 0, saturating at the largest time.Duration. It reads only limit, which
// never changes, so it needs no lock.
func (b *tokenBucket) delay(owed float64) time.Duration {
	if owed <= 0 {
		return 0
	}
	// x/time/rate computes (owed/limit)·1s; scaleDuration multiplies the same
	// two float64 values and saturates instead of overflowing.
	return scaleDuration(time.Second, owed/b.limit)
}
