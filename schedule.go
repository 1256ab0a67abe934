package backoff

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
)

// Schedule says how long to wait between attempts: Duration, then Duration
// times Factor, times Factor again, and so on, at most Cap, each wait
// stretched by Jitter. It is apimachinery's wait.Backoff, renamed so that it
// does not clash with this package's per-key [Backoff]; the fields and
// [Schedule.Step] behave as Kubernetes' do.
//
// The zero Schedule means different things to the functions that take it:
// [Retry] and [RetryValue] follow [DefaultRetry] instead (5 attempts, 10 ms
// apart), while [ExponentialBackoff] and [OnError] keep Kubernetes' rule,
// Steps ≤ 0 means no attempt: they never call fn and return
// [ErrWaitTimeout]. The table below sets out the other differences.
//
// A Schedule is a plain value: [Retry], [ExponentialBackoff] and
// [ExponentialBackoffWithContext] take it by value and step a copy, so one
// Schedule can be shared by many callers. Step mutates it and is not safe for
// concurrent use.
//
// # One Schedule, three readers
//
// The same value means different things to the functions that take it, as
// in Kubernetes; side by side:
//
//	                      Retry                      ExponentialBackoff, OnError   Step
//	zero Schedule         DefaultRetry: 5 attempts,  no attempt: ErrWaitTimeout    0, for ever
//	                      10 ms apart                (OnError: ErrWaitTimeout)
//	Steps ≤ 0             unlimited attempts (but    no attempt                    the wait stops
//	                      DefaultRetry if also                                     changing
//	                      Duration ≤ 0)
//	wait reaches Cap      keeps retrying at Cap      gives up (kubernetes#131122)  sets Steps to 0
//	Factor +Inf, no Cap   panics                     waits saturate (292 years)    saturates
//	Jitter > 10           panics (MaxRetryJitter)    saturates                     saturates
//
// Retry refuses to spin: a Schedule that would retry without bound and
// without waiting gets [DefaultRetry]'s meaning instead. ExponentialBackoff
// and OnError keep client-go's meaning, which cannot spin: Steps ≤ 0 makes
// no attempt at all.
//
// The fields arrive at call time, often from configuration, so Step and
// ExponentialBackoff reject no value: each is clamped as its comment says.
// Retry panics only on the two combinations in the table whose waits would
// be centuries.
type Schedule struct {
	// Duration is the first wait. A negative Duration counts as 0.
	Duration time.Duration

	// Factor multiplies the wait after each step, while Steps lasts and Cap
	// is not reached. 0 means constant waits. For Step (and so for
	// ExponentialBackoff) a Factor between 0 and 1 shrinks the waits, as in
	// Kubernetes; for Retry any Factor ≤ 1 means constant waits. A negative
	// or NaN Factor counts as 0 (Kubernetes would compute negative or
	// undefined durations); +Inf jumps to Cap.
	Factor float64

	// Jitter stretches each wait by a random amount in [0, Jitter·wait): see
	// [Jitter]. It does not feed back into the next wait. 0, a negative value
	// or NaN means no jitter. Jitter is added after Cap is applied, so a
	// jittered wait can exceed Cap by up to Jitter·Cap, as in Kubernetes.
	// [Retry]'s [SymmetricJitter] reads it as a spread on both sides of
	// the wait instead, and its other jitter kinds ([WithJitterKind])
	// ignore it.
	Jitter float64

	// Steps is, for Step, the number of steps in which the wait may still
	// change; once it is ≤ 0, Step returns the same wait for ever. For
	// [ExponentialBackoff] and [Retry] it is the most attempts to make (≤ 0:
	// none for ExponentialBackoff, unlimited for Retry).
	Steps int

	// Cap limits the wait: 0 or negative means no cap. When Factor would
	// take the wait above Cap, Step sets it to Cap and also sets Steps to 0,
	// which ends an [ExponentialBackoff] early; see [Schedule.Step]. Retry
	// caps the same way but keeps retrying.
	Cap time.Duration
}

