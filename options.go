package backoff

import (
	"log/slog"
	"math"
	"reflect"
	"time"
	"unsafe"

	"k8s.io/utils/clock"
)

// An Option configures a constructor or helper of this package. Every
// time-dependent constructor and helper accepts options as its trailing
// variadic parameter, so that a caller can build one []Option (a clock, say)
// and hand it to everything. The price is that an option passed to a
// function that does not read it is ignored: no panic, no error. The table
// below says where each one has an effect.
//
// Options are applied in order; when one is given twice, the last one wins.
// The zero Option does nothing. An Option is a small value: building one and
// passing it allocates nothing (see BenchmarkRetryOptions), except
// WithBreakerOpenSchedule and WithBreakerFailureRatio with minRequests above
// 255, which allocate once when built: build them once, with the breaker.
//
// # Which function reads which option
//
//	Option                  read by
//	WithClock               NewBackOff, NewBackOffWithJitter, NewLimiter,
//	                        NewKeyedLimiter, NewBucketRateLimiter,
//	                        DefaultControllerRateLimiter, NewQueue,
//	                        NewDelayingQueue, NewRateLimitingQueue,
//	                        NewRetryBudget, NewExponentialBackoffManager,
//	                        NewJitteredBackoffManager, Retry, RetryValue,
//	                        OnError, ExponentialBackoff,
//	                        ExponentialBackoffWithContext,
//	                        PollUntilContextCancel, PollUntilContextTimeout,
//	                        Forever, Until, UntilWithContext, NonSlidingUntil,
//	                        NonSlidingUntilWithContext, JitterUntil,
//	                        JitterUntilWithContext, NewAdaptiveLimiter,
//	                        NewAdaptiveRate, NewThrottler, NewBreaker
//	                        (BackoffUntil and BackoffUntilWithContext wait on
//	                        their manager's clock)
//	WithExpiry              NewBackOff, NewBackOffWithJitter
//	WithRequeueJitter       NewItemExponentialFailureRateLimiter,
//	                        NewItemFastSlowRateLimiter,
//	                        DefaultControllerRateLimiter, RunWorkers (RunWorkers
//	                        for Result.RequeueAfter)
//	WithMaxTrackedItems     NewItemExponentialFailureRateLimiter,
//	                        NewItemFastSlowRateLimiter,
//	                        DefaultControllerRateLimiter
//	WithMaxKeys             NewKeyedLimiter
//	WithPanicHandler        Forever, Until, UntilWithContext, NonSlidingUntil,
//	                        NonSlidingUntilWithContext, JitterUntil,
//	                        JitterUntilWithContext, BackoffUntil,
//	                        BackoffUntilWithContext
//	WithJitterKind,         Retry, RetryValue (not OnError, whose waits are
//	WithMaxElapsedTime,     ExponentialBackoff's)
//	WithMaxRetryAfter,
//	WithMinAttemptTime,
//	WithAttemptTimeout,
//	WithNotify,
//	WithRetryable,
//	WithMaxElapsedTimeSinceFirstFailure
//	WithRetryBudget         Retry, RetryValue, OnError, NewRateLimitingQueue
//	WithRetryBudgetMetrics  NewRetryBudget
//	WithName,               NewQueue, NewDelayingQueue, NewRateLimitingQueue (the
//	WithLogger,             name and the logger are used by RunWorkers' logs)
//	WithMetrics,
//	WithFairness,
//	WithMaxReadyWait
//	WithMinLimit,           NewAdaptiveLimiter
//	WithMaxLimit,
//	WithInitialLimit
//	WithInitialRate         NewAdaptiveRate
//	WithOnThrottled         NewAdaptiveRate
//	WithPacer               Retry, RetryValue, RunWorkers (and httpretry's
//	                        Transport, through Retry)
//	WithItemTimeout         RunWorkers
//	WithBreakerFailureRatio, NewBreaker
//	WithBreakerWindow,
//	WithBreakerProbes,
//	WithBreakerOpenSchedule,
//	WithBreakerStateChange,
//	WithBreakerMetrics,
//	WithBreakerConsecutiveFailures
//	WithHedge,              Retry, RetryValue (httpretry's Transport does not
//	WithMaxHedges,          hedge)
//	WithHedgeDelay
//	WithHedgeRelease        RetryValue
//
// [Jitter], [NewMaxOfRateLimiter] and [NewWithMaxWaitRateLimiter] take no
// options.
type Option struct {
	kind optionKind
	n    int64 // a duration, a count, a JitterKind, a float's bits or a name's length
	v    any   // a clock, a function, a pointer, an interface value or a name's bytes
}

