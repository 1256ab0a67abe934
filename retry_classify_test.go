package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

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