// Step returns the next wait and advances the schedule: it returns Duration
// stretched by Jitter, then, while Steps > 0, decrements Steps and multiplies
// Duration by Factor for next time. Once Steps is ≤ 0, Duration no longer
// changes (and Steps reads 0). A nil *Schedule returns 0.
//
// Step is apimachinery's wait.Backoff.Step, quirks included: when Factor
// takes Duration above Cap, Step sets Duration to Cap and Steps to 0. Waits
// after that stay at Cap, but [ExponentialBackoff], which stops when Steps
// reaches 0, gives up after the wait in progress, however many Steps were
// left, and never waits at the cap at all (kubernetes#131122).
// {1s, ×2, Steps 3, Cap 3s} steps 1s, 2s, 3s, 3s, and leaves Steps at 0 after
// the second step; use [Retry] to keep retrying at the cap.
//
// Where Step differs: it never returns a negative wait, never overflows
// (Duration·Factor saturates, and Jitter with it), and, when Duration starts
// above Cap (Cap > 0), it returns Cap instead of Duration. So with Cap > 0 a
// wait never exceeds Cap + Jitter·Cap, and without jitter never exceeds Cap.
//
// Step does not allocate and is not safe for concurrent use.
func (s *Schedule) Step() time.Duration {
	if s == nil {
		return 0
	}
	current := max(s.Duration, 0)
	if s.Steps < 1 {
		s.Steps = 0
	} else {
		s.Steps--
		next := current
		if s.Factor > 0 { // false for NaN too
			next = scaleDuration(current, s.Factor)
			if s.Cap > 0 && next > s.Cap {
				next = s.Cap
				s.Steps = 0
			}
		}
		s.Duration = next
	}
	return Jitter(clampDuration(current, s.Cap), s.Jitter)
}

// ErrWaitTimeout is returned by [ExponentialBackoff] and
// [ExponentialBackoffWithContext] when the condition was checked as many
// times as the Schedule allows without being met. It is apimachinery's
// wait.ErrWaitTimeout, with this package's prefix on the message. Test for
// it with errors.Is, or with [Interrupted], which also matches a context's
// end.
var ErrWaitTimeout = errors.New("backoff: timed out waiting for the condition")

// Interrupted reports whether err says that a wait ended before its condition
// was met: true when errors.Is matches err with [ErrWaitTimeout],
// context.Canceled or context.DeadlineExceeded. It is apimachinery's
// wait.Interrupted, and the way to tell "gave up" from "the condition
// failed" for any function of this package that waits for a condition.
func Interrupted(err error) bool {
	return errors.Is(err, ErrWaitTimeout) ||
		errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
}

// ConditionFunc reports whether a condition is met (done), or an error that
// ends the wait at once. It is apimachinery's wait.ConditionFunc.
type ConditionFunc func() (done bool, err error)

// WithContext adapts f to a [ConditionWithContextFunc] that ignores its
// context, as apimachinery's ConditionFunc.WithContext does.
func (f ConditionFunc) WithContext() ConditionWithContextFunc {
	return func(context.Context) (bool, error) { return f() }
}

// ConditionWithContextFunc is a [ConditionFunc] that receives the context of
// the wait, to pass on to the calls it makes. It is apimachinery's
// wait.ConditionWithContextFunc.
type ConditionWithContextFunc func(context.Context) (done bool, err error)

