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
// is the default. (Stub: the limiters land here.)
type limiterConfig struct{}
