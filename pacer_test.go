package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
)

// noWait is a schedule whose retries follow at once.
var noWait = backoff.Schedule{Steps: 4, Duration: time.Nanosecond}

// TestRetryWithAdaptiveLimiter: each attempt holds a permit while it runs,
// an overload signal lowers the limit, and the permits all come back.
func TestRetryWithAdaptiveLimiter(t *testing.T) {
	fc := backofftest.NewAutoStepClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(fc), backoff.WithInitialLimit(10))
	calls := 0
	err := backoff.Retry(context.Background(), noWait, func(context.Context) error {
		calls++
		assert.Equal(t, 1, l.Inflight(), "the attempt holds a permit")
		if calls == 1 {
			return fmt.Errorf("%w: 503", backoff.ErrOverloaded)
		}
		return nil
	}, backoff.WithClock(fc), backoff.WithPacer(l))
	require.NoError(t, err)
	assert.Equal(t, 2, calls)
	assert.Less(t, l.Limit(), 10, "the overload signal lowered the limit")
	assert.Zero(t, l.Inflight())
}

// TestRetryWithAdaptiveLimiterWaitsForAPermit: with the limit taken, the
// attempt waits; a context that ends meanwhile ends Retry before fn runs.
func TestRetryWithAdaptiveLimiterWaitsForAPermit(t *testing.T) {
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(newQueueClock()), backoff.WithInitialLimit(1), backoff.WithMinLimit(1), backoff.WithMaxLimit(1))
	held, ok := l.TryAcquire()
	require.True(t, ok)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := backoff.Retry(ctx, noWait, func(context.Context) error { called = true; return nil }, backoff.WithPacer(l))
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Zero(t, re.Attempts)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, called)
	held.Release()
	assert.Zero(t, l.Inflight())
}

// TestRetryWithAdaptiveLimiterPanicFreesThePermit: a panic in fn ends the
// permit before it propagates.
func TestRetryWithAdaptiveLimiterPanicFreesThePermit(t *testing.T) {
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(newQueueClock()))
	assert.Panics(t, func() {
		_ = backoff.Retry(context.Background(), noWait, func(context.Context) error { panic("boom") }, backoff.WithPacer(l))
	})
	assert.Zero(t, l.Inflight())
}

// TestRetryWithAdaptiveRate: a Retry-After answer throttles the rate, and
// the next attempt waits until the Retry-After has passed.
func TestRetryWithAdaptiveRate(t *testing.T) {
	fc := backofftest.NewAutoStepClock(epoch) // a wait on a timer takes no time
	r := backoff.NewAdaptiveRate(backoff.WithClock(fc))
	var at []time.Duration
	err := backoff.Retry(context.Background(), noWait, func(context.Context) error {
		at = append(at, fc.Since(epoch))
		if len(at) == 1 {
			return backoff.RetryAfter(2*time.Second, errors.New("429"))
		}
		return nil
	}, backoff.WithClock(fc), backoff.WithPacer(r), backoff.WithMaxRetryAfter(time.Nanosecond))
	require.NoError(t, err)
	// Retry's own wait for the hint is bounded to 1 ns: the 2 s are the
	// rate's hold.
	assert.Equal(t, []time.Duration{0, 2 * time.Second}, at)
	assert.Less(t, r.Rate(), float64(backoff.DefaultInitialRate), "the throttling answer cut the rate")
}

// TestRetryWithThrottler: an attempt the throttler rejects fails with
// ErrThrottled without calling fn; overload answers count as refusals.
func TestRetryWithThrottler(t *testing.T) {
	fc := newQueueClock()
	th := backoff.NewThrottler(1, time.Minute, backoff.WithClock(fc))
	overloaded := fmt.Errorf("%w: 503", backoff.ErrOverloaded)
	calls := 0
	for range 50 {
		_ = backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(context.Context) error {
			calls++
			return overloaded
		}, backoff.WithPacer(th))
	}
	assert.Less(t, calls, 50, "the throttler rejected some attempts locally")
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 20, Duration: time.Nanosecond}, func(context.Context) error {
		return overloaded
	}, backoff.WithPacer(th))
	assert.ErrorIs(t, err, backoff.ErrThrottled, "the last attempts were rejected locally")
}

