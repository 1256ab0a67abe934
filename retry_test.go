package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"io"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
	"math"
	"testing"
	"time"
)

var errFlaky = errors.New("flaky")

// retryRun is one Retry call on a handshake clock: when fn was called, and
// what Retry returned.
type retryRun struct {
	at  []time.Duration
	err error
}

// runRetry calls Retry with fn's results scripted by results (fn returns
// results[i] on call i, and errFlaky after the script ends), driving the fake
// clock from one armed wait to the next.
func runRetry(t *testing.T, ctx context.Context, s backoff.Schedule, results []error, opts ...backoff.Option) retryRun {
	t.Helper()
	hc := newHandshakeClock()
	var r retryRun
	done := wtGo(func() {
		r.err = backoff.Retry(ctx, s, func(context.Context) error {
			r.at = append(r.at, hc.elapsed())
			if i := len(r.at) - 1; i < len(results) {
				return results[i]
			}
			return errFlaky
		}, append([]backoff.Option{backoff.WithClock(hc)}, opts...)...)
	})
	hc.drive(t, done)
	return r
}

// TestRetryCallsAtTheScheduledTimes is the schedule of the issue: a FakeClock
// stepped 1ms at a time, fn always failing, {10ms, ×2, Steps 5}.
func TestRetryCallsAtTheScheduledTimes(t *testing.T) {
	hc := newHandshakeClock()
	var at []time.Duration
	var err error
	done := wtGo(func() {
		err = backoff.Retry(context.Background(), backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5},
			func(context.Context) error {
				at = append(at, hc.elapsed())
				return errFlaky
			}, backoff.WithClock(hc))
	})
	for {
		select {
		case <-hc.armed:
			hc.stepUntilFired(t, time.Millisecond, 1000)
			continue
		case <-done:
		}
		break
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{0, 10 * ms, 30 * ms, 70 * ms, 150 * ms}, at)

	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 5, re.Attempts)
	assert.ErrorIs(t, err, errFlaky, "errors.Is reaches the last error")
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	assert.Equal(t, "backoff: retry stopped after 5 attempts: attempts exhausted; last error: flaky", err.Error())
}

func TestRetryOutcomes(t *testing.T) {
	ms := time.Millisecond
	s := backoff.Schedule{Duration: 10 * ms, Factor: 2, Steps: 5}
	perm := backoff.Permanent(io.ErrUnexpectedEOF)
	tests := []struct {
		name     string
		schedule backoff.Schedule
		results  []error
		opts     []backoff.Option
		wantAt   []time.Duration
		check    func(t *testing.T, err error)
	}{
		{"success on the third attempt", s, []error{errFlaky, errFlaky, nil}, nil,
			[]time.Duration{0, 10 * ms, 30 * ms},
			func(t *testing.T, err error) { assert.NoError(t, err) }},
		{"a permanent error stops at once, returned as is", s, []error{errFlaky, perm}, nil,
			[]time.Duration{0, 10 * ms},
			func(t *testing.T, err error) {
				assert.Same(t, perm, err)
				assert.True(t, backoff.IsPermanent(err))
			}},
		{"a wrapped permanent error stops too", s, []error{fmt.Errorf("op: %w", perm)}, nil,
			[]time.Duration{0},
			func(t *testing.T, err error) { assert.ErrorIs(t, err, io.ErrUnexpectedEOF) }},
		{"a permanent error in a join stops too", s, []error{errors.Join(errFlaky, perm)}, nil,
			[]time.Duration{0},
			func(t *testing.T, err error) { assert.True(t, backoff.IsPermanent(err)) }},
		{"a permanent error stops whatever WithRetryable says", s, []error{errFlaky, perm},
			[]backoff.Option{backoff.WithRetryable(func(error) bool { return true })},
			[]time.Duration{0, 10 * ms},
			func(t *testing.T, err error) { assert.Same(t, perm, err) }},
		{"a non-retryable error stops at once, returned as is", s, []error{errFlaky, io.EOF},
			[]backoff.Option{backoff.WithRetryable(func(err error) bool { return err == errFlaky })},
			[]time.Duration{0, 10 * ms},
			func(t *testing.T, err error) { assert.Equal(t, io.EOF, err) }},
		{"one attempt", backoff.Schedule{Duration: time.Second, Steps: 1}, nil, nil,
			[]time.Duration{0},
			func(t *testing.T, err error) {
				assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
				assert.Equal(t, "backoff: retry stopped after 1 attempt: attempts exhausted; last error: flaky", err.Error())
			}},
		{"factor ≤ 1 is constant", backoff.Schedule{Duration: 10 * ms, Factor: 0.5, Steps: 4}, nil, nil,
			[]time.Duration{0, 10 * ms, 20 * ms, 30 * ms},
			func(t *testing.T, err error) { assert.ErrorIs(t, err, errFlaky) }},
		// Unlike ExponentialBackoff (kubernetes#131122), reaching the cap
		// does not end the retries.
		{"the cap does not end the retries", backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 6, Cap: 3 * time.Second}, nil, nil,
			[]time.Duration{0, 1 * time.Second, 3 * time.Second, 6 * time.Second, 9 * time.Second, 12 * time.Second},
			func(t *testing.T, err error) { assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted) }},
		{"zero waits", backoff.Schedule{Steps: 3}, nil, nil,
			[]time.Duration{0, 0, 0},
			func(t *testing.T, err error) { assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted) }},
		// Steps: math.MaxInt is how to retry at once, without a bound, what
		// the zero Schedule does not do.
		{"zero waits, no practical bound", backoff.Schedule{Steps: math.MaxInt},
			append(make([]error, 0, 21), errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, errFlaky,
				errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, errFlaky,
				errFlaky, errFlaky, errFlaky, nil), nil,
			make([]time.Duration, 21),
			func(t *testing.T, err error) { assert.NoError(t, err) }},
		{"unlimited attempts until a permanent error", backoff.Schedule{Duration: ms, Steps: 0},
			[]error{errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, backoff.Permanent(io.EOF)}, nil,
			[]time.Duration{0, 1 * ms, 2 * ms, 3 * ms, 4 * ms, 5 * ms, 6 * ms},
			func(t *testing.T, err error) { assert.ErrorIs(t, err, io.EOF) }},
		{"the elapsed-time budget", s, nil, []backoff.Option{backoff.WithMaxElapsedTime(100 * ms)},
			[]time.Duration{0, 10 * ms, 30 * ms, 70 * ms}, // the next, at 150ms, is past the budget
			func(t *testing.T, err error) {
				assert.ErrorIs(t, err, backoff.ErrMaxElapsedTime)
				assert.ErrorIs(t, err, errFlaky)
				var re *backoff.RetryError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, 4, re.Attempts)
			}},
		{"a budget that fits exactly", s, nil, []backoff.Option{backoff.WithMaxElapsedTime(150 * ms)},
			[]time.Duration{0, 10 * ms, 30 * ms, 70 * ms, 150 * ms},
			func(t *testing.T, err error) { assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runRetry(t, context.Background(), tt.schedule, tt.results, tt.opts...)
			assert.Equal(t, tt.wantAt, r.at)
			tt.check(t, r.err)
		})
	}
}

