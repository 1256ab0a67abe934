package backoff

import (
	"context"
	"time"

	"github.com/retrykit/backoff/internal/optionhook"
)

func init() {
	optionhook.AttemptTimeout = func(opts any) (time.Duration, func(context.Context) (context.Context, func())) {
		var cfg config
		cfg.apply(opts.([]Option))
		d, clk := cfg.retry.attemptTimeout, cfg.clock
		return d, func(parent context.Context) (context.Context, func()) {
			c := withAttemptTimeout(parent, clk, d)
			return c, c.release
		}
	}
}

// ErrDeadlineWouldPass is the [RetryError.Reason] when [Retry] gave up before
// ctx's deadline rather than wait into it: the next attempt would start at or
// after the deadline, or with less time left than [WithMinAttemptTime] asks.
// errors.Is(err, context.DeadlineExceeded) holds for it too, so code that
// tests for a deadline finds this one, while the RetryError's Last keeps the
// error that made the retry necessary.
var ErrDeadlineWouldPass error = deadlineWouldPass{}

type deadlineWouldPass struct{}

func (deadlineWouldPass) Error() string {
	return "backoff: the deadline would pass before the next attempt"
}

// Is makes errors.Is(ErrDeadlineWouldPass, context.DeadlineExceeded) true.
func (deadlineWouldPass) Is(target error) bool { return target == context.DeadlineExceeded }

// WithMinAttemptTime makes [Retry] start an attempt only while at least d is
// left before ctx's deadline: an attempt with less time than d could only
// fail for want of it. Retry then returns a [*RetryError] with
// [ErrDeadlineWouldPass] instead of waiting. d = 0 (the default) still
// never starts a wait that would end at or after the deadline; a negative d
// panics. Without a deadline on ctx it has no effect.
func WithMinAttemptTime(d time.Duration) Option {
	mustNotBeNegative("WithMinAttemptTime", "d", d)
	return durationOption(optionMinAttemptTime, d)
}

// WithAttemptTimeout makes [Retry] run each attempt under a context that
// ends, with context.DeadlineExceeded, d after the attempt starts, or at
// ctx's deadline if that comes first. d is measured on the clock given with
// [WithClock], so stepping a FakeClock past it ends the attempt. The
// attempt's context reports the timeout's instant from Deadline on the real
// clock only: on another clock it reports ctx's deadline, because code that
// reads a deadline (net.Dialer, http.Transport) reads it as a real instant. An
// attempt that fails because its own timeout ended it is retried like any
// other failure, and counts as a timeout for the pacers (see [WithPacer]);
// one that fails because ctx ended is not retried. d = 0 means no timeout
// (the default); a negative d panics.
//
// Each attempt then costs the allocations of its context: the context
// itself and the clock's timer for the timeout (see BenchmarkRetryAttemptTimeout).
func WithAttemptTimeout(d time.Duration) Option {
	mustNotBeNegative("WithAttemptTimeout", "d", d)
	return durationOption(optionAttemptTimeout, d)
}

// WithMaxElapsedTimeSinceFirstFailure gives [Retry] a time budget d, as
// [WithMaxElapsedTime] does, but measured from the end of the first failed
// attempt rather than from the call. A call whose first attempt may
// legitimately run for a long time before it fails (a long poll, a
// subscription's stream, a watch that is reconnected) wants this one:
// measured from the call, an attempt that ran for an hour before failing
// would leave no budget for the retries it needs. A call whose attempts are
// short (a request) wants WithMaxElapsedTime, whose budget also bounds the
// first attempt's start. The last of the two options given wins. d = 0
// means no budget; a negative d panics.
func WithMaxElapsedTimeSinceFirstFailure(d time.Duration) Option {
	mustNotBeNegative("WithMaxElapsedTimeSinceFirstFailure", "d", d)
	return durationOption(optionMaxElapsedSinceFailure, d)
}

// deadlineTooClose reports whether a wait of wait, followed by an attempt
// that needs minAttempt, would end at or after ctx's deadline. The time
// left is measured on the real clock, whatever clock Retry waits on: ctx
// ends at its deadline by the real clock (context's own timer), so that is
// the time the caller has. In a testing/synctest bubble the real clock is
// the bubble's, and the two agree.
func deadlineTooClose(ctx context.Context, wait, minAttempt time.Duration) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	return addDuration(wait, minAttempt) >= time.Until(dl)
}
