package backoff

import "time"

// RateLimiter decides how long an item must wait before it is retried. Its
// method set is exactly that of client-go's workqueue.TypedRateLimiter[T], so
// a RateLimiter from this package can be passed wherever client-go's is
// accepted (controller-runtime's controller Options.RateLimiter among them),
// and client-go's limiters can be passed to this package's queues.
type RateLimiter[T comparable] interface {
	// When records a failure of item and returns how long it should wait
	// before it is processed again. It never returns a negative duration.
	When(item T) time.Duration
	// Forget clears what the limiter remembers of item, typically after it
	// was processed successfully. It resets the failure count, not a shared
	// budget such as a token bucket's tokens.
	Forget(item T)
	// NumRequeues returns how many times When was called for item since it
	// was last forgotten.
	NumRequeues(item T) int
}

// limiterConfig holds the options that the rate limiters read. Its zero value
// is the default: no jitter, no bound on the items remembered.
type limiterConfig struct {
	jitter     float64 // WithRequeueJitter's maxFactor; 0 means none
	maxTracked int     // WithMaxTrackedItems' n; 0 means no bound
	maxKeys    int     // WithMaxKeys' n (keyedlimiter.go); 0 means no bound
}

// WithRequeueJitter makes the per-item limiters
// ([NewItemExponentialFailureRateLimiter], [NewItemFastSlowRateLimiter], and
// so [DefaultControllerRateLimiter]) add a random part to each delay: up to
// maxFactor times the delay, as [Jitter] does, but never past the limiter's
// cap. A delay is thus never shorter than without jitter, and never longer
// than maxDelay (for the item-exponential limiter) or, for the fast-slow
// limiter, than slowDelay while an item is in its fast attempts. A delay that
// is already at the cap is returned as is: items that reach the cap at
// different moments stay spread out, since they keep the phase they had.
//
// Why: when a shared dependency fails, every item of every controller fails
// at once and, with client-go's limiters, retries in lockstep at 5 ms,
// 10 ms, 20 ms …, hitting the recovering dependency with synchronized waves
// (kubernetes#87915, client-go#739). client-go has no jitter here.
//
// A maxFactor of 0 means no jitter (the default); 0.1 to 1 are typical.
// WithRequeueJitter panics if maxFactor is negative, NaN or infinite.
func WithRequeueJitter(maxFactor float64) Option {
	mustBeFactor("WithRequeueJitter", "maxFactor", maxFactor)
	return func(c *config) { c.limiter.jitter = maxFactor }
}

// WithMaxTrackedItems bounds how many items the per-item limiters
// ([NewItemExponentialFailureRateLimiter], [NewItemFastSlowRateLimiter], and
// so [DefaultControllerRateLimiter]) remember a failure count for.
//
// Why: a limiter remembers an item from its first failure until Forget. A
// controller that forgets to call Forget after a success (or whose items are
// deleted while failing) leaks one entry per distinct item, forever
// (kubernetes#138743). With a bound, a limiter that is full makes room for a
// new item by dropping the item whose latest failure is the oldest — the
// least recently failed, most likely to be the leak — in O(1). A dropped item
// is as if forgotten: its next When returns the base delay (fastDelay for the
// fast-slow limiter) and NumRequeues returns 0 until then. Choose n well
// above the number of items that can be failing at once, so that only stale
// items are ever dropped.
//
// (The pull request for kubernetes#138743 instead stops tracking new items
// when full and gives each of them the maximum delay, so that a new item's
// first failure can wait 1000 s; dropping the stalest keeps new items on
// their normal schedule.)
//
// An n of 0 means no bound, the default and client-go's behaviour.
// WithMaxTrackedItems panics if n is negative.
func WithMaxTrackedItems(n int) Option {
	if n < 0 {
		badArgument("WithMaxTrackedItems", "n must not be negative", n)
	}
	return func(c *config) { c.limiter.maxTracked = n }
}
