package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// TestRetryGivesUpBeforeADeadlineItCannotReach: 2 s left on ctx's deadline
// and a 30 s wait due. Retry returns at once, without starting the wait,
// with the attempt's own error inside a RetryError whose reason is the
// deadline; before, it slept the 2 s and returned only the context's error.
func TestRetryGivesUpBeforeADeadlineItCannotReach(t *testing.T) {
	fc := testclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	refused := errors.New("connection refused")
	calls := 0
	err := backoff.Retry(ctx, backoff.Schedule{Duration: 30 * time.Second, Steps: 5}, func(context.Context) error {
		calls++
		return refused
	}, backoff.WithClock(fc))
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts)
	assert.Same(t, refused, re.Last, "the real last error")
	assert.ErrorIs(t, err, backoff.ErrDeadlineWouldPass)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, calls)
	assert.False(t, fc.HasWaiters(), "no wait was started")
	assert.NoError(t, ctx.Err(), "it returned before the deadline")
}

// TestRetryWaitsWhileTheDeadlineLeavesRoom: waits that end before ctx's
// deadline are taken; the time left is read on the real clock, so a
// FakeClock's steps do not use it up.
func TestRetryWaitsWhileTheDeadlineLeavesRoom(t *testing.T) {
	fc := testclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	calls := 0
	err := backoff.Retry(ctx, backoff.Schedule{Duration: time.Minute, Steps: 3}, func(context.Context) error {
		calls++
		return errors.New("busy")
	}, backoff.WithClock(fc), backoff.WithNotify(func(_ int, _ error, next time.Duration) { fc.Step(next) }))
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted, "two 1-minute waits fit in an hour")
	assert.Equal(t, 3, calls)
}

// TestRetryWithMinAttemptTime: an attempt starts only with at least the
// minimum left before the deadline, the first one included.
func TestRetryWithMinAttemptTime(t *testing.T) {
	busy := errors.New("busy")
	run := func(deadline, minAttempt time.Duration) (int, error) {
		fc := testclock.NewFakeClock(time.Now())
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		calls := 0
		err := backoff.Retry(ctx, backoff.Schedule{Duration: time.Second, Steps: 3}, func(context.Context) error {
			calls++
			return busy
		}, backoff.WithClock(fc), backoff.WithMinAttemptTime(minAttempt),
			backoff.WithNotify(func(_ int, _ error, next time.Duration) { fc.Step(next) }))
		return calls, err
	}
	calls, err := run(time.Hour, 10*time.Minute)
	assert.Equal(t, 3, calls, "an hour leaves room for every attempt")
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)

	calls, err = run(time.Hour, 2*time.Hour)
	assert.Equal(t, 0, calls, "no first attempt with less than the minimum left")
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 0, re.Attempts)
	assert.NoError(t, re.Last)
	assert.ErrorIs(t, err, backoff.ErrDeadlineWouldPass)

	// 1 s wait + 1 h minimum ≥ the ~1 h left: the second attempt is not started.
	calls, err = run(time.Hour+500*time.Millisecond, time.Hour)
	assert.Equal(t, 1, calls)
	assert.ErrorIs(t, err, busy)
	assert.ErrorIs(t, err, backoff.ErrDeadlineWouldPass)
}

// TestRetryWithAttemptTimeout: an attempt that hangs is ended by its own
// timeout, on the injected clock, and retried. On a FakeClock its context
// reports no deadline of its own (real I/O code would read a fake instant as
// a real one); it keeps the caller's.
func TestRetryWithAttemptTimeout(t *testing.T) {
	fc := testclock.NewFakeClock(time.Now())
	start := fc.Now()
	callerDeadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), callerDeadline)
	defer cancel()
	var ends []time.Time
	var errs []error
	err := backoff.Retry(ctx, backoff.Schedule{Duration: time.Second, Steps: 3}, func(actx context.Context) error {
		d, ok := actx.Deadline()
		assert.True(t, ok)
		assert.Equal(t, callerDeadline, d, "the caller's deadline, not a fake instant")
		if len(errs) == 2 {
			return nil
		}
		// The attempt hangs for 10 s of the fake clock: the timeout ends
		// its context (the timer's callback runs inside Step), not 1 ns
		// before.
		fc.Step(10*time.Second - 1)
		assert.NoError(t, actx.Err())
		fc.Step(1)
		<-actx.Done()
		ends = append(ends, fc.Now())
		errs = append(errs, actx.Err())
		return actx.Err()
	}, backoff.WithClock(fc), backoff.WithAttemptTimeout(10*time.Second),
		backoff.WithNotify(func(_ int, _ error, next time.Duration) { fc.Step(next) }))
	require.NoError(t, err, "timed-out attempts are retried")
	assert.Equal(t, []error{context.DeadlineExceeded, context.DeadlineExceeded}, errs)
	assert.Equal(t, []time.Time{start.Add(10 * time.Second), start.Add(21 * time.Second)}, ends,
		"each attempt ends 10 s after it starts, on the fake clock")
	assert.False(t, fc.HasWaiters(), "the last attempt's timer is stopped")
}

// TestRetryAttemptEndedByTheCallerIsNotRetried: with an attempt timeout,
// an attempt that ends because ctx ended is not retried.
func TestRetryAttemptEndedByTheCallerIsNotRetried(t *testing.T) {
	fc := testclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := backoff.Retry(ctx, backoff.Schedule{Duration: time.Second, Steps: 3}, func(ctx context.Context) error {
		calls++
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}, backoff.WithClock(fc), backoff.WithAttemptTimeout(time.Minute))
	assert.Equal(t, 1, calls)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, fc.HasWaiters())
}

// TestRetryBudgetSinceFirstFailure: a first attempt that runs for an hour
// before it fails leaves WithMaxElapsedTime's one-minute budget spent, but
// not WithMaxElapsedTimeSinceFirstFailure's, which starts at the failure.
func TestRetryBudgetSinceFirstFailure(t *testing.T) {
	run := func(budget backoff.Option) (int, error) {
		fc := testclock.NewFakeClock(time.Now())
		calls := 0
		err := backoff.Retry(context.Background(), backoff.Schedule{Duration: 20 * time.Second, Steps: 10}, func(context.Context) error {
			calls++
			if calls == 1 {
				fc.Step(time.Hour) // a stream that ran for an hour, then broke
			}
			return errors.New("stream broken")
		}, backoff.WithClock(fc), budget, backoff.WithNotify(func(_ int, _ error, next time.Duration) { fc.Step(next) }))
		return calls, err
	}
	calls, err := run(backoff.WithMaxElapsedTime(time.Minute))
	assert.Equal(t, 1, calls, "an hour after the call, the budget is spent")
	assert.ErrorIs(t, err, backoff.ErrMaxElapsedTime)

	calls, err = run(backoff.WithMaxElapsedTimeSinceFirstFailure(time.Minute))
	assert.Equal(t, 4, calls, "retries at 20, 40 and 60 s after the failure")
	assert.ErrorIs(t, err, backoff.ErrMaxElapsedTime)

	_, err = run(backoff.WithMaxElapsedTimeSinceFirstFailure(0))
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted, "0 means no budget")
}