func TestRetryAfterHints(t *testing.T) {
	ms := time.Millisecond
	s := backoff.Schedule{Duration: 10 * ms, Factor: 2, Steps: 4}
	tests := []struct {
		name   string
		hinted error
		opts   []backoff.Option
		wantAt []time.Duration
	}{
		{"a hint replaces one wait; the schedule advances", backoff.RetryAfter(time.Second, errFlaky), nil,
			[]time.Duration{0, 1000 * ms, 1020 * ms, 1060 * ms}},
		{"a wrapped hint", fmt.Errorf("get: %w", backoff.RetryAfter(time.Second, errFlaky)), nil,
			[]time.Duration{0, 1000 * ms, 1020 * ms, 1060 * ms}},
		{"a hint in a join", errors.Join(io.EOF, backoff.RetryAfter(time.Second, errFlaky)), nil,
			[]time.Duration{0, 1000 * ms, 1020 * ms, 1060 * ms}},
		// A hint ≤ 0 is no hint: the schedule's wait, not an immediate retry
		// (a parser's 0 for a missing header used to make Retry spin).
		{"a negative hint is no hint", backoff.RetryAfter(-time.Hour, errFlaky), nil,
			[]time.Duration{0, 10 * ms, 30 * ms, 70 * ms}},
		{"a zero hint is no hint", backoff.RetryAfter(0, errFlaky), nil,
			[]time.Duration{0, 10 * ms, 30 * ms, 70 * ms}},
		{"a zero hint lets a later one in the chain through",
			errors.Join(backoff.RetryAfter(0, io.EOF), backoff.RetryAfter(time.Second, errFlaky)), nil,
			[]time.Duration{0, 1000 * ms, 1020 * ms, 1060 * ms}},
		{"a huge hint waits DefaultMaxRetryAfter", backoff.RetryAfter(24*time.Hour, errFlaky), nil,
			[]time.Duration{0, backoff.DefaultMaxRetryAfter, backoff.DefaultMaxRetryAfter + 20*ms, backoff.DefaultMaxRetryAfter + 60*ms}},
		{"WithMaxRetryAfter bounds hints", backoff.RetryAfter(time.Hour, errFlaky),
			[]backoff.Option{backoff.WithMaxRetryAfter(2 * time.Second)},
			[]time.Duration{0, 2000 * ms, 2020 * ms, 2060 * ms}},
		{"WithMaxRetryAfter(0) ignores hints", backoff.RetryAfter(time.Hour, errFlaky),
			[]backoff.Option{backoff.WithMaxRetryAfter(0)},
			[]time.Duration{0, 10 * ms, 30 * ms, 70 * ms}},
		{"a hint from an error type of one's own", hintError{time.Second}, nil,
			[]time.Duration{0, 1000 * ms, 1020 * ms, 1060 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runRetry(t, context.Background(), s, []error{tt.hinted}, tt.opts...)
			assert.Equal(t, tt.wantAt, r.at)
			assert.ErrorIs(t, r.err, backoff.ErrAttemptsExhausted)
		})
	}
}

// hintError is an error type of a user's own that carries a Retry-After
// hint by having the method Retry looks for.
type hintError struct{ d time.Duration }

func (e hintError) Error() string             { return "slow down" }
func (e hintError) RetryAfter() time.Duration { return e.d }

func TestRetryAfter(t *testing.T) {
	assert.NoError(t, backoff.RetryAfter(time.Second, nil))
	err := backoff.RetryAfter(3*time.Second, io.EOF)
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, io.EOF.Error(), err.Error())
	var ra *backoff.RetryAfterError
	require.ErrorAs(t, fmt.Errorf("wrapped: %w", err), &ra)
	assert.Equal(t, 3*time.Second, ra.Delay)
	assert.Equal(t, 3*time.Second, ra.RetryAfter())
	assert.Equal(t, io.EOF, ra.Unwrap())
}

// TestRetryGivingUpAfterAHintReturnsTheHintedError: when the attempts run
// out on an error that carried a Retry-After hint, the *RetryError's last
// error is the one given to RetryAfter, message included
// (cenkalti/backoff v5's hint carried no error, and was all Retry returned).
func TestRetryGivingUpAfterAHintReturnsTheHintedError(t *testing.T) {
	errThrottled := errors.New("429 Too Many Requests")
	r := runRetry(t, context.Background(), backoff.Schedule{Duration: time.Millisecond, Steps: 2},
		[]error{backoff.RetryAfter(time.Second, errThrottled), backoff.RetryAfter(time.Second, errThrottled)})
	assert.Equal(t, []time.Duration{0, time.Second}, r.at)
	assert.ErrorIs(t, r.err, errThrottled)
	assert.EqualError(t, r.err, "backoff: retry stopped after 2 attempts: attempts exhausted; last error: 429 Too Many Requests")
}