// optionKind says which setting an Option carries.
type optionKind uint8

const (
	optionNone optionKind = iota // the zero Option
	optionClock
	optionExpiry
	optionRequeueJitter
	optionMaxTrackedItems
	optionMaxKeys
	optionPanicHandler
	optionMaxElapsedTime
	optionNotify
	optionRetryable
	optionJitterKind
	optionMaxRetryAfter
	optionName
	optionLogger
	optionMetrics
	optionFairness
	optionMaxReadyWait
	optionRetryBudget
	optionRetryBudgetMetrics
	optionMinLimit
	optionMaxLimit
	optionInitialLimit
	optionPacer
	optionInitialRate
	optionMinAttemptTime
	optionAttemptTimeout
	optionMaxElapsedSinceFailure
	optionItemTimeout
	optionBreakerFailureRatio // the breaker's options, read by breakerOptions (breakeroptions.go)
	optionBreakerWindow
	optionBreakerConsecutiveFailures
	optionBreakerOpenSchedule
	optionBreakerProbes
	optionBreakerStateChange
	optionBreakerMetrics
	optionHedge
	optionMaxHedges
	optionHedgeDelay
	optionHedgeRelease
	optionOnThrottled
)

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
	limits  limitsConfig  // read by AdaptiveLimiter and AdaptiveRate (adaptivelimiter.go)
}

// newConfig applies opts over the defaults. It is the one place that turns
// options into settings: the With* constructors only validate their argument
// and record it.
//
// It builds the config by value, with no pointer to it leaving this frame
// and no call through a function value, so that the config of Retry, Until
// and the other per-call helpers stays on their stack, whatever options they
// are given. The type assertions cannot fail: each kind is built by one
// constructor, with one type of value.
func newConfig(opts []Option) config {
	var c config
	c.apply(opts)
	return c
}

