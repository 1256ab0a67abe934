package backoff

import (
	"k8s.io/utils/clock"
)

// An Option configures a constructor or helper of this package. Every
// time-dependent constructor and helper accepts options as its trailing
// variadic parameter; an option that does not concern the function it is
// passed to is ignored, so a caller can build one []Option (a clock, say) and
// hand it to everything.
//
// Options are applied in order; when one is given twice, the last one wins.
// A nil Option is ignored.
type Option func(*config)

// config holds every setting an Option can change. Each part of the package
// reads only its own group, defined next to the code that reads it, so that a
// group's zero value is that part's default. The clock is the one setting that
// every part shares.
type config struct {
	clock   clock.WithDelayedExecution
	backoff backoffConfig // read by Backoff (backoff.go)
	limiter limiterConfig // read by the rate limiters (ratelimit.go)
	loop    loopConfig    // read by the loop helpers (wait.go)
	retry   retryConfig   // read by Retry (retry.go)
	queue   queueConfig   // read by the queues (queue.go)
	budget  budgetConfig  // read by RetryBudget, Retry and RateLimitingQueue (retrybudget.go)
}

// newConfig applies opts over the defaults.
//
// Calling an Option makes the config escape to the heap, so the common call
// with no options returns early: Retry, Until and the other per-call helpers
// then allocate nothing for their configuration.
func newConfig(opts []Option) config {
	if len(opts) == 0 {
		return config{clock: clock.RealClock{}}
	}
	c := &config{clock: clock.RealClock{}}
	for _, opt := range opts {
		if opt != nil {
			opt(c)
		}
	}
	return *c
}

// WithClock makes the constructor or helper read time, and wait, through c
// instead of the real clock.
//
// c is a [clock.WithDelayedExecution], which both clock.RealClock{} and
// *testing.FakeClock from k8s.io/utils/clock/testing satisfy; it is the
// narrowest interface of that package that offers both timers (for the loop
// helpers and Retry) and AfterFunc (for the delaying queue).
//
// With a FakeClock nothing in this package ever sleeps: every wait is a timer
// or an AfterFunc registered with the clock, visible through
// FakeClock.HasWaiters and FakeClock.Waiters, and released by
// FakeClock.Step. FakeClock runs AfterFunc callbacks inside Step while it
// holds its own lock; the package never calls back into the clock from such a
// callback, so stepping a FakeClock from any goroutine is safe.
//
// # Waiters
//
// A test that runs a helper on another goroutine steps the clock once the
// helper waits, which FakeClock.Waiters (a count) and HasWaiters report.
// What each helper registers, and when:
//
//	Retry, ExponentialBackoff*, OnError   1 timer, during each wait (none for a wait of 0)
//	PollUntilContextCancel                1 timer, during each wait
//	PollUntilContextTimeout               1 AfterFunc for the timeout, for the whole call,
//	                                      plus 1 timer during each wait: HasWaiters is
//	                                      true from the call on; wait for Waiters() == 2
//	Until, JitterUntil, BackoffUntil …    1 timer, during each period
//	queues (NewDelayingQueue …)           at most 1 AfterFunc, while some item waits
//	                                      for a delay, however many do
//	RunWorkers                            none of its own: its workers block in the
//	                                      queue's GetContext; the queue's, above
//
// Each waiter is removed when it fires or is stopped, and none outlives the
// call (a queue's, its ShutDown). To run such code to completion without
// stepping by hand, use backofftest.AutoStepClock
// (github.com/retrykit/backoff/backofftest), on which waiting takes no time.
//
// WithClock panics if c is nil, including a typed nil such as a nil
// *testing.FakeClock, which would otherwise crash on first use.
func WithClock(c clock.WithDelayedExecution) Option {
	mustNotBeNil("WithClock", "c", isNilValue(c))
	return func(cfg *config) { cfg.clock = c }
}