func TestRetryEndsWithTheContext(t *testing.T) {
	t.Run("done on entry: fn never runs", func(t *testing.T) {
		err := backoff.Retry(wtCanceled(), backoff.Schedule{Steps: 3}, func(context.Context) error {
			t.Error("fn ran although ctx was done")
			return nil
		}, backoff.WithClock(newHandshakeClock()))
		var re *backoff.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 0, re.Attempts)
		assert.Nil(t, re.Last)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, "backoff: retry stopped after 0 attempts: context canceled", err.Error())
	})
	t.Run("cancelled during a wait", func(t *testing.T) {
		hc := newHandshakeClock()
		ctx, cancel := context.WithCancelCause(context.Background())
		errShutdown := errors.New("shutting down")
		calls := 0
		var err error
		done := wtGo(func() {
			err = backoff.Retry(ctx, backoff.Schedule{Duration: time.Second, Steps: 10}, func(context.Context) error {
				calls++
				return errFlaky
			}, backoff.WithClock(hc))
		})
		hc.Step(hc.nextArmed(t, done))
		hc.nextArmed(t, done)
		cancel(errShutdown)
		waitFor(t, "Retry to return on cancel, with no clock step", done, hc) // promptly: no step needed
		assert.Equal(t, 2, calls)
		assert.ErrorIs(t, err, context.Canceled, "matches the context's error")
		assert.ErrorIs(t, err, errFlaky, "and the last error of fn")
		assert.ErrorIs(t, err, errShutdown, "and the context's cause")
		assert.Equal(t, "backoff: retry stopped after 2 attempts: context canceled (shutting down); last error: flaky", err.Error())
	})
	t.Run("an attempt that fails as ctx ends", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		err := backoff.Retry(ctx, backoff.Schedule{Duration: time.Second, Steps: 10}, func(context.Context) error {
			cancel()
			return errFlaky
		}, backoff.WithClock(newHandshakeClock()))
		var re *backoff.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 1, re.Attempts)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, errFlaky)
	})
	t.Run("an attempt that succeeds as ctx ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		err := backoff.Retry(ctx, backoff.Schedule{Steps: 10}, func(context.Context) error {
			cancel()
			return nil
		}, backoff.WithClock(newHandshakeClock()))
		assert.NoError(t, err)
	})
}

func TestRetryNotify(t *testing.T) {
	type note struct {
		attempt int
		err     error
		next    time.Duration
	}
	var notes []note
	r := runRetry(t, context.Background(), backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 3, Steps: 3},
		[]error{io.EOF, errFlaky},
		backoff.WithNotify(func(attempt int, err error, next time.Duration) { notes = append(notes, note{attempt, err, next}) }))
	assert.Equal(t, []note{{1, io.EOF, 10 * time.Millisecond}, {2, errFlaky, 30 * time.Millisecond}}, notes,
		"not called for the attempt Retry gives up after")
	assert.ErrorIs(t, r.err, backoff.ErrAttemptsExhausted)
}

// TestRetryNotifyCanStepTheClock relies on the documented order: the timer
// is set before notify runs, so stepping a FakeClock from notify fires it.
func TestRetryNotifyCanStepTheClock(t *testing.T) {
	hc := newHandshakeClock()
	var at []time.Duration
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5},
		func(context.Context) error { at = append(at, hc.elapsed()); return errFlaky },
		backoff.WithClock(hc),
		backoff.WithNotify(func(_ int, _ error, next time.Duration) { hc.Step(next) }))
	assert.ErrorIs(t, err, errFlaky)
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{0, 10 * ms, 30 * ms, 70 * ms, 150 * ms}, at)
}

func TestRetryJitterKinds(t *testing.T) {
	ms := time.Millisecond
	s := backoff.Schedule{Duration: 10 * ms, Factor: 2, Jitter: 0.5, Steps: 8, Cap: 200 * ms}
	bases := []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 200 * ms, 200 * ms}
	tests := []struct {
		kind backoff.JitterKind
		ok   func(i int, d, prev time.Duration) bool
	}{
		{backoff.ProportionalJitter, func(i int, d, _ time.Duration) bool { return d >= bases[i] && d < bases[i]+bases[i]/2 }},
		{backoff.FullJitter, func(i int, d, _ time.Duration) bool { return d >= 0 && d < bases[i] }},
		{backoff.EqualJitter, func(i int, d, _ time.Duration) bool { return d >= bases[i]/2 && d <= bases[i] }},
		{backoff.DecorrelatedJitter, func(_ int, d, prev time.Duration) bool {
			return d >= 10*ms && d <= min(max(2*prev, 10*ms), 200*ms)
		}},
		{backoff.SymmetricJitter, func(i int, d, _ time.Duration) bool { return d >= bases[i]/2 && d < bases[i]+bases[i]/2 }},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for run := 0; run < 20; run++ {
				hc := newHandshakeClock()
				prev := 10 * ms
				i := 0
				_ = backoff.Retry(context.Background(), s, func(context.Context) error { return errFlaky },
					backoff.WithClock(hc), backoff.WithJitterKind(tt.kind),
					backoff.WithNotify(func(_ int, _ error, next time.Duration) {
						assert.True(t, tt.ok(i, next, prev), "wait %d: %v (previous %v)", i, next, prev)
						seen[next] = true
						prev = next
						i++
						hc.Step(next)
					}))
				assert.Equal(t, len(bases), i)
			}
			assert.Greater(t, len(seen), 20, "the waits should vary")
		})
	}
}

// symmetricWaits returns the waits Retry announces for n retries of a
// constant schedule of 100ms under SymmetricJitter with the given Jitter.
func symmetricWaits(t *testing.T, jitter float64, n int) []time.Duration {
	t.Helper()
	fc := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	waits := make([]time.Duration, 0, n)
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: 100 * time.Millisecond, Jitter: jitter, Steps: n + 1},
		func(context.Context) error { return errFlaky },
		backoff.WithClock(fc), backoff.WithJitterKind(backoff.SymmetricJitter),
		backoff.WithNotify(func(_ int, _ error, next time.Duration) { waits = append(waits, next); fc.Step(next) }))
	require.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	require.Len(t, waits, n)
	return waits
}

// TestRetrySymmetricJitterCentresOnTheSchedule: SymmetricJitter spreads the
// waits on both sides of the schedule's, as cenkalti/backoff's
// RandomizationFactor does (ProportionalJitter only lengthens them), so that
// they average the schedule's; a Jitter above 1 counts as 1, and ≤ 0 or NaN
// is none.
func TestRetrySymmetricJitterCentresOnTheSchedule(t *testing.T) {
	ms := time.Millisecond
	const n = 2000
	waits := symmetricWaits(t, 0.5, n)
	var sum time.Duration
	below, above := 0, 0
	for _, d := range waits {
		require.True(t, d >= 50*ms && d < 150*ms, "wait %v outside [50ms, 150ms)", d)
		sum += d
		if d < 100*ms {
			below++
		} else {
			above++
		}
	}
	// The mean of n uniform draws on [50ms, 150ms) has a standard deviation
	// of 0.65ms: ±5ms is more than 7 of them.
	assert.InDelta(t, float64(100*ms), float64(sum/n), float64(5*ms), "the waits average the schedule's")
	assert.Greater(t, below, n/3, "waits shorter than the schedule's")
	assert.Greater(t, above, n/3, "waits longer than the schedule's")

	for _, d := range symmetricWaits(t, 3, 200) {
		require.True(t, d >= 0 && d < 200*ms, "Jitter 3 counts as 1: wait %v outside [0, 200ms)", d)
	}
	for _, j := range []float64{0, -1, math.NaN()} {
		for _, d := range symmetricWaits(t, j, 5) {
			require.Equal(t, 100*ms, d, "Jitter %v is no jitter", j)
		}
	}
}