// apply is newConfig into a zero config that the caller keeps: a per-call
// helper (Retry) that declares its config and applies opts to it is spared
// the copy of the result (see BenchmarkRetryCall).
func (c *config) apply(opts []Option) {
	c.clock = clock.RealClock{}
	for i := range opts {
		o := &opts[i]
		switch o.kind {
		case optionClock:
			c.clock, _ = o.v.(clock.WithDelayedExecution)
		case optionExpiry:
			c.backoff.expiry, _ = o.v.(func(eventTime, lastUpdate time.Time, maxDelay time.Duration) bool)
		case optionRequeueJitter:
			c.limiter.jitter = math.Float64frombits(uint64(o.n))
		case optionMaxTrackedItems:
			c.limiter.maxTracked = int(o.n)
		case optionMaxKeys:
			c.limiter.maxKeys = int(o.n)
		case optionPanicHandler:
			c.loop.onPanic, _ = o.v.(func(any))
		case optionMaxElapsedTime:
			c.retry.maxElapsed = time.Duration(o.n)
			c.retry.sinceFailure = false
		case optionMaxElapsedSinceFailure:
			c.retry.maxElapsed = time.Duration(o.n)
			c.retry.sinceFailure = true
		case optionMinAttemptTime:
			c.retry.minAttempt = time.Duration(o.n)
		case optionAttemptTimeout:
			c.retry.attemptTimeout = time.Duration(o.n)
		case optionItemTimeout:
			c.queue.itemTimeout = time.Duration(o.n)
		case optionNotify:
			c.retry.notify, _ = o.v.(func(int, error, time.Duration))
		case optionRetryable:
			c.retry.retryable, _ = o.v.(func(error) bool)
		case optionJitterKind:
			c.retry.jitter = JitterKind(o.n)
		case optionMaxRetryAfter:
			c.retry.maxRetryAfter = time.Duration(o.n)
			c.retry.ignoreHints = o.n == 0
		case optionName:
			p, _ := o.v.(*byte)
			c.queue.name = unsafe.String(p, int(o.n))
		case optionLogger:
			c.queue.logger, _ = o.v.(*slog.Logger)
		case optionMetrics:
			c.queue.metrics, _ = o.v.(QueueMetrics)
		case optionFairness:
			c.queue.priority.fairKey = o.v
		case optionMaxReadyWait:
			c.queue.priority.maxReadyWait = time.Duration(o.n)
		case optionRetryBudget:
			c.budget.budget, _ = o.v.(*RetryBudget)
		case optionRetryBudgetMetrics:
			c.budget.metrics, _ = o.v.(RetryBudgetMetrics)
		case optionMinLimit:
			c.limits.min = int(o.n)
		case optionMaxLimit:
			c.limits.max = int(o.n)
		case optionInitialLimit:
			c.limits.initial = int(o.n)
		case optionPacer:
			c.retry.pacer, _ = o.v.(Pacer)
		case optionInitialRate:
			c.limits.initialRate = math.Float64frombits(uint64(o.n))
		case optionHedge:
			c.retry.hedge.delay = time.Duration(o.n)
		case optionMaxHedges:
			c.retry.hedge.max = int(o.n)
		case optionHedgeDelay:
			c.retry.hedge.learned, _ = o.v.(*HedgeDelay)
		case optionOnThrottled:
			c.limits.onThrottled, _ = o.v.(func(time.Duration))
		case optionHedgeRelease:
			c.retry.hedge.release, _ = o.v.(func(any))
		}
	}
}

// durationOption, countOption, floatOption and valueOption build the
// Options that carry a number or a value.
func durationOption(k optionKind, d time.Duration) Option { return Option{kind: k, n: int64(d)} }
func countOption(k optionKind, n int) Option              { return Option{kind: k, n: int64(n)} }
func floatOption(k optionKind, f float64) Option {
	return Option{kind: k, n: int64(math.Float64bits(f))}
}
func valueOption(k optionKind, v any) Option { return Option{kind: k, v: v} }

// nameOption carries a string without the allocation that storing it in an
// interface would make: its bytes' address, and its length.
func nameOption(k optionKind, s string) Option {
	return Option{kind: k, n: int64(len(s)), v: unsafe.StringData(s)}
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
//	Retry, ExponentialBackoff*, OnError   1 timer, during each wait (none for a wait of 0);
//	                                      with WithAttemptTimeout, 1 AfterFunc during
//	                                      each attempt; with WithHedge, 1 AfterFunc
//	                                      during each attempt and each hedge but the last
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
// # Deadlines
//
// A deadline on a context is an instant of the real clock, and the context
// ends at it whatever clock is injected. So [Retry] measures the time left
// before ctx's deadline on the real clock, and compares each wait, measured
// on c, with it: with a FakeClock a test sees the decisions production would
// take for the same durations, and the FakeClock's steps do not use up the
// deadline. A test that wants the deadline to pass as the waits are taken
// runs on the real clock in a testing/synctest bubble, where it is virtual.
// Timeouts that the package measures itself ([WithAttemptTimeout],
// [PollUntilContextTimeout]) run on c.
//
// WithClock panics if c is nil, including a typed nil such as a nil
// *testing.FakeClock, which would otherwise crash on first use.
func WithClock(c clock.WithDelayedExecution) Option {
	mustNotBeNil("WithClock", "c", isNilValue(c))
	return valueOption(optionClock, c)
}

// sameClock reports whether a and b are the same clock: equal values when
// their type is comparable (clock.RealClock{}, a *FakeClock), and false
// otherwise, rather than the panic of comparing them.
func sameClock(a, b clock.PassiveClock) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	return a == b
}
