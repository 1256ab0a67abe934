package backoff_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

// badInput is one row of the bad-input list that the package doc's "Bad
// input" section and the README state: a function, one of its parameters, a
// value outside the parameter's domain, and what the function does with it.
type badInput struct {
	fn    string // "NewBackOff", or "httpretry.NewTransport"
	param string // the parameter, as the signature names it
	value string // the value given: "-1s", "NaN", "+Inf", "0", "-1", "nil", "typed nil"
	call  func()
	// panics is the message after "backoff: fn: " (or "httpretry: ..."); ""
	// for a value the function accepts, as one of the exceptions the docs
	// list, or as a value that arrives at call time.
	panics string
	// accepted checks what an accepted value does, as documented.
	accepted func(t *testing.T)
}

func panicsOn(fn, param, value, panics string, call func()) badInput {
	return badInput{fn: fn, param: param, value: value, call: call, panics: panics}
}

func nilPanics(fn, param string, call func()) badInput {
	return panicsOn(fn, param, "nil", param+" must not be nil, got <nil>", call)
}

func accepts(fn, param, value string, check func(t *testing.T)) badInput {
	return badInput{fn: fn, param: param, value: value, accepted: check}
}

// badInputs is the list, one row per documented bad input. The test below
// checks each row against the code, that every parameter of a constructor,
// an option or a helper that the rule covers has its rows, and that the
// exceptions are the ones the docs name.
func badInputs() []badInput {
	ctx := context.Background()
	var nilCtx context.Context
	nan, inf := math.NaN(), math.Inf(1)
	f := func() {}
	fctx := func(context.Context) {}
	manager := backoff.NewJitteredBackoffManager(time.Second, 0)
	condCtx := func(context.Context) (bool, error) { return true, nil }
	s := backoff.Schedule{Duration: time.Millisecond, Steps: 2}
	limiter := backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Second)
	var nilLimiter *backoff.ItemExponentialFailureRateLimiter[int]
	handle := func(context.Context, int) (backoff.Result, error) { return backoff.Result{}, nil }
	q := backoff.NewRateLimitingQueue[int](limiter)
	q.ShutDown()
	var nilFake *testclock.FakeClock
	var nilMetrics *nopQueueMetrics
	var nilPacer *backoff.Limiter
	var nilBudgetMetrics *nopBudgetMetrics
	var nilBreakerMetrics *nopBreakerMetrics
	fake := func() *testclock.FakeClock { return testclock.NewFakeClock(time.Unix(0, 0)) }

	rows := []badInput{
		// Helpers: a nil function, context, manager or queue, at the call.
		nilPanics("Retry", "ctx", func() { _ = backoff.Retry(nilCtx, s, func(context.Context) error { return nil }) }),
		nilPanics("Retry", "fn", func() { _ = backoff.Retry(ctx, s, nil) }),
		panicsOn("Retry", "s", "Jitter 11", "s.Jitter must be at most 10, got 11", func() {
			_ = backoff.Retry(ctx, backoff.Schedule{Duration: 1, Steps: 2, Jitter: 11}, func(context.Context) error { return nil })
		}),
		panicsOn("Retry", "s", "Factor +Inf, no Cap", "s.Factor must be finite when s.Cap is not set, got +Inf", func() {
			_ = backoff.Retry(ctx, backoff.Schedule{Duration: 1, Steps: 2, Factor: inf}, func(context.Context) error { return nil })
		}),
		accepts("Retry", "s", "Duration -1s", func(t *testing.T) {
			calls := 0
			err := backoff.Retry(ctx, backoff.Schedule{Duration: -time.Second, Steps: 3}, func(context.Context) error {
				calls++
				return errors.New("fails")
			}, backoff.WithClock(fake())) // a wait on a FakeClock would block: a negative one counts as 0
			assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
			assert.Equal(t, 3, calls)
		}),
		nilPanics("RetryValue", "ctx", func() {
			_, _ = backoff.RetryValue(nilCtx, s, func(context.Context) (int, error) { return 1, nil })
		}),
		nilPanics("RetryValue", "fn", func() { _, _ = backoff.RetryValue[int](ctx, s, nil) }),
		nilPanics("OnError", "fn", func() { _ = backoff.OnError(s, nil, nil) }),
		accepts("OnError", "retriable", "nil", func(t *testing.T) {
			calls := 0
			err := backoff.OnError(backoff.Schedule{Steps: 3}, nil, func() error {
				calls++
				if calls < 3 {
					return errors.New("fails")
				}
				return nil
			})
			assert.NoError(t, err)
			assert.Equal(t, 3, calls, "every error is retried")
		}),
		nilPanics("ExponentialBackoff", "condition", func() { _ = backoff.ExponentialBackoff(s, nil) }),
		nilPanics("ExponentialBackoffWithContext", "ctx", func() { _ = backoff.ExponentialBackoffWithContext(nilCtx, s, condCtx) }),
		nilPanics("ExponentialBackoffWithContext", "condition", func() { _ = backoff.ExponentialBackoffWithContext(ctx, s, nil) }),
		nilPanics("PollUntilContextCancel", "ctx", func() { _ = backoff.PollUntilContextCancel(nilCtx, time.Second, true, condCtx) }),
		nilPanics("PollUntilContextCancel", "condition", func() { _ = backoff.PollUntilContextCancel(ctx, time.Second, true, nil) }),
		accepts("PollUntilContextCancel", "interval", "0", func(t *testing.T) {
			checks := 0
			err := backoff.PollUntilContextCancel(ctx, 0, false, func(context.Context) (bool, error) {
				checks++
				return checks == 1000, nil
			}, backoff.WithClock(fake())) // back to back: the fake clock is never stepped
			assert.NoError(t, err)
		}),
		nilPanics("PollUntilContextTimeout", "ctx", func() {
			_ = backoff.PollUntilContextTimeout(nilCtx, time.Second, time.Minute, true, condCtx)
		}),
		nilPanics("PollUntilContextTimeout", "condition", func() {
			_ = backoff.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, nil)
		}),
		nilPanics("Forever", "f", func() { backoff.Forever(nil, time.Second) }),
		nilPanics("Until", "f", func() { backoff.Until(nil, time.Second, nil) }),
		nilPanics("UntilWithContext", "ctx", func() { backoff.UntilWithContext(nilCtx, fctx, time.Second) }),
		nilPanics("UntilWithContext", "f", func() { backoff.UntilWithContext(ctx, nil, time.Second) }),
		nilPanics("NonSlidingUntil", "f", func() { backoff.NonSlidingUntil(nil, time.Second, nil) }),
		nilPanics("NonSlidingUntilWithContext", "ctx", func() { backoff.NonSlidingUntilWithContext(nilCtx, fctx, time.Second) }),
		nilPanics("NonSlidingUntilWithContext", "f", func() { backoff.NonSlidingUntilWithContext(ctx, nil, time.Second) }),
		nilPanics("JitterUntil", "f", func() { backoff.JitterUntil(nil, time.Second, 0, true, nil) }),
		nilPanics("JitterUntilWithContext", "ctx", func() { backoff.JitterUntilWithContext(nilCtx, fctx, time.Second, 0, true) }),
		nilPanics("JitterUntilWithContext", "f", func() { backoff.JitterUntilWithContext(ctx, nil, time.Second, 0, true) }),
		accepts("JitterUntil", "period", "-1s", func(t *testing.T) {
			stop := make(chan struct{})
			runs := 0
			backoff.JitterUntil(func() {
				if runs++; runs == 100 {
					close(stop)
				}
			}, -time.Second, 0, true, stop) // the real clock: waits of 0 end at once
			assert.Equal(t, 100, runs, "back to back, as for a period of 0")
		}),
		nilPanics("BackoffUntil", "f", func() { backoff.BackoffUntil(nil, manager, true, nil) }),
		nilPanics("BackoffUntil", "manager", func() { backoff.BackoffUntil(f, nil, true, nil) }),
		nilPanics("BackoffUntilWithContext", "ctx", func() { backoff.BackoffUntilWithContext(nilCtx, fctx, manager, true) }),
		nilPanics("BackoffUntilWithContext", "f", func() { backoff.BackoffUntilWithContext(ctx, nil, manager, true) }),
		nilPanics("BackoffUntilWithContext", "manager", func() { backoff.BackoffUntilWithContext(ctx, fctx, nil, true) }),
		nilPanics("RunWorkers", "ctx", func() { backoff.RunWorkers(nilCtx, q, 1, handle) }),
		nilPanics("RunWorkers", "q", func() { backoff.RunWorkers[int](ctx, nil, 1, handle) }),
		nilPanics("RunWorkers", "handle", func() { backoff.RunWorkers(ctx, q, 1, nil) }),
		panicsOn("RunWorkers", "workers", "0", "workers must be at least 1, got 0", func() { backoff.RunWorkers(ctx, q, 0, handle) }),
		accepts("Jitter", "maxFactor", "-1", func(t *testing.T) {
			assert.Equal(t, time.Second, backoff.Jitter(time.Second, -1), "no jitter")
		}),
		accepts("Jitter", "d", "-1s", func(t *testing.T) {
			assert.Zero(t, backoff.Jitter(-time.Second, 0.5), "counts as 0")
		}),

		// Per-key backoff.
		panicsOn("NewBackOff", "initial", "0", "initial must be positive, got 0s", func() { backoff.NewBackOff(0, time.Second) }),
		panicsOn("NewBackOff", "initial", "-1s", "initial must be positive, got -1s", func() { backoff.NewBackOff(-time.Second, time.Second) }),
		panicsOn("NewBackOff", "maxDelay", "-1s", "maxDelay must not be negative, got -1s", func() { backoff.NewBackOff(time.Second, -time.Second) }),
		panicsOn("NewBackOff", "maxDelay", "below initial", "maxDelay must be at least initial (2s), got 1s", func() {
			backoff.NewBackOff(2*time.Second, time.Second)
		}),
		panicsOn("NewBackOffWithJitter", "initial", "-1s", "initial must be positive, got -1s", func() {
			backoff.NewBackOffWithJitter(-time.Second, time.Second, 0)
		}),
		panicsOn("NewBackOffWithJitter", "maxDelay", "-1s", "maxDelay must not be negative, got -1s", func() {
			backoff.NewBackOffWithJitter(time.Second, -time.Second, 0)
		}),
		panicsOn("NewBackOffWithJitter", "maxJitterFactor", "NaN", "maxJitterFactor must be a finite number ≥ 0, got NaN", func() {
			backoff.NewBackOffWithJitter(time.Second, time.Second, nan)
		}),
		panicsOn("NewBackOffWithJitter", "maxJitterFactor", "-1", "maxJitterFactor must be a finite number ≥ 0, got -1", func() {
			backoff.NewBackOffWithJitter(time.Second, time.Second, -1)
		}),
		panicsOn("NewBackOffWithJitter", "maxJitterFactor", "+Inf", "maxJitterFactor must be a finite number ≥ 0, got +Inf", func() {
			backoff.NewBackOffWithJitter(time.Second, time.Second, inf)
		}),
		nilPanics("WithExpiry", "expired", func() { backoff.WithExpiry(nil) }),

		// Requeue rate limiters.
		panicsOn("NewItemExponentialFailureRateLimiter", "baseDelay", "0", "baseDelay must be positive, got 0s", func() {
			backoff.NewItemExponentialFailureRateLimiter[int](0, time.Second)
		}),
		panicsOn("NewItemExponentialFailureRateLimiter", "baseDelay", "-1s", "baseDelay must be positive, got -1s", func() {
			backoff.NewItemExponentialFailureRateLimiter[int](-time.Second, time.Second)
		}),
		panicsOn("NewItemExponentialFailureRateLimiter", "maxDelay", "-1s", "maxDelay must not be negative, got -1s", func() {
			backoff.NewItemExponentialFailureRateLimiter[int](time.Second, -time.Second)
		}),
		panicsOn("NewItemExponentialFailureRateLimiter", "maxDelay", "below baseDelay", "maxDelay must not be less than baseDelay 2s, got 1s", func() {
			backoff.NewItemExponentialFailureRateLimiter[int](2*time.Second, time.Second)
		}),
		panicsOn("NewItemFastSlowRateLimiter", "fastDelay", "-1s", "fastDelay must not be negative, got -1s", func() {
			backoff.NewItemFastSlowRateLimiter[int](-time.Second, time.Second, 1)
		}),
		panicsOn("NewItemFastSlowRateLimiter", "slowDelay", "-1s", "slowDelay must not be negative, got -1s", func() {
			backoff.NewItemFastSlowRateLimiter[int](0, -time.Second, 1)
		}),
		panicsOn("NewItemFastSlowRateLimiter", "slowDelay", "below fastDelay", "slowDelay must not be less than fastDelay 2s, got 1s", func() {
			backoff.NewItemFastSlowRateLimiter[int](2*time.Second, time.Second, 1)
		}),
		panicsOn("NewItemFastSlowRateLimiter", "maxFastAttempts", "-1", "maxFastAttempts must not be negative, got -1", func() {
			backoff.NewItemFastSlowRateLimiter[int](time.Second, time.Second, -1)
		}),
		panicsOn("NewBucketRateLimiter", "limit", "NaN", "limit must be positive, got NaN", func() { backoff.NewBucketRateLimiter[int](nan, 1) }),
		panicsOn("NewBucketRateLimiter", "limit", "-1", "limit must be positive, got -1", func() { backoff.NewBucketRateLimiter[int](-1, 1) }),
		panicsOn("NewBucketRateLimiter", "limit", "0", "limit must be positive, got 0", func() { backoff.NewBucketRateLimiter[int](0, 1) }),
		accepts("NewBucketRateLimiter", "limit", "+Inf", func(t *testing.T) {
			l := backoff.NewBucketRateLimiter[int](inf, 1, backoff.WithClock(fake()))
			for i := range 1000 {
				require.Zero(t, l.When(i), "no limit")
			}
		}),
		panicsOn("NewBucketRateLimiter", "burst", "0", "burst must be at least 1, got 0", func() { backoff.NewBucketRateLimiter[int](10, 0) }),
		panicsOn("NewBucketRateLimiter", "burst", "-1", "burst must be at least 1, got -1", func() { backoff.NewBucketRateLimiter[int](10, -1) }),
		panicsOn("NewMaxOfRateLimiter", "limiters", "none", "limiters must hold at least one limiter, got 0", func() {
			backoff.NewMaxOfRateLimiter[int]()
		}),
		panicsOn("NewMaxOfRateLimiter", "limiters", "nil", "limiters[1] must not be nil, got <nil>", func() {
			backoff.NewMaxOfRateLimiter[int](limiter, nil)
		}),
		panicsOn("NewMaxOfRateLimiter", "limiters", "typed nil", "limiters[0] must not be nil, got <nil>", func() {
			backoff.NewMaxOfRateLimiter[int](nilLimiter)
		}),
		nilPanics("NewWithMaxWaitRateLimiter", "limiter", func() { backoff.NewWithMaxWaitRateLimiter[int](nil, time.Second) }),
		panicsOn("NewWithMaxWaitRateLimiter", "limiter", "typed nil", "limiter must not be nil, got <nil>", func() {
			backoff.NewWithMaxWaitRateLimiter[int](nilLimiter, time.Second)
		}),
		panicsOn("NewWithMaxWaitRateLimiter", "maxDelay", "-1s", "maxDelay must not be negative, got -1s", func() {
			backoff.NewWithMaxWaitRateLimiter[int](limiter, -time.Second)
		}),
		panicsOn("WithRequeueJitter", "maxFactor", "NaN", "maxFactor must be a finite number ≥ 0, got NaN", func() { backoff.WithRequeueJitter(nan) }),
		panicsOn("WithRequeueJitter", "maxFactor", "-1", "maxFactor must be a finite number ≥ 0, got -1", func() { backoff.WithRequeueJitter(-1) }),
		panicsOn("WithRequeueJitter", "maxFactor", "+Inf", "maxFactor must be a finite number ≥ 0, got +Inf", func() { backoff.WithRequeueJitter(inf) }),
		panicsOn("WithMaxTrackedItems", "n", "-1", "n must not be negative, got -1", func() { backoff.WithMaxTrackedItems(-1) }),

		// Loop managers.
		panicsOn("NewExponentialBackoffManager", "initBackoff", "0", "initBackoff must be positive, got 0s", func() {
			backoff.NewExponentialBackoffManager(0, time.Second, time.Minute, 2, 0)
		}),
		panicsOn("NewExponentialBackoffManager", "initBackoff", "-1s", "initBackoff must be positive, got -1s", func() {
			backoff.NewExponentialBackoffManager(-time.Second, time.Second, time.Minute, 2, 0)
		}),
		panicsOn("NewExponentialBackoffManager", "maxBackoff", "-1s", "maxBackoff must not be negative, got -1s", func() {
			backoff.NewExponentialBackoffManager(time.Second, -time.Second, time.Minute, 2, 0)
		}),
		panicsOn("NewExponentialBackoffManager", "maxBackoff", "below initBackoff", "maxBackoff must be 0 or at least initBackoff (2s), got 1s", func() {
			backoff.NewExponentialBackoffManager(2*time.Second, time.Second, time.Minute, 2, 0)
		}),
		panicsOn("NewExponentialBackoffManager", "resetDuration", "-1s", "resetDuration must not be negative, got -1s", func() {
			backoff.NewExponentialBackoffManager(time.Second, time.Second, -time.Second, 2, 0)
		}),
		panicsOn("NewExponentialBackoffManager", "backoffFactor", "NaN", "backoffFactor must be a finite number ≥ 0, got NaN", func() {
			backoff.NewExponentialBackoffManager(time.Second, time.Second, time.Minute, nan, 0)
		}),
		panicsOn("NewExponentialBackoffManager", "backoffFactor", "-1", "backoffFactor must be a finite number ≥ 0, got -1", func() {
			backoff.NewExponentialBackoffManager(time.Second, time.Second, time.Minute, -1, 0)
		}),
		panicsOn("NewExponentialBackoffManager", "backoffFactor", "+Inf", "backoffFactor must be a finite number ≥ 0, got +Inf", func() {
			backoff.NewExponentialBackoffManager(time.Second, time.Second, time.Minute, inf, 0)
		}),
		panicsOn("NewExponentialBackoffManager", "jitter", "NaN", "jitter must be a finite number ≥ 0, got NaN", func() {
			backoff.NewExponentialBackoffManager(time.Second, time.Second, time.Minute, 2, nan)
		}),
		panicsOn("NewExponentialBackoffManager", "jitter", "-1", "jitter must be a finite number ≥ 0, got -1", func() {
			backoff.NewExponentialBackoffManager(time.Second, time.Second, time.Minute, 2, -1)
		}),
		panicsOn("NewExponentialBackoffManager", "jitter", "+Inf", "jitter must be a finite number ≥ 0, got +Inf", func() {
			backoff.NewExponentialBackoffManager(time.Second, time.Second, time.Minute, 2, inf)
		}),
		panicsOn("NewJitteredBackoffManager", "duration", "-1s", "duration must not be negative, got -1s", func() {
			backoff.NewJitteredBackoffManager(-time.Second, 0)
		}),
		panicsOn("NewJitteredBackoffManager", "jitter", "NaN", "jitter must be a finite number ≥ 0, got NaN", func() { backoff.NewJitteredBackoffManager(time.Second, nan) }),
		panicsOn("NewJitteredBackoffManager", "jitter", "-1", "jitter must be a finite number ≥ 0, got -1", func() { backoff.NewJitteredBackoffManager(time.Second, -1) }),
		panicsOn("NewJitteredBackoffManager", "jitter", "+Inf", "jitter must be a finite number ≥ 0, got +Inf", func() { backoff.NewJitteredBackoffManager(time.Second, inf) }),
		nilPanics("WithPanicHandler", "h", func() { backoff.WithPanicHandler(nil) }),

		// Token buckets: x/time/rate's values.
		panicsOn("NewLimiter", "r", "NaN", "r must not be negative or NaN, got NaN", func() { backoff.NewLimiter(nan, 1) }),
		panicsOn("NewLimiter", "r", "-1", "r must not be negative or NaN, got -1", func() { backoff.NewLimiter(-1, 1) }),
		accepts("NewLimiter", "r", "0", func(t *testing.T) {
			clk := fake()
			l := backoff.NewLimiter(0, 2, backoff.WithClock(clk))
			assert.True(t, l.Allow())
			assert.True(t, l.Allow())
			clk.Step(time.Hour)
			assert.False(t, l.Allow(), "the burst, then nothing")
		}),
		accepts("NewLimiter", "r", "+Inf", func(t *testing.T) {
			l := backoff.NewLimiter(inf, 0, backoff.WithClock(fake()))
			for range 1000 {
				require.True(t, l.Allow(), "everything, whatever the burst")
			}
		}),
		panicsOn("NewLimiter", "burst", "-1", "burst must not be negative, got -1", func() { backoff.NewLimiter(10, -1) }),
		accepts("NewLimiter", "burst", "0", func(t *testing.T) {
			clk := fake()
			l := backoff.NewLimiter(10, 0, backoff.WithClock(clk))
			assert.False(t, l.Allow())
			clk.Step(time.Hour)
			assert.False(t, l.Allow(), "nothing at all")
		}),
		panicsOn("NewKeyedLimiter", "r", "NaN", "r must not be negative or NaN, got NaN", func() { backoff.NewKeyedLimiter[string](nan, 1) }),
		panicsOn("NewKeyedLimiter", "r", "-1", "r must not be negative or NaN, got -1", func() { backoff.NewKeyedLimiter[string](-1, 1) }),
		accepts("NewKeyedLimiter", "r", "0", func(t *testing.T) {
			clk := fake()
			k := backoff.NewKeyedLimiter[string](0, 1, backoff.WithClock(clk))
			assert.True(t, k.Allow("a"))
			clk.Step(time.Hour)
			assert.False(t, k.Allow("a"), "the burst, then nothing")
		}),
		accepts("NewKeyedLimiter", "r", "+Inf", func(t *testing.T) {
			k := backoff.NewKeyedLimiter[string](inf, 0, backoff.WithClock(fake()))
			for range 1000 {
				require.True(t, k.Allow("a"), "everything, whatever the burst")
			}
		}),
		panicsOn("NewKeyedLimiter", "burst", "-1", "burst must not be negative, got -1", func() { backoff.NewKeyedLimiter[string](10, -1) }),
		accepts("NewKeyedLimiter", "burst", "0", func(t *testing.T) {
			clk := fake()
			k := backoff.NewKeyedLimiter[string](10, 0, backoff.WithClock(clk))
			assert.False(t, k.Allow("a"))
			clk.Step(time.Hour)
			assert.False(t, k.Allow("a"), "nothing at all")
		}),
		panicsOn("WithMaxKeys", "n", "-1", "n must not be negative, got -1", func() { backoff.WithMaxKeys(-1) }),

		// Retry's options and the budget.
		panicsOn("WithMaxElapsedTime", "d", "-1s", "d must not be negative, got -1s", func() { backoff.WithMaxElapsedTime(-time.Second) }),
		panicsOn("WithMaxElapsedTimeSinceFirstFailure", "d", "-1s", "d must not be negative, got -1s", func() { backoff.WithMaxElapsedTimeSinceFirstFailure(-time.Second) }),
		panicsOn("WithMinAttemptTime", "d", "-1s", "d must not be negative, got -1s", func() { backoff.WithMinAttemptTime(-time.Second) }),
		panicsOn("WithAttemptTimeout", "d", "-1s", "d must not be negative, got -1s", func() { backoff.WithAttemptTimeout(-time.Second) }),
		panicsOn("WithItemTimeout", "d", "-1s", "d must not be negative, got -1s", func() { backoff.WithItemTimeout(-time.Second) }),
		panicsOn("WithMaxRetryAfter", "d", "-1s", "d must not be negative, got -1s", func() { backoff.WithMaxRetryAfter(-time.Second) }),
		nilPanics("WithNotify", "notify", func() { backoff.WithNotify(nil) }),
		nilPanics("WithRetryable", "retryable", func() { backoff.WithRetryable(nil) }),
		panicsOn("WithJitterKind", "k", "-1", "k must be one of the JitterKind constants, got JitterKind(-1)", func() { backoff.WithJitterKind(-1) }),
		nilPanics("WithRetryBudget", "b", func() { backoff.WithRetryBudget(nil) }),
		nilPanics("WithRetryBudgetMetrics", "m", func() { backoff.WithRetryBudgetMetrics(nil) }),
		panicsOn("WithRetryBudgetMetrics", "m", "typed nil", "m must not be nil, got <nil>", func() {
			backoff.WithRetryBudgetMetrics(nilBudgetMetrics)
		}),
		panicsOn("NewRetryBudget", "ratio", "NaN", "ratio must be a finite number ≥ 0, got NaN", func() { backoff.NewRetryBudget(nan, 1, time.Second) }),
		panicsOn("NewRetryBudget", "ratio", "-1", "ratio must be a finite number ≥ 0, got -1", func() { backoff.NewRetryBudget(-1, 1, time.Second) }),
		panicsOn("NewRetryBudget", "ratio", "+Inf", "ratio must be a finite number ≥ 0, got +Inf", func() { backoff.NewRetryBudget(inf, 1, time.Second) }),
		panicsOn("NewRetryBudget", "minPerSecond", "NaN", "minPerSecond must be a finite number ≥ 0, got NaN", func() {
			backoff.NewRetryBudget(0.1, nan, time.Second)
		}),
		panicsOn("NewRetryBudget", "minPerSecond", "-1", "minPerSecond must be a finite number ≥ 0, got -1", func() {
			backoff.NewRetryBudget(0.1, -1, time.Second)
		}),
		panicsOn("NewRetryBudget", "minPerSecond", "+Inf", "minPerSecond must be a finite number ≥ 0, got +Inf", func() {
			backoff.NewRetryBudget(0.1, inf, time.Second)
		}),
		panicsOn("NewRetryBudget", "window", "0", "window must be positive, got 0s", func() { backoff.NewRetryBudget(0.1, 1, 0) }),
		panicsOn("NewRetryBudget", "window", "-1s", "window must be positive, got -1s", func() { backoff.NewRetryBudget(0.1, 1, -time.Second) }),

		// Hedging.
		panicsOn("WithHedge", "delay", "-1s", "delay must not be negative, got -1s", func() { backoff.WithHedge(-time.Second) }),
		panicsOn("WithMaxHedges", "n", "0", "n must be at least 1, got 0", func() { backoff.WithMaxHedges(0) }),
		panicsOn("WithMaxHedges", "n", "-1", "n must be at least 1, got -1", func() { backoff.WithMaxHedges(-1) }),
		nilPanics("WithHedgeDelay", "d", func() { backoff.WithHedgeDelay(nil) }),
		nilPanics("WithHedgeRelease", "release", func() { backoff.WithHedgeRelease(nil) }),
		panicsOn("NewHedgeDelay", "quantile", "NaN", "quantile must be inside (0, 1), got NaN", func() {
			backoff.NewHedgeDelay(nan, time.Millisecond, time.Second)
		}),
		panicsOn("NewHedgeDelay", "quantile", "0", "quantile must be inside (0, 1), got 0", func() {
			backoff.NewHedgeDelay(0, time.Millisecond, time.Second)
		}),
		panicsOn("NewHedgeDelay", "quantile", "1", "quantile must be inside (0, 1), got 1", func() {
			backoff.NewHedgeDelay(1, time.Millisecond, time.Second)
		}),
		panicsOn("NewHedgeDelay", "quantile", "-1", "quantile must be inside (0, 1), got -1", func() {
			backoff.NewHedgeDelay(-1, time.Millisecond, time.Second)
		}),
		panicsOn("NewHedgeDelay", "quantile", "+Inf", "quantile must be inside (0, 1), got +Inf", func() {
			backoff.NewHedgeDelay(inf, time.Millisecond, time.Second)
		}),
		panicsOn("NewHedgeDelay", "floor", "0", "floor must be positive, got 0s", func() { backoff.NewHedgeDelay(0.95, 0, time.Second) }),
		panicsOn("NewHedgeDelay", "floor", "-1s", "floor must be positive, got -1s", func() { backoff.NewHedgeDelay(0.95, -time.Second, time.Second) }),
		panicsOn("NewHedgeDelay", "ceiling", "-1s", "ceiling must be at least floor, got -1s", func() {
			backoff.NewHedgeDelay(0.95, time.Millisecond, -time.Second)
		}),
		panicsOn("NewHedgeDelay", "ceiling", "below floor", "ceiling must be at least floor, got 1ms", func() {
			backoff.NewHedgeDelay(0.95, time.Second, time.Millisecond)
		}),

		// Queues.
		nilPanics("NewRateLimitingQueue", "limiter", func() { backoff.NewRateLimitingQueue[int](nil) }),
		panicsOn("NewRateLimitingQueue", "limiter", "typed nil", "limiter must not be nil, got <nil>", func() {
			backoff.NewRateLimitingQueue[int](nilLimiter)
		}),
		nilPanics("WithClock", "c", func() { backoff.WithClock(nil) }),
		panicsOn("WithClock", "c", "typed nil", "c must not be nil, got <nil>", func() { backoff.WithClock(nilFake) }),
		nilPanics("WithLogger", "l", func() { backoff.WithLogger(nil) }),
		nilPanics("WithMetrics", "m", func() { backoff.WithMetrics(nil) }),
		panicsOn("WithMetrics", "m", "typed nil", "m must not be nil, got <nil>", func() { backoff.WithMetrics(nilMetrics) }),
		nilPanics("WithFairness", "key", func() { backoff.WithFairness[int](nil) }),
		panicsOn("WithMaxReadyWait", "d", "-1s", "d must not be negative, got -1s", func() { backoff.WithMaxReadyWait(-time.Second) }),

		// Pacers.
		nilPanics("WithPacer", "p", func() { backoff.WithPacer(nil) }),
		panicsOn("WithPacer", "p", "typed nil", "p must not be nil, got <nil>", func() { backoff.WithPacer(nilPacer) }),
		panicsOn("WithMinLimit", "n", "0", "n must be at least 1, got 0", func() { backoff.WithMinLimit(0) }),
		panicsOn("WithMinLimit", "n", "-1", "n must be at least 1, got -1", func() { backoff.WithMinLimit(-1) }),
		panicsOn("WithMaxLimit", "n", "-1", "n must be at least 1, got -1", func() { backoff.WithMaxLimit(-1) }),
		panicsOn("WithInitialLimit", "n", "-1", "n must be at least 1, got -1", func() { backoff.WithInitialLimit(-1) }),
		panicsOn("NewAdaptiveLimiter", "opts", "minimum above maximum", "the minimum limit must not exceed the maximum (5), got 10", func() {
			backoff.NewAdaptiveLimiter(backoff.WithMinLimit(10), backoff.WithMaxLimit(5))
		}),
		nilPanics("WithOnThrottled", "f", func() { backoff.WithOnThrottled(nil) }),
		panicsOn("WithInitialRate", "r", "NaN", "r must be a positive number of requests per second, got NaN", func() { backoff.WithInitialRate(nan) }),
		panicsOn("WithInitialRate", "r", "-1", "r must be a positive number of requests per second, got -1", func() { backoff.WithInitialRate(-1) }),
		panicsOn("WithInitialRate", "r", "0", "r must be a positive number of requests per second, got 0", func() { backoff.WithInitialRate(0) }),
		accepts("WithInitialRate", "r", "+Inf", func(t *testing.T) {
			r := backoff.NewAdaptiveRate(backoff.WithInitialRate(inf), backoff.WithClock(fake()))
			for range 1000 {
				require.True(t, r.Allow(), "no limit until the first throttling answer")
			}
		}),
		panicsOn("NewThrottler", "k", "NaN", "k must be a finite number ≥ 1, got NaN", func() { backoff.NewThrottler(nan, time.Second) }),
		panicsOn("NewThrottler", "k", "-1", "k must be a finite number ≥ 1, got -1", func() { backoff.NewThrottler(-1, time.Second) }),
		panicsOn("NewThrottler", "k", "+Inf", "k must be a finite number ≥ 1, got +Inf", func() { backoff.NewThrottler(inf, time.Second) }),
		panicsOn("NewThrottler", "window", "0", "window must be positive, got 0s", func() { backoff.NewThrottler(2, 0) }),
		panicsOn("NewThrottler", "window", "-1s", "window must be positive, got -1s", func() { backoff.NewThrottler(2, -time.Second) }),

		// Breaker.
		panicsOn("WithBreakerFailureRatio", "ratio", "NaN", "ratio must be in (0, 1], got NaN", func() { backoff.WithBreakerFailureRatio(nan, 20) }),
		panicsOn("WithBreakerFailureRatio", "ratio", "-1", "ratio must be in (0, 1], got -1", func() { backoff.WithBreakerFailureRatio(-1, 20) }),
		panicsOn("WithBreakerFailureRatio", "ratio", "+Inf", "ratio must be in (0, 1], got +Inf", func() { backoff.WithBreakerFailureRatio(inf, 20) }),
		panicsOn("WithBreakerFailureRatio", "ratio", "0", "ratio must be in (0, 1], got 0", func() { backoff.WithBreakerFailureRatio(0, 20) }),
		panicsOn("WithBreakerFailureRatio", "ratio", "1.5", "ratio must be in (0, 1], got 1.5", func() { backoff.WithBreakerFailureRatio(1.5, 20) }),
		panicsOn("WithBreakerFailureRatio", "minRequests", "-1", "minRequests must be at least 1, got -1", func() { backoff.WithBreakerFailureRatio(0.5, -1) }),
		panicsOn("WithBreakerFailureRatio", "minRequests", "0", "minRequests must be at least 1, got 0", func() { backoff.WithBreakerFailureRatio(0.5, 0) }),
		panicsOn("WithBreakerWindow", "d", "-1s", "d must be positive, got -1s", func() { backoff.WithBreakerWindow(-time.Second) }),
		panicsOn("WithBreakerWindow", "d", "0", "d must be positive, got 0s", func() { backoff.WithBreakerWindow(0) }),
		panicsOn("WithBreakerWindow", "d", "5ns", "d must be at least 10ns, got 5ns", func() { backoff.WithBreakerWindow(5) }),
		panicsOn("WithBreakerConsecutiveFailures", "n", "-1", "n must not be negative, got -1", func() { backoff.WithBreakerConsecutiveFailures(-1) }),
		panicsOn("WithBreakerProbes", "n", "0", "n must be at least 1, got 0", func() { backoff.WithBreakerProbes(0) }),
		panicsOn("WithBreakerProbes", "n", "-1", "n must be at least 1, got -1", func() { backoff.WithBreakerProbes(-1) }),
		panicsOn("WithBreakerOpenSchedule", "s", "Duration 0", "s.Duration must be positive, got 0s", func() {
			backoff.WithBreakerOpenSchedule(backoff.Schedule{Factor: 2})
		}),
		panicsOn("WithBreakerOpenSchedule", "s", "Duration -1s", "s.Duration must be positive, got -1s", func() {
			backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: -time.Second})
		}),
		panicsOn("WithBreakerOpenSchedule", "s", "Jitter 11", "s.Jitter must be at most 10, got 11", func() {
			backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: time.Second, Jitter: 11})
		}),
		panicsOn("WithBreakerOpenSchedule", "s", "Factor +Inf, no Cap", "s.Factor must be finite when s.Cap is not set, got +Inf", func() {
			backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: time.Second, Factor: inf})
		}),
		nilPanics("WithBreakerStateChange", "fn", func() { backoff.WithBreakerStateChange(nil) }),
		nilPanics("WithBreakerMetrics", "m", func() { backoff.WithBreakerMetrics(nil) }),
		panicsOn("WithBreakerMetrics", "m", "typed nil", "m must not be nil, got <nil>", func() { backoff.WithBreakerMetrics(nilBreakerMetrics) }),

		// httpretry.
		panicsOn("httpretry.NewTransport", "s", "Jitter 11", "s.Jitter must be at most 10, got 11", func() {
			httpretry.NewTransport(nil, backoff.Schedule{Duration: 1, Steps: 2, Jitter: 11})
		}),
		panicsOn("httpretry.NewTransport", "base", "typed nil", "base must be nil or a usable RoundTripper, got a nil *http.Transport", func() {
			httpretry.NewTransport((*http.Transport)(nil), s)
		}),
		accepts("httpretry.NewTransport", "base", "nil", func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
			defer srv.Close()
			tr := httpretry.NewTransport(nil, s)
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err, "http.DefaultTransport")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, "ok", string(body))
		}),
		panicsOn("httpretry.NewClient", "s", "Factor +Inf, no Cap", "s.Factor must be finite when s.Cap is not set, got +Inf", func() {
			httpretry.NewClient(backoff.Schedule{Duration: 1, Steps: 2, Factor: inf})
		}),
	}
	return rows
}