// TestRetryWithLimiter: a static limiter spaces the attempts.
func TestRetryWithLimiter(t *testing.T) {
	fc := backofftest.NewAutoStepClock(epoch)
	l := backoff.NewLimiter(1, 1, backoff.WithClock(fc)) // one per second
	var at []time.Duration
	err := backoff.Retry(context.Background(), noWait, func(context.Context) error {
		at = append(at, fc.Since(epoch))
		if len(at) < 3 {
			return errors.New("again")
		}
		return nil
	}, backoff.WithClock(fc), backoff.WithPacer(l))
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, at)
}

func TestWithPacerPanicsOnNil(t *testing.T) {
	assert.PanicsWithValue(t, "backoff: WithPacer: p must not be nil, got <nil>", func() { backoff.WithPacer(nil) })
	var l *backoff.AdaptiveLimiter
	assert.Panics(t, func() { backoff.WithPacer(l) }, "a typed nil")
}

// TestRetryWithPacerAllocatesNothing: a paced Retry allocates nothing per
// call, whichever pacer.
func TestRetryWithPacerAllocatesNothing(t *testing.T) {
	fc := newQueueClock()
	pacers := map[string]backoff.Pacer{
		"AdaptiveLimiter": backoff.NewAdaptiveLimiter(backoff.WithClock(fc)),
		"AdaptiveRate":    backoff.NewAdaptiveRate(backoff.WithClock(fc), backoff.WithInitialRate(backoff.InfLimit)),
		"Throttler":       backoff.NewThrottler(2, time.Minute, backoff.WithClock(fc)),
		"Limiter":         backoff.NewLimiter(math.Inf(1), 1, backoff.WithClock(fc)),
	}
	for name, p := range pacers {
		opts := []backoff.Option{backoff.WithClock(fc), backoff.WithPacer(p)}
		ctx := context.Background()
		fn := func(context.Context) error { return nil }
		allocs := testing.AllocsPerRun(200, func() { _ = backoff.Retry(ctx, noWait, fn, opts...) })
		assert.Zero(t, allocs, name)
	}
}

// TestRunWorkersFollowsAnAdaptiveLimiter: with 8 workers and a limit of 2,
// at most 2 items are processed at once; overload errors lower the limit,
// and every permit comes back.
func TestRunWorkersFollowsAnAdaptiveLimiter(t *testing.T) {
	fc := newQueueClock()
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(fc), backoff.WithInitialLimit(2), backoff.WithMaxLimit(2))
	q := backoff.NewRateLimitingQueue[int](newQLimiter[int](func(int) time.Duration { return 0 }), backoff.WithClock(fc),
		backoff.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	const items = 40
	for i := range items {
		q.Add(i)
	}
	var inflight, most, handled atomic.Int64
	var failed sync.Map
	ctx, cancel := context.WithCancel(context.Background())
	handle := func(_ context.Context, x int) (backoff.Result, error) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		storeMax(&most, n)
		if _, again := failed.LoadOrStore(x, true); !again && x%4 == 0 {
			return backoff.Result{}, fmt.Errorf("%w: shed", backoff.ErrOverloaded)
		}
		if handled.Add(1) == items {
			cancel()
		}
		return backoff.Result{}, nil
	}
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(ctx, q, 8, handle, backoff.WithPacer(l))
		close(done)
	}()
	waitFor(t, "RunWorkers", done, fc)
	assert.LessOrEqual(t, most.Load(), int64(2), "the limit bounds the items in process")
	assert.Equal(t, int64(items), handled.Load())
	assert.Zero(t, l.Inflight())
}

// TestRunWorkersThrottlerRejectsWithoutHandling: an item the throttler
// rejects fails with ErrThrottled, is logged, and never reaches handle.
func TestRunWorkersThrottlerRejectsWithoutHandling(t *testing.T) {
	fc := newQueueClock()
	th := backoff.NewThrottler(1, time.Hour, backoff.WithClock(fc))
	for range 100 { // a history of refusals: most calls are rejected
		if th.Allow() {
			th.Record(false)
		}
	}
	var logs syncBuffer
	q := backoff.NewRateLimitingQueue[string](newQLimiter[string](func(int) time.Duration { return time.Hour }), backoff.WithClock(fc),
		backoff.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	const items = 20
	for i := range items {
		q.Add(fmt.Sprint("item", i))
	}
	var handled atomic.Int64
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(context.Background(), q, 1, func(context.Context, string) (backoff.Result, error) {
			handled.Add(1)
			return backoff.Result{}, nil
		}, backoff.WithPacer(th))
		close(done)
	}()
	waitForCall(t, "the queue to drain", q.ShutDownWithDrain, fc)
	waitFor(t, "RunWorkers", done, fc)
	rejected := strings.Count(logs.String(), `error="backoff: throttled locally"`)
	assert.Positive(t, rejected, "some items were rejected locally")
	assert.Equal(t, items, rejected+int(handled.Load()), "every item was handled or rejected, once")
}