func TestRetryDecorrelatedJitterWithoutGrowthIsConstant(t *testing.T) {
	var waits []time.Duration
	hc := newHandshakeClock()
	_ = backoff.Retry(context.Background(), backoff.Schedule{Duration: 7 * time.Millisecond, Factor: 1, Steps: 4},
		func(context.Context) error { return errFlaky },
		backoff.WithClock(hc), backoff.WithJitterKind(backoff.DecorrelatedJitter),
		backoff.WithNotify(func(_ int, _ error, next time.Duration) { waits = append(waits, next); hc.Step(next) }))
	assert.Equal(t, []time.Duration{7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond}, waits)
}

func TestRetryValue(t *testing.T) {
	calls := 0
	v, err := backoff.RetryValue(context.Background(), backoff.Schedule{Steps: 5}, func(context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "partial", errFlaky
		}
		return "ok", nil
	})
	require.NoError(t, err)
	assert.Equal(t, "ok", v)

	v, err = backoff.RetryValue(context.Background(), backoff.Schedule{Steps: 2}, func(context.Context) (string, error) {
		return "partial", errFlaky
	})
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	assert.Equal(t, "", v, "the zero value when Retry gives up")
}

// TestRetryKeepsThePermanentMark: Retry returns a Permanent error as fn
// returned it, where cenkalti/backoff v4 and v5 return the error inside. So
// == with the inner error is false and errors.Is is true, and a caller that
// retries Retry's error in turn (here an outer Retry) stops at once too.
func TestRetryKeepsThePermanentMark(t *testing.T) {
	errNotFound := errors.New("not found")
	outerCalls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 5}, func(ctx context.Context) error {
		outerCalls++
		return backoff.Retry(ctx, backoff.Schedule{Steps: 3}, func(context.Context) error {
			return backoff.Permanent(errNotFound)
		})
	})
	assert.Equal(t, 1, outerCalls, "the outer Retry does not retry a permanent error")
	assert.False(t, err == errNotFound, "err == errNotFound is false")
	assert.ErrorIs(t, err, errNotFound)
	assert.True(t, backoff.IsPermanent(err))
	var p *backoff.PermanentError // the way back to the error inside
	require.ErrorAs(t, err, &p)
	assert.Same(t, errNotFound, p.Err)
}

// TestRetryGivesUpWithTheLastErrorInsideARetryError: when the attempts run
// out, Retry returns a *RetryError, not fn's last error itself (as
// cenkalti/backoff v4 and v5, sethvargo/go-retry and client-go's OnError
// do); errors.Is reaches the last error and only it (avast/retry-go's list
// matches the error of any attempt), and Last is that error as is.
func TestRetryGivesUpWithTheLastErrorInsideARetryError(t *testing.T) {
	first, second, last := errors.New("first"), errors.New("second"), errors.New("last")
	results := []error{first, second, last}
	calls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 3}, func(context.Context) error {
		calls++
		return results[calls-1]
	})
	assert.False(t, err == last)
	assert.ErrorIs(t, err, last)
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	assert.NotErrorIs(t, err, first, "only the last attempt's error is reachable")
	assert.NotErrorIs(t, err, second)
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Same(t, last, re.Last, "re.Last is the way back to the last error")
	assert.Equal(t, 3, re.Attempts)
}

// TestRetryHasNoElapsedTimeLimitByDefault: with Steps ≤ 0 Retry goes on for
// as long as fn fails (cenkalti/backoff stops after 15 minutes by default);
// WithMaxElapsedTime(15*time.Minute) brings that limit back.
func TestRetryHasNoElapsedTimeLimitByDefault(t *testing.T) {
	s := backoff.Schedule{Duration: time.Minute, Steps: 0}
	run := func(opts ...backoff.Option) (int, error) {
		fc := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		start := fc.Now()
		calls := 0
		err := backoff.Retry(context.Background(), s, func(context.Context) error {
			calls++
			if fc.Since(start) < time.Hour {
				return errFlaky
			}
			return nil
		}, append(opts, backoff.WithClock(fc),
			backoff.WithNotify(func(_ int, _ error, next time.Duration) { fc.Step(next) }))...)
		return calls, err
	}
	calls, err := run()
	assert.NoError(t, err, "still retrying after an hour")
	assert.Equal(t, 61, calls)

	calls, err = run(backoff.WithMaxElapsedTime(15 * time.Minute))
	assert.ErrorIs(t, err, backoff.ErrMaxElapsedTime)
	assert.Equal(t, 16, calls, "attempts at 0, 1, … 15 minutes; the next would start past 15")
}

// TestRetryScheduleIsAValue: each Retry call starts the schedule afresh, so
// one Schedule serves any number of calls, concurrent ones included
// (cenkalti/backoff's and sethvargo/go-retry's backoffs are objects whose
// state carries over from one use to the next).
func TestRetryScheduleIsAValue(t *testing.T) {
	ms := time.Millisecond
	s := backoff.Schedule{Duration: 10 * ms, Factor: 2, Steps: 4}
	for range 2 {
		r := runRetry(t, context.Background(), s, nil)
		assert.Equal(t, []time.Duration{0, 10 * ms, 30 * ms, 70 * ms}, r.at)
	}
}