// nopQueueMetrics, nopBudgetMetrics and nopBreakerMetrics are pointer
// types whose nil, passed as an interface, is a typed nil.
type nopQueueMetrics struct{ backoff.QueueMetrics }
type nopBudgetMetrics struct{ backoff.RetryBudgetMetrics }
type nopBreakerMetrics struct{ backoff.BreakerMetrics }

// TestBadInputsBehaveAsDocumented walks the bad-input list: every row does
// what it says (the panic message, or the documented meaning of an accepted
// value); every parameter that the rule covers has its rows, for every
// constructor, option and helper of packages backoff and httpretry; and the
// values accepted by constructors and options, and the nil values accepted by
// helpers, are exactly the exceptions that the package doc's "Bad input"
// section and the README's bad-input paragraph name.
func TestBadInputsBehaveAsDocumented(t *testing.T) {
	t.Parallel() // self-contained: see TestMain
	rows := badInputs()
	have := map[string]bool{} // "fn param value"
	for _, r := range rows {
		have[r.fn+" "+r.param+" "+r.value] = true
		t.Run(r.fn+"/"+r.param+"="+r.value, func(t *testing.T) {
			if r.panics == "" {
				require.NotNil(t, r.accepted)
				r.accepted(t)
				return
			}
			pkg, fn := "backoff", r.fn
			if p, f, ok := strings.Cut(r.fn, "."); ok {
				pkg, fn = p, f
			}
			assert.PanicsWithValue(t, pkg+": "+fn+": "+r.panics, r.call)
		})
	}

	funcs := exportedFuncs(t, ".", "")
	for k, v := range exportedFuncs(t, "httpretry", "httpretry.") {
		funcs[k] = v
	}
	t.Run("every covered parameter has its rows", func(t *testing.T) {
		for fn, params := range funcs {
			constructor := isConstructor(fn)
			for _, p := range params {
				for _, value := range requiredBadValues(p.class, constructor) {
					assert.True(t, have[fn+" "+p.name+" "+value],
						"%s(%s %s): no row for the value %s", fn, p.name, p.typ, value)
				}
			}
		}
		for _, r := range rows {
			params, ok := funcs[r.fn]
			require.True(t, ok, "row for %s, which is not an exported function", r.fn)
			found := false
			for _, p := range params {
				found = found || p.name == r.param
			}
			assert.True(t, found, "row for %s(%s): no such parameter", r.fn, r.param)
			if r.panics != "" && r.param != "opts" && r.param != "s" {
				assert.True(t, strings.HasPrefix(r.panics, r.param), "%s: the message names the parameter %s: %q", r.fn, r.param, r.panics)
			}
		}
	})

	t.Run("the exceptions are the ones the docs name", func(t *testing.T) {
		exceptions := map[string]bool{}
		for _, r := range rows {
			if r.panics == "" && (isConstructor(r.fn) || r.value == "nil") {
				exceptions[r.fn] = true
			}
		}
		for doc, text := range map[string]string{
			`doc.go's "Bad input" section`:    docSection(t, "doc.go", "// # Bad input"),
			"README.md's bad-input paragraph": readmeParagraph(t, "README.md", "**Bad input, one rule:**"),
		} {
			for fn := range exceptions {
				assert.Regexp(t, `\b`+regexp.QuoteMeta(fn)+`\b`, text, "%s does not name the exception %s", doc, fn)
			}
			// The functions of the rule's exceptions sentence onwards are
			// all exceptions: no stale name.
			_, rest, ok := strings.Cut(text, "The exceptions")
			require.True(t, ok, "%s: no sentence on the exceptions", doc)
			rest, _, _ = strings.Cut(rest, "Values that arrive at call time")
			for _, name := range regexp.MustCompile(`(?:httpretry\.)?\b[A-Z]\w+\b`).FindAllString(rest, -1) {
				if _, isFunc := funcs[name]; isFunc {
					assert.True(t, exceptions[name], "%s names %s among the exceptions, which accepts no bad input", doc, name)
				}
			}
		}
	})
}

