package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
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