func TestOnError(t *testing.T) {
	ms := time.Millisecond
	retriable := func(err error) bool { return err == errFlaky }
	tests := []struct {
		name      string
		schedule  backoff.Schedule
		retriable func(error) bool
		results   []error
		wantCalls int
		wantErr   error
	}{
		{"success", backoff.DefaultRetry, retriable, []error{errFlaky, nil}, 2, nil},
		{"last error when attempts run out", backoff.Schedule{Duration: ms, Steps: 3}, retriable, []error{errFlaky, errFlaky, errFlaky}, 3, errFlaky},
		{"a non-retriable error as is", backoff.DefaultRetry, retriable, []error{errFlaky, io.EOF}, 2, io.EOF},
		{"no steps", backoff.Schedule{}, retriable, nil, 0, backoff.ErrWaitTimeout},
		{"nil retriable retries everything", backoff.Schedule{Duration: ms, Steps: 2}, nil, []error{io.EOF, errFlaky}, 2, errFlaky},
		// client-go's OnError inherits ExponentialBackoff's cap quirk
		// (kubernetes#131122): 2 calls although Steps is 10.
		{"the cap quirk", backoff.Schedule{Duration: ms, Factor: 2, Steps: 10, Cap: 3 * ms}, retriable,
			[]error{errFlaky, errFlaky, errFlaky, errFlaky}, 2, errFlaky},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := newHandshakeClock()
			calls := 0
			var err error
			done := wtGo(func() {
				err = backoff.OnError(tt.schedule, tt.retriable, func() error {
					calls++
					if calls <= len(tt.results) {
						return tt.results[calls-1]
					}
					return nil
				}, backoff.WithClock(hc))
			})
			hc.drive(t, done)
			assert.Equal(t, tt.wantCalls, calls)
			assert.Equal(t, tt.wantErr, err)
		})
	}
}

func TestRetryOptionsRejectBadArguments(t *testing.T) {
	tests := []struct {
		name string
		make func()
		want string
	}{
		{"negative budget", func() { backoff.WithMaxElapsedTime(-1) }, "backoff: WithMaxElapsedTime: d must not be negative, got -1ns"},
		{"nil notify", func() { backoff.WithNotify(nil) }, "backoff: WithNotify: notify must not be nil, got <nil>"},
		{"nil retryable", func() { backoff.WithRetryable(nil) }, "backoff: WithRetryable: retryable must not be nil, got <nil>"},
		{"unknown jitter kind", func() { backoff.WithJitterKind(7) }, "backoff: WithJitterKind: k must be one of the JitterKind constants, got JitterKind(7)"},
		{"negative jitter kind", func() { backoff.WithJitterKind(-1) }, "backoff: WithJitterKind: k must be one of the JitterKind constants, got JitterKind(-1)"},
		{"negative hint bound", func() { backoff.WithMaxRetryAfter(-time.Second) }, "backoff: WithMaxRetryAfter: d must not be negative, got -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.make)
		})
	}
}

func TestRetryPanicPropagates(t *testing.T) {
	assert.PanicsWithValue(t, "boom", func() {
		_ = backoff.Retry(context.Background(), backoff.Schedule{Steps: 3}, func(context.Context) error { panic("boom") })
	})
}

func TestRetryErrorWithoutReason(t *testing.T) {
	err := &backoff.RetryError{Attempts: 2, Last: io.EOF}
	assert.Equal(t, "backoff: retry stopped after 2 attempts; last error: EOF", err.Error())
	assert.Equal(t, []error{io.EOF}, err.Unwrap())
	assert.Equal(t, "JitterKind(9)", backoff.JitterKind(9).String())
}

const ms = time.Millisecond

// asPermanentError is an error of a user's own that is not a *PermanentError
// but says, through an As method, that it stands for one: errors.As, and so
// IsPermanent, find the *PermanentError through it.
type asPermanentError struct{ err error }

func (e asPermanentError) Error() string { return e.err.Error() }

func (e asPermanentError) As(target any) bool {
	if p, ok := target.(**backoff.PermanentError); ok {
		*p = &backoff.PermanentError{Err: e.err}
		return true
	}
	return false
}

// asHintError yields a Retry-After hint through its As method only, as a
// *RetryAfterError.
type asHintError struct{ d time.Duration }

func (e asHintError) Error() string { return "throttled" }

func (e asHintError) As(target any) bool {
	if p, ok := target.(**backoff.RetryAfterError); ok {
		*p = &backoff.RetryAfterError{Delay: e.d, Err: errFlaky}
		return true
	}
	return false
}

// asHintCarrierError yields a Retry-After hint through its As method only,
// as any carrier of a hint: it fills a target of the interface type that
// Retry documents (a method RetryAfter() time.Duration), not a
// *RetryAfterError.
type asHintCarrierError struct{ d time.Duration }

func (e asHintCarrierError) Error() string { return "throttled" }

func (e asHintCarrierError) As(target any) bool {
	if p, ok := target.(*interface{ RetryAfter() time.Duration }); ok {
		*p = &backoff.RetryAfterError{Delay: e.d, Err: errFlaky}
		return true
	}
	return false
}

// TestRetryClassifiesErrorsAsIsPermanentDoes: Retry and IsPermanent share
// one classification. Before, Retry walked the chain by hand without As
// methods, so it retried an error that IsPermanent reported (5 attempts, not
// 1).
func TestRetryClassifiesErrorsAsIsPermanentDoes(t *testing.T) {
	for name, err := range map[string]error{
		"As method":         asPermanentError{io.EOF},
		"wrapped As method": fmt.Errorf("call: %w", asPermanentError{io.EOF}),
		"As method in join": errors.Join(errFlaky, asPermanentError{io.EOF}),
	} {
		t.Run(name, func(t *testing.T) {
			require.True(t, backoff.IsPermanent(err))
			r := runRetry(t, context.Background(), backoff.Schedule{Duration: 10 * ms, Steps: 5}, []error{err, err, err, err, err})
			assert.Len(t, r.at, 1, "a permanent error is never retried")
			assert.Equal(t, err, r.err, "returned as fn returned it")
		})
	}
	assert.False(t, backoff.IsPermanent(asHintError{time.Second}))
}

// TestRetryReadsHintsThroughAsMethods: a hint that errors.As would find
// through an As method is one for Retry too.
func TestRetryReadsHintsThroughAsMethods(t *testing.T) {
	r := runRetry(t, context.Background(), backoff.Schedule{Duration: 10 * ms, Factor: 2, Steps: 2},
		[]error{fmt.Errorf("get: %w", asHintError{time.Second})})
	assert.Equal(t, []time.Duration{0, time.Second}, r.at)
}

// TestRetryReadsHintsThroughAsMethodsOfAnyCarrier: an As method that fills
// a target of the hint's interface type, rather than a *RetryAfterError,
// gives a hint too, as errors.As would find it; a hint ≤ 0 given that way is
// no hint.
func TestRetryReadsHintsThroughAsMethodsOfAnyCarrier(t *testing.T) {
	s := backoff.Schedule{Duration: 10 * ms, Factor: 2, Steps: 3}
	r := runRetry(t, context.Background(), s,
		[]error{fmt.Errorf("get: %w", asHintCarrierError{time.Second}), asHintCarrierError{0}})
	assert.Equal(t, []time.Duration{0, time.Second, time.Second + 20*ms}, r.at)
}