// param is a parameter of an exported function, classified by what the
// bad-input rule says of its type.
type param struct {
	name, typ string
	class     string // "nil", "duration", "float", "count", or "" (not covered)
}

// requiredBadValues are the values a parameter of the class must have a row
// for: the rule covers every value outside the domain of a constructor's or
// an option's parameter, and only nil functions, contexts, managers and
// queues of a helper (whose other values arrive at call time).
func requiredBadValues(class string, constructor bool) []string {
	switch {
	case class == "nil":
		return []string{"nil"}
	case !constructor:
		return nil
	case class == "duration":
		return []string{"-1s"}
	case class == "float":
		return []string{"NaN", "-1", "+Inf"}
	case class == "count":
		return []string{"-1"}
	}
	return nil
}

// isConstructor reports whether fn is a constructor or an option, whose
// every argument is checked, rather than a helper.
func isConstructor(fn string) bool {
	fn = strings.TrimPrefix(fn, "httpretry.")
	return strings.HasPrefix(fn, "New") || strings.HasPrefix(fn, "With") || strings.HasPrefix(fn, "Default")
}

// exportedFuncs returns the exported package-level functions of the package
// in dir, named with prefix, and their classified parameters.
func exportedFuncs(t *testing.T, dir, prefix string) map[string][]param {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var parsed []*ast.File
	interfaces := map[string]bool{"clock.WithDelayedExecution": true, "http.RoundTripper": true}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		parsed = append(parsed, f)
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if _, ok := ts.Type.(*ast.InterfaceType); ok {
					interfaces[ts.Name.Name] = true
				}
			}
			return true
		})
	}
	funcs := map[string][]param{}
	for _, f := range parsed {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() {
				continue
			}
			params := []param{}
			for _, field := range fd.Type.Params.List {
				typ := types.ExprString(field.Type)
				class := classify(field.Type, interfaces)
				for _, n := range field.Names {
					params = append(params, param{name: n.Name, typ: typ, class: class})
				}
			}
			funcs[prefix+fd.Name.Name] = params
		}
	}
	return funcs
}