// TestPacerOutcomes: what an attempt's error tells each pacer.
// TestPacerCallerGivingUpIsNeutral: an attempt cut short by its caller's
// own deadline fails with a timeout, or an overload answer that arrives as
// the caller gives up; neither says anything about the downstream, since the
// caller's context ended. An AdaptiveLimiter keeps its limit and an
// AdaptiveRate its rate.
func TestPacerCallerGivingUpIsNeutral(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded)},
		{"overloaded", fmt.Errorf("shed: %w", backoff.ErrOverloaded)},
		{"retry-after", backoff.RetryAfter(time.Second, errors.New("429"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The caller's deadline passes during the attempt: its context
			// ends with DeadlineExceeded as the cause.
			attempt := func(end context.CancelCauseFunc) func(context.Context) error {
				return func(context.Context) error {
					end(context.DeadlineExceeded)
					return tc.err
				}
			}

			l := backoff.NewAdaptiveLimiter(backoff.WithClock(newQueueClock()))
			ctx, end := context.WithCancelCause(context.Background())
			_ = backoff.Retry(ctx, noWait, attempt(end), backoff.WithPacer(l))
			assert.Equal(t, backoff.DefaultInitialLimit, l.Limit(), "the caller gave up: the limit must not fall")
			assert.Zero(t, l.Inflight())

			r := backoff.NewAdaptiveRate(backoff.WithClock(newQueueClock()))
			ctx, end = context.WithCancelCause(context.Background())
			_ = backoff.Retry(ctx, noWait, attempt(end), backoff.WithPacer(r))
			assert.Equal(t, float64(backoff.DefaultInitialRate), r.Rate(), "the caller gave up: the rate must not be cut")
		})
	}
}

func TestPacerOutcomes(t *testing.T) {
	timeout := &net.OpError{Op: "dial", Err: context.DeadlineExceeded}
	for _, tc := range []struct {
		name    string
		err     error
		dropped bool // an AdaptiveLimiter's limit falls, and a Throttler records no acceptance
	}{
		{"success", nil, false},
		{"permanent", backoff.Permanent(errors.New("404")), false},
		{"overloaded", fmt.Errorf("shed: %w", backoff.ErrOverloaded), true},
		{"retry-after", backoff.RetryAfter(time.Second, errors.New("429")), true},
		{"retry-after 0", backoff.RetryAfter(0, errors.New("429")), true},
		{"network", timeout, true},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), true},
		{"joined", errors.Join(errors.New("a"), backoff.ErrOverloaded), true},
		{"plain", errors.New("bad request"), false},
		// Permanent stops the retries; the signal in its chain still counts.
		{"permanent overloaded", backoff.Permanent(fmt.Errorf("shed: %w", backoff.ErrOverloaded)), true},
		{"permanent timeout", backoff.Permanent(timeout), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := backoff.NewAdaptiveLimiter(backoff.WithClock(newQueueClock()), backoff.WithInitialLimit(10))
			_ = backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(context.Context) error { return tc.err }, backoff.WithPacer(l))
			assert.Equal(t, tc.dropped, l.Limit() < 10, "limit %d", l.Limit())
			assert.Zero(t, l.Inflight())

			// A Throttler records every outcome but an overload signal, a
			// timeout or a network error as accepted: with k = 1, attempts
			// that are all accepted are never rejected, and attempts that
			// are not soon are.
			th := backoff.NewThrottler(1, time.Minute, backoff.WithClock(newQueueClock()))
			for range 50 {
				_ = backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(context.Context) error { return tc.err }, backoff.WithPacer(th))
			}
			assert.Equal(t, tc.dropped, th.Rejected() > 0, "rejected %d of 50", th.Rejected())
		})
	}
}