// TestRetryZeroScheduleFollowsDefaultRetry: Retry(ctx, Schedule{}, fn) used
// to call fn back to back without end (1,951,722 attempts in 100 ms). A
// schedule that never waits and never stops now means DefaultRetry: 5
// attempts, 10 ms apart, stretched by up to 10%.
func TestRetryZeroScheduleFollowsDefaultRetry(t *testing.T) {
	for name, s := range map[string]backoff.Schedule{
		"zero":                      {},
		"no steps, no duration":     {Factor: 2, Cap: time.Second},
		"no steps, negative period": {Duration: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			var waits []time.Duration
			r := runRetry(t, context.Background(), s, nil, backoff.WithNotify(func(_ int, _ error, next time.Duration) {
				waits = append(waits, next)
			}))
			require.Len(t, r.at, backoff.DefaultRetry.Steps)
			assert.ErrorIs(t, r.err, backoff.ErrAttemptsExhausted)
			for _, w := range waits {
				assert.GreaterOrEqual(t, w, 10*ms)
				assert.Less(t, w, 11*ms)
			}
		})
	}
	// Steps > 0 bounds the retries: immediate attempts are honoured.
	r := runRetry(t, context.Background(), backoff.Schedule{Steps: 3}, nil)
	assert.Equal(t, []time.Duration{0, 0, 0}, r.at)
}

// TestRetryRejectsSchedulesOfCenturies: an infinite Factor without a Cap, or
// a Jitter of 1e308, asked for a 292-year wait; Retry now panics before the
// first attempt, naming the field.
func TestRetryRejectsSchedulesOfCenturies(t *testing.T) {
	calls := 0
	fn := func(context.Context) error { calls++; return errFlaky }
	// Cancelled: the panic comes before any look at ctx, and a schedule that
	// is wrongly let through ends at once instead of waiting for centuries
	// of real time.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		s    backoff.Schedule
		want string
	}{
		{backoff.Schedule{Duration: ms, Factor: math.Inf(1), Steps: 3},
			"backoff: Retry: s.Factor must be finite when s.Cap is not set, got +Inf"},
		{backoff.Schedule{Duration: ms, Factor: 2, Jitter: 1e308, Steps: 3},
			"backoff: Retry: s.Jitter must be at most 10, got 1e+308"},
		{backoff.Schedule{Duration: ms, Jitter: math.Inf(1), Steps: 3, Cap: time.Second},
			"backoff: Retry: s.Jitter must be at most 10, got +Inf"},
	} {
		assert.PanicsWithValue(t, tt.want, func() { _ = backoff.Retry(ctx, tt.s, fn) })
	}
	assert.Zero(t, calls)
	// With a Cap, an infinite Factor is a jump to the cap, as in Kubernetes.
	r := runRetry(t, context.Background(), backoff.Schedule{Duration: 10 * ms, Factor: math.Inf(1), Steps: 3, Cap: time.Second}, nil)
	assert.Equal(t, []time.Duration{0, 10 * ms, 1010 * ms}, r.at)
}

// TestRetryAcceptsJitterUpToMaxRetryJitter: MaxRetryJitter itself is a
// Jitter Retry accepts; only a larger one panics.
func TestRetryAcceptsJitterUpToMaxRetryJitter(t *testing.T) {
	fc := testclock.NewFakeClock(epoch)
	s := backoff.Schedule{Duration: 1, Jitter: backoff.MaxRetryJitter, Steps: 1}
	require.NotPanics(t, func() {
		assert.NoError(t, backoff.Retry(context.Background(), s,
			func(context.Context) error { return nil }, backoff.WithClock(fc)))
	})
	s.Jitter = backoff.MaxRetryJitter + 1e-9
	assert.Panics(t, func() {
		_ = backoff.Retry(context.Background(), s, func(context.Context) error { return nil }, backoff.WithClock(fc))
	})
}

// FuzzRetryDelay runs Retry on any schedule, with every jitter kind and any
// Retry-After hint, and checks each wait it announces (through WithNotify,
// which then steps the fake clock by it): never negative, never above its
// bound. The bound is the hint limit for a hinted error (unless hints are
// ignored), Cap for the full, equal and decorrelated kinds, Cap plus
// Jitter·Cap for the proportional kind (Kubernetes' jitter on top of the
// cap), and Cap plus min(Jitter, 1)·Cap for the symmetric kind; without a
// Cap, only saturation bounds it.
func FuzzRetryDelay(f *testing.F) {
	ms := int64(time.Millisecond)
	f.Add(10*ms, 2.0, 0.0, int64(0), uint8(0), false, int64(0), int64(-1), uint8(5))
	f.Add(10*ms, 2.0, 0.5, 100*ms, uint8(0), false, int64(0), int64(-1), uint8(8))
	f.Add(10*ms, 3.0, 0.0, 100*ms, uint8(1), false, int64(0), int64(-1), uint8(8))
	f.Add(10*ms, 3.0, 0.0, 100*ms, uint8(2), false, int64(0), int64(-1), uint8(8))
	f.Add(10*ms, 3.0, 0.0, 100*ms, uint8(3), false, int64(0), int64(-1), uint8(8))
	f.Add(10*ms, 2.0, 0.5, 100*ms, uint8(4), false, int64(0), int64(-1), uint8(8))
	f.Add(int64(time.Hour), 2.0, 5.0, int64(10*time.Hour), uint8(4), false, int64(0), int64(-1), uint8(6))
	f.Add(10*ms, 2.0, 0.1, 0*ms, uint8(0), true, int64(-5), int64(-1), uint8(4))
	f.Add(10*ms, 2.0, 0.1, 0*ms, uint8(1), true, int64(math.MaxInt64), int64(2000*ms), uint8(4))
	f.Add(10*ms, 2.0, 0.1, 0*ms, uint8(2), true, int64(24*time.Hour), int64(0), uint8(4))
	f.Add(int64(math.MaxInt64), math.Inf(1), math.Inf(1), int64(math.MaxInt64), uint8(3), false, int64(0), int64(-1), uint8(6))
	f.Add(int64(-1), math.NaN(), math.NaN(), int64(-1), uint8(2), false, int64(0), int64(-1), uint8(6))
	f.Add(int64(1), 1e300, -1.0, int64(0), uint8(3), false, int64(0), int64(-1), uint8(6))
	f.Fuzz(func(t *testing.T, duration int64, factor, jitter float64, limit int64, kind uint8, useHint bool, hint, maxHint int64, steps uint8) {
		s := backoff.Schedule{Duration: time.Duration(duration), Factor: factor, Jitter: jitter,
			Steps: int(steps%10) + 1, Cap: time.Duration(limit)}
		k := backoff.JitterKind(kind % 5)
		fc := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		opts := []backoff.Option{backoff.WithClock(fc), backoff.WithJitterKind(k)}
		hintLimit := backoff.DefaultMaxRetryAfter
		ignoreHints := false
		if maxHint >= 0 {
			opts = append(opts, backoff.WithMaxRetryAfter(time.Duration(maxHint)))
			hintLimit, ignoreHints = time.Duration(maxHint), maxHint == 0
		}
		bound := wtMaxDuration
		if s.Cap > 0 {
			bound = s.Cap
			if k == backoff.ProportionalJitter && jitter > 0 {
				bound = wtSatAdd(s.Cap, wtSatScale(s.Cap, jitter))
			}
			if k == backoff.SymmetricJitter && jitter > 0 {
				bound = wtSatAdd(s.Cap, wtSatScale(s.Cap, min(jitter, 1)))
			}
		}
		if useHint && !ignoreHints && hint > 0 { // a hint ≤ 0 is no hint
			bound = hintLimit
		}
		fnErr := errFlaky
		if useHint {
			fnErr = backoff.RetryAfter(time.Duration(hint), errFlaky)
		}
		waits := 0
		opts = append(opts, backoff.WithNotify(func(attempt int, _ error, next time.Duration) {
			waits++
			if next < 0 || next > bound {
				t.Fatalf("%v, wait %d of %+v: %v, want within [0, %v]", k, attempt, s, next, bound)
			}
			fc.Step(next)
		}))
		call := func() error {
			return backoff.Retry(context.Background(), s, func(context.Context) error { return fnErr }, opts...)
		}
		if (math.IsInf(factor, 1) && s.Cap <= 0) || jitter > backoff.MaxRetryJitter {
			// Waits of centuries: Retry rejects the schedule before any attempt.
			assert.Panics(t, func() { _ = call() })
			return
		}
		err := call()
		if err == nil || waits != s.Steps-1 {
			t.Fatalf("%d waits for %d steps, err %v", waits, s.Steps, err)
		}
	})
}