// classify says what the bad-input rule covers of a parameter's type.
func classify(typ ast.Expr, interfaces map[string]bool) string {
	if e, ok := typ.(*ast.Ellipsis); ok {
		typ = e.Elt
		if types.ExprString(typ) == "Option" || types.ExprString(typ) == "backoff.Option" {
			return "" // options are checked where they are made
		}
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X // RateLimiter[T]
	}
	switch s := types.ExprString(typ); {
	case s == "time.Duration":
		return "duration"
	case s == "float64":
		return "float"
	case s == "int" || s == "JitterKind":
		return "count"
	case s == "context.Context" || interfaces[s] || strings.HasSuffix(s, "Func"):
		return "nil"
	case s == "*http.Request":
		return "" // net/http's value: no function of net/http checks it either
	}
	switch typ.(type) {
	case *ast.FuncType, *ast.StarExpr:
		return "nil"
	}
	return ""
}

// docSection returns the lines of the doc comment in file from the heading
// to the end of the comment.
func docSection(t *testing.T, file, heading string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(src), heading)
	require.True(t, ok, "%s: no %q", file, heading)
	var b strings.Builder
	for _, line := range strings.Split(rest, "\n")[1:] { // [0] ends the heading's line
		if !strings.HasPrefix(line, "//") {
			break
		}
		b.WriteString(strings.TrimPrefix(line, "//") + "\n")
	}
	return b.String()
}

// readmeParagraph returns the paragraph of file that starts with start.
func readmeParagraph(t *testing.T, file, start string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(src), start)
	require.True(t, ok, "%s: no %q", file, start)
	para, _, _ := strings.Cut(rest, "\n\n")
	return para
}

// TestEveryPanicGoesThroughValidate: validate.go is the one way the package
// panics on bad input, so that every message has one shape. Before, five
// panic calls (WithClock, WithMetrics, WithLogger, NewRateLimitingQueue,
// RunWorkers, and the Backoff's zero value) wrote messages of their own. An
// invariant check that reports a bug of the package says "internal error".
func TestEveryPanicGoesThroughValidate(t *testing.T) {
	t.Parallel() // self-contained: see TestMain
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "validate.go" {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" {
				arg := string(src[fset.Position(call.Pos()).Offset:fset.Position(call.End()).Offset])
				assert.Contains(t, arg, "internal error",
					"%s: bad input panics through validate.go's helpers", fset.Position(call.Pos()))
			}
			return true
		})
	}
}
