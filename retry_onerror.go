package backoff

import "time"

// DefaultRetry is client-go's retry.DefaultRetry: 5 attempts 10ms apart,
// each wait stretched by up to 10%. client-go recommends it for conflicts
// (an update racing another writer), where a quick retry should succeed.
// It is a variable, as in client-go, to be copied: do not modify it.
var DefaultRetry = Schedule{
	Steps:    5,
	Duration: 10 * time.Millisecond,
	Factor:   1.0,
	Jitter:   0.1,
}

// OnError calls fn, waiting s.Step() between calls, while it returns an
// error for which retriable returns true, at most s.Steps times. It is
// client-go's retry.OnError, for code moving from it, and has its results:
//
//   - nil as soon as fn succeeds;
//   - the error as is, as soon as fn returns one that retriable rejects;
//   - fn's last error when the attempts run out;
//   - [ErrWaitTimeout] when s.Steps ≤ 0 (fn is never called).
//
// A nil retriable treats every error as retriable. OnError runs on
// [ExponentialBackoff], and so shares its Cap quirk (kubernetes#131122): when
// the next wait would reach s.Cap it gives up after the wait in progress,
// however many Steps were left. New code should use [Retry] with [WithRetryable], which keeps
// retrying at the cap, takes a context, and says how many attempts were
// made. Waits go through the clock given with [WithClock]; a panic in fn
// propagates, and a nil fn panics at the call.
//
// With [WithRetryBudget], the first call of fn counts as a request and each
// later one must be allowed by the budget, asked after the wait that
// precedes it; when the budget refuses, OnError returns a [*RetryError]
// whose Reason is [ErrRetryBudgetExhausted] and whose Last is fn's last
// error.
//
// client-go's retry.RetryOnConflict is OnError with apierrors.IsConflict as
// retriable; this package does not depend on apimachinery's errors, so pass
// that predicate yourself.
func OnError(s Schedule, retriable func(error) bool, fn func() error, opts ...Option) error {
	mustNotBeNil("OnError", "fn", fn == nil)
	var last error // the last retriable error, reported instead of ErrWaitTimeout
	gate := newBudgetGate(opts)
	err := ExponentialBackoff(s, func() (bool, error) {
		if err := gate.admit(last); err != nil {
			return false, err
		}
		err := fn()
		switch {
		case err == nil:
			return true, nil
		case retriable == nil || retriable(err):
			last = err
			return false, nil
		default:
			return false, err
		}
	}, opts...)
	if last != nil && Interrupted(err) {
		return last
	}
	return err
}