// TestWithJitterKindRejectsUnknownKinds: the JitterKind constants are
// accepted; the values around them panic at the option.
func TestWithJitterKindRejectsUnknownKinds(t *testing.T) {
	for _, k := range []backoff.JitterKind{backoff.ProportionalJitter, backoff.FullJitter, backoff.EqualJitter, backoff.DecorrelatedJitter, backoff.SymmetricJitter} {
		assert.NotPanics(t, func() { backoff.WithJitterKind(k) }, "kind %d", k)
	}
	for _, k := range []backoff.JitterKind{-1, backoff.SymmetricJitter + 1} {
		assert.Panics(t, func() { backoff.WithJitterKind(k) }, "kind %d", k)
	}
}

// retryBenchClock is a clock whose timers fire as soon as they are set, so
// that a benchmark goes through Retry's timer path (Reset, select) without
// waiting. FakeClock would not do: its Step allocates, which would hide
// whether Retry does.
type retryBenchClock struct{ now time.Time }

var _ clock.WithDelayedExecution = retryBenchClock{}

func (c retryBenchClock) Now() time.Time                         { return c.now }
func (c retryBenchClock) Since(t time.Time) time.Duration        { return c.now.Sub(t) }
func (c retryBenchClock) Sleep(time.Duration)                    {}
func (c retryBenchClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }
func (c retryBenchClock) Tick(d time.Duration) <-chan time.Time  { return c.NewTimer(d).C() }

func (c retryBenchClock) NewTimer(d time.Duration) clock.Timer {
	t := &retryBenchTimer{ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

func (c retryBenchClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	f()
	return c.NewTimer(d)
}

type retryBenchTimer struct{ ch chan time.Time }

func (t *retryBenchTimer) C() <-chan time.Time { return t.ch }
func (t *retryBenchTimer) Stop() bool          { return false }

func (t *retryBenchTimer) Reset(time.Duration) bool {
	select {
	case t.ch <- time.Time{}:
	default:
	}
	return false
}

// BenchmarkRetryAttempt measures what Retry adds to each attempt, in one
// Retry call that lasts b.N attempts, so that the per-call set-up is
// amortised away and allocs/op is the per-attempt allocation: 0.
func BenchmarkRetryAttempt(b *testing.B) {
	hinted := backoff.RetryAfter(time.Millisecond, errFlaky)
	// Unlimited attempts without waits: a schedule with no Steps and no
	// Duration would mean DefaultRetry to Retry, so Steps is set, too high
	// to be reached.
	noWait := backoff.Schedule{Steps: math.MaxInt}
	cases := []struct {
		name     string
		schedule backoff.Schedule
		err      error
		opts     []backoff.Option
	}{
		// No wait: the bookkeeping alone (delay, classification, checks).
		{"zero-wait", noWait, errFlaky, nil},
		// A wait on every attempt, on a clock whose timers fire at once:
		// timer Reset and select included.
		{"timer", backoff.Schedule{Duration: time.Millisecond, Factor: 2, Jitter: 0.1, Cap: time.Second}, errFlaky,
			[]backoff.Option{backoff.WithClock(retryBenchClock{})}},
		{"timer/full-jitter", backoff.Schedule{Duration: time.Millisecond, Factor: 2, Cap: time.Second}, errFlaky,
			[]backoff.Option{backoff.WithClock(retryBenchClock{}), backoff.WithJitterKind(backoff.FullJitter)}},
		{"timer/decorrelated", backoff.Schedule{Duration: time.Millisecond, Factor: 3, Cap: time.Second}, errFlaky,
			[]backoff.Option{backoff.WithClock(retryBenchClock{}), backoff.WithJitterKind(backoff.DecorrelatedJitter)}},
		// A Retry-After hint on every error, wrapped: the error walk, and the
		// hint's wait on a clock whose timers fire at once.
		{"hint", noWait, fmt.Errorf("get: %w", hinted), []backoff.Option{backoff.WithClock(retryBenchClock{})}},
		{"notify+budget", backoff.Schedule{Duration: time.Millisecond}, errFlaky,
			[]backoff.Option{backoff.WithClock(retryBenchClock{}), backoff.WithMaxElapsedTime(time.Hour),
				backoff.WithNotify(func(int, error, time.Duration) {})}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			err := backoff.Retry(context.Background(), c.schedule, func(context.Context) error {
				n++
				if n < b.N {
					return c.err
				}
				return nil
			}, c.opts...)
			if err != nil {
				b.Fatal(err)
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				err := backoff.Retry(context.Background(), c.schedule, func(context.Context) error {
					if pb.Next() {
						return c.err
					}
					return nil
				}, c.opts...)
				if err != nil {
					b.Error(err)
				}
			})
		})
	}
}