// ExponentialBackoff checks condition, waiting s.Step() between checks, until
// it is met, returns an error, or has been checked s.Steps times; it blocks
// until then. It returns nil when the condition is met, the condition's
// error as is, or [ErrWaitTimeout]. With s.Steps ≤ 0 it returns
// ErrWaitTimeout without checking. It is apimachinery's wait.ExponentialBackoff,
// waiting on the clock given with [WithClock] instead of in time.Sleep.
//
// Like Kubernetes' it stops as soon as Step leaves Steps at 0, which happens
// early, when the next wait would reach s.Cap: it then returns ErrWaitTimeout
// after the wait in progress, without checking the condition again
// (kubernetes#131122). {1s, ×2, Steps 10, Cap 3s} checks at 0s and 1s only,
// and gives up at 3s. To keep retrying at the cap, use [Retry].
//
// A panic in condition propagates; a nil condition panics at the call.
// ExponentialBackoff cannot be cancelled: prefer
// [ExponentialBackoffWithContext].
func ExponentialBackoff(s Schedule, condition ConditionFunc, opts ...Option) error {
	mustNotBeNil("ExponentialBackoff", "condition", condition == nil)
	return ExponentialBackoffWithContext(context.Background(), s, condition.WithContext(), opts...)
}

// ExponentialBackoffWithContext is [ExponentialBackoff] with a context: it
// checks condition(ctx), waiting s.Step() between checks, until the
// condition is met (nil), returns an error (returned as is), has been checked
// s.Steps times ([ErrWaitTimeout]), or ctx is done. When ctx is done, before
// a check or during a wait, it returns ctx.Err() at once, as apimachinery's
// wait.ExponentialBackoffWithContext does; the condition is not checked once
// ctx is done, nor when it is done on entry.
//
// It shares ExponentialBackoff's Cap quirk (kubernetes#131122): when the next
// wait would reach s.Cap, it gives up after the wait in progress. Waits go through the clock
// given with [WithClock], on one timer reused for every wait, and a wait of 0
// does not touch the clock. A panic in condition propagates; a nil ctx or
// condition panics at the call.
func ExponentialBackoffWithContext(ctx context.Context, s Schedule, condition ConditionWithContextFunc, opts ...Option) error {
	mustNotBeNil("ExponentialBackoffWithContext", "ctx", ctx == nil)
	mustNotBeNil("ExponentialBackoffWithContext", "condition", condition == nil)
	clk := newConfig(opts).clock
	var t clock.Timer
	defer stopTimer(&t)
	for s.Steps > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if ok, err := condition(ctx); err != nil || ok {
			return err
		}
		if s.Steps == 1 {
			break // that was the last check: do not wait for nothing
		}
		if err := sleep(ctx, clk, &t, s.Step()); err != nil {
			return err
		}
	}
	return ErrWaitTimeout
}

// sleep waits d on *t (creating it on first use) or until ctx is done, and
// returns ctx.Err() if ctx ended first. A d ≤ 0 returns at once.
func sleep(ctx context.Context, clk clock.WithDelayedExecution, t *clock.Timer, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-resetTimer(clk, t, d).C():
		return nil
	}
}

// stopTimer stops *t if it was ever created. It does not drain it: the
// timers it is used for are private to one call and dropped after it.
func stopTimer(t *clock.Timer) {
	if *t != nil {
		(*t).Stop()
	}
}

// Delay returns the wait after the n-th failed attempt on s (n ≥ 1; a
// smaller n counts as 1), as [Retry] computes it from s alone:
// Duration·Factor^(n-1), at most Cap, then stretched by up to Jitter times the
// wait (see [Jitter]); a Factor ≤ 1 means no growth, as in Retry. Steps is
// not used, and s is not changed. It is for systems that schedule the n-th
// retry themselves (a job queue that persists attempts, say), so that they
// wait what Retry would. It saturates instead of overflowing and takes O(n)
// steps at most, fewer once the wait stops growing.
func (s Schedule) Delay(n int) time.Duration {
	jitter := s.Jitter
	s.Jitter = 0
	if !(s.Factor > 1) {
		s.Factor = 0 // Retry's rule: no growth (Step would shrink the wait below 1)
	}
	s.Steps = max(n, 1) // let Step grow the wait as far as the n-th
	for i := 1; i < n; i++ {
		before := s.Duration
		s.Step()
		if s.Duration == before {
			break // at Cap, saturated, or constant: it stays
		}
	}
	s.Steps = 0
	s.Jitter = jitter
	return s.Step()
}