// BenchmarkRetryCall measures a whole Retry call that succeeds at once: the
// fixed cost per call.
// BenchmarkRetryAttemptTimeout is BenchmarkRetryCall with
// WithAttemptTimeout: the attempt's context and its clock timer.
func BenchmarkRetryAttemptTimeout(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	s := backoff.Schedule{Duration: time.Millisecond, Factor: 2, Steps: 5}
	fn := func(context.Context) error { return nil }
	opt := backoff.WithAttemptTimeout(time.Second)
	for i := 0; i < b.N; i++ {
		if err := backoff.Retry(ctx, s, fn, opt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRetryCall(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	s := backoff.Schedule{Duration: time.Millisecond, Factor: 2, Steps: 5}
	fn := func(context.Context) error { return nil }
	for i := 0; i < b.N; i++ {
		if err := backoff.Retry(ctx, s, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// reusedTimerClock is a clock whose every NewTimer returns the same timer,
// one that fires as soon as it is set, so that a benchmark of a whole call
// that waits shows the helper's own allocations and not the clock's. It is
// for serial benchmarks only.
type reusedTimerClock struct {
	retryBenchClock
	t retryBenchTimer
}

func newReusedTimerClock() *reusedTimerClock {
	return &reusedTimerClock{t: retryBenchTimer{ch: make(chan time.Time, 1)}}
}

func (c *reusedTimerClock) NewTimer(d time.Duration) clock.Timer {
	c.t.Reset(d)
	return &c.t
}

// optionCounts runs body as sub-benchmarks opts=0, opts=1 and opts=3, for a
// helper called with that many options. The body builds the options inside
// its loop, as callers do, so that allocs/op counts what passing them costs.
func optionCounts(b *testing.B, body func(b *testing.B, n int)) {
	for _, n := range []int{0, 1, 3} {
		b.Run(fmt.Sprintf("opts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			body(b, n)
		})
	}
}

// BenchmarkRetryOptions measures whole calls of Retry, RetryValue and OnError
// that succeed at the first attempt, with 0, 1 and 3 options: 0 allocs/op
// whatever options are passed.
func BenchmarkRetryOptions(b *testing.B) {
	ctx := context.Background()
	s := backoff.Schedule{Duration: time.Millisecond, Factor: 2, Steps: 5}
	var clk clock.WithDelayedExecution = clock.RealClock{}
	notify := func(int, error, time.Duration) {}
	retryable := func(error) bool { return true }
	fn := func(context.Context) error { return nil }
	b.Run("Retry", func(b *testing.B) {
		optionCounts(b, func(b *testing.B, n int) {
			for i := 0; i < b.N; i++ {
				var err error
				switch n {
				case 0:
					err = backoff.Retry(ctx, s, fn)
				case 1:
					err = backoff.Retry(ctx, s, fn, backoff.WithClock(clk))
				default:
					err = backoff.Retry(ctx, s, fn, backoff.WithClock(clk),
						backoff.WithMaxElapsedTime(time.Hour), backoff.WithNotify(notify))
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	valueFn := func(context.Context) (int, error) { return 1, nil }
	b.Run("RetryValue", func(b *testing.B) {
		optionCounts(b, func(b *testing.B, n int) {
			for i := 0; i < b.N; i++ {
				var err error
				switch n {
				case 0:
					_, err = backoff.RetryValue(ctx, s, valueFn)
				case 1:
					_, err = backoff.RetryValue(ctx, s, valueFn, backoff.WithClock(clk))
				default:
					_, err = backoff.RetryValue(ctx, s, valueFn, backoff.WithClock(clk),
						backoff.WithRetryable(retryable), backoff.WithJitterKind(backoff.FullJitter))
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	plain := func() error { return nil }
	b.Run("OnError", func(b *testing.B) {
		budget := backoff.NewRetryBudget(0.1, 1e12, 100*time.Millisecond)
		optionCounts(b, func(b *testing.B, n int) {
			for i := 0; i < b.N; i++ {
				var err error
				switch n {
				case 0:
					err = backoff.OnError(s, retryable, plain)
				case 1:
					err = backoff.OnError(s, retryable, plain, backoff.WithClock(clk))
				default:
					err = backoff.OnError(s, retryable, plain, backoff.WithClock(clk),
						backoff.WithRetryBudget(budget), backoff.WithMaxElapsedTime(time.Hour))
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// TestPerCallHelpersWithOptionsDoNotAllocate: passing options to Retry,
// RetryValue, OnError and ExponentialBackoff allocates nothing, nor do the
// options themselves (BenchmarkRetryOptions measures the same calls).
func TestPerCallHelpersWithOptionsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	s := backoff.Schedule{Duration: time.Millisecond, Factor: 2, Steps: 5}
	var clk clock.WithDelayedExecution = clock.RealClock{}
	budget := backoff.NewRetryBudget(0.1, 1e12, 100*time.Millisecond)
	notify := func(int, error, time.Duration) {}
	for _, c := range []struct {
		name string
		call func()
	}{
		{"Retry", func() {
			_ = backoff.Retry(ctx, s, func(context.Context) error { return nil }, backoff.WithClock(clk),
				backoff.WithMaxElapsedTime(time.Hour), backoff.WithNotify(notify), backoff.WithRetryBudget(budget))
		}},
		{"RetryValue", func() {
			_, _ = backoff.RetryValue(ctx, s, func(context.Context) (int, error) { return 1, nil }, backoff.WithClock(clk),
				backoff.WithJitterKind(backoff.FullJitter), backoff.WithMaxRetryAfter(time.Second))
		}},
		{"OnError", func() {
			_ = backoff.OnError(s, nil, func() error { return nil }, backoff.WithClock(clk), backoff.WithRetryBudget(budget))
		}},
		{"ExponentialBackoff", func() {
			_ = backoff.ExponentialBackoff(s, func() (bool, error) { return true, nil }, backoff.WithClock(clk),
				backoff.WithName("ignored"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(100, c.call))
		})
	}
}
