package backoff

import (
	"context"
	"errors"
	"github.com/retrykit/backoff/internal/optionhook"
	"k8s.io/utils/clock"
	"strconv"
	"strings"
	"time"
)

// retryConfig holds the options that Retry reads. Its zero value is the
// default: no elapsed-time budget, no notify hook, every error retryable
// except a [Permanent] one, proportional jitter, and Retry-After hints
// honoured up to [DefaultMaxRetryAfter].
type retryConfig struct {
	maxElapsed   time.Duration // 0: no budget
	sinceFailure bool          // maxElapsed counts from the first failure, not the call
	// minAttempt is the least time before ctx's deadline an attempt may
	// start with; attemptTimeout bounds each attempt (0: none).
	minAttempt, attemptTimeout time.Duration
	notify                     func(attempt int, err error, next time.Duration)
	retryable                  func(error) bool // nil: every error is
	jitter                     JitterKind
	// maxRetryAfter bounds Retry-After hints; 0 means DefaultMaxRetryAfter,
	// unless ignoreHints is set.
	maxRetryAfter time.Duration
	ignoreHints   bool
	pacer         Pacer // WithPacer's; also read by RunWorkers
	hedge         hedgeConfig
}

func init() {
	optionhook.Notify = func(opts any, attempt int, err error, next time.Duration) {
		var cfg config
		cfg.apply(opts.([]Option))
		if cfg.retry.notify != nil {
			cfg.retry.notify(attempt, err, next)
		}
	}
}

// ErrAttemptsExhausted is the [RetryError.Reason] when [Retry] made the
// Schedule's Steps attempts and all failed.
var ErrAttemptsExhausted = errors.New("backoff: attempts exhausted")

// ErrMaxElapsedTime is the [RetryError.Reason] when [Retry] stopped because
// the next attempt would start after the budget of [WithMaxElapsedTime].
var ErrMaxElapsedTime = errors.New("backoff: elapsed-time budget spent")

// RetryError is the error [Retry] returns when it gives up on fn: attempts
// or time ran out, or ctx ended. errors.Is and errors.As see through it to
// both the last error fn returned and the reason, so
//
//	errors.Is(err, io.ErrUnexpectedEOF)   // what fn last failed with
//	errors.Is(err, context.Canceled)      // why Retry stopped
//
// both hold after a cancelled retry of a failing read. When ctx was ended
// with a cause (context.WithCancelCause), errors.Is matches the cause too.
//
// Retry never modifies a RetryError after returning it, so it may be read
// from any goroutine. A RetryError built by hand needs only the fields it
// has: a nil Last or Reason is left out of the message and of Unwrap.
type RetryError struct {
	// Attempts is how many times fn was called: 0 when ctx was done before
	// the first attempt. With [WithHedge] it counts the hedges sent too.
	Attempts int
	// Last is the error of the last attempt, or nil when there was none.
	Last error
	// Reason says why Retry stopped: ErrAttemptsExhausted,
	// ErrMaxElapsedTime, ErrRetryBudgetExhausted, ErrDeadlineWouldPass, or
	// the context's error (context.Canceled or context.DeadlineExceeded).
	Reason error

	cause error // context.Cause, when it says more than Reason
}

// Error says how many attempts were made, why Retry stopped and what the last
// attempt returned, in one line.
func (e *RetryError) Error() string {
	var b strings.Builder
	b.WriteString("backoff: retry stopped after ")
	b.WriteString(strconv.Itoa(e.Attempts))
	if e.Attempts == 1 {
		b.WriteString(" attempt")
	} else {
		b.WriteString(" attempts")
	}
	if e.Reason != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Reason.Error(), "backoff: "))
	}
	if e.cause != nil {
		b.WriteString(" (")
		b.WriteString(e.cause.Error())
		b.WriteString(")")
	}
	if e.Last != nil {
		b.WriteString("; last error: ")
		b.WriteString(e.Last.Error())
	}
	return b.String()
}

// Unwrap returns the last error, the reason and the context's cause, those
// that are set, for errors.Is and errors.As.
func (e *RetryError) Unwrap() []error {
	errs := make([]error, 0, 3)
	for _, err := range [...]error{e.Last, e.Reason, e.cause} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// WithMaxElapsedTime gives [Retry] a time budget d, measured on its clock from
// when Retry is called: Retry gives up, with [ErrMaxElapsedTime], instead of
// waiting for an attempt that would start more than d after the call. It
// bounds when attempts start, not how long one runs; give fn a context with
// a deadline for that. d = 0 means no budget (the default); a negative d
// makes it panic.
func WithMaxElapsedTime(d time.Duration) Option {
	mustNotBeNegative("WithMaxElapsedTime", "d", d)
	return durationOption(optionMaxElapsedTime, d)
}

// WithNotify makes [Retry] call notify after every failed attempt that it is
// going to retry, with the attempt's number (1 for the first), its error and
// the wait before the next attempt, typically to log them. It is not called
// for the attempt Retry gives up after, nor for a success. With [WithHedge],
// it is called once per failed attempt and its hedges, with the attempt's
// number (hedges not counted) and the error of whichever failed last.
//
// notify runs on Retry's goroutine after the wait has been set on the clock
// and before Retry starts waiting, so the wait includes notify's run time.
// That order lets a test step a FakeClock by next from inside notify and have
// the next attempt follow at once (see the Examples). notify may not be nil:
// WithNotify panics if it is.
func WithNotify(notify func(attempt int, err error, next time.Duration)) Option {
	if notify == nil {
		badArgument("WithNotify", "notify must not be nil", notify)
	}
	return valueOption(optionNotify, notify)
}

// WithRetryable makes [Retry] retry only the errors for which retryable
// returns true: any other error ends Retry at once and is returned as fn
// returned it. A [Permanent] error ends Retry whatever retryable says. By
// default every other error is retryable. retryable runs on Retry's
// goroutine, and with [WithHedge] on a hedge's too, concurrently; it may not
// be nil: WithRetryable panics if it is.
func WithRetryable(retryable func(error) bool) Option {
	if retryable == nil {
		badArgument("WithRetryable", "retryable must not be nil", retryable)
	}
	return valueOption(optionRetryable, retryable)
}

// Retry calls fn until it succeeds, waiting between attempts as s says, and
// returns nil on success. It is for retry loops in application code: an HTTP
// call, a database transaction. It blocks until it returns.
//
// # Attempts
//
// With s.Steps > 0, fn is called at most s.Steps times; with s.Steps ≤ 0,
// until it succeeds, returns a [Permanent] error, or ctx is done. A schedule
// that would retry without bound and without waiting (s.Steps ≤ 0 and
// s.Duration ≤ 0, the zero Schedule among them) would spin: Retry follows
// [DefaultRetry] instead (5 attempts, 10 ms apart). So the zero Schedule
// means 5 attempts to Retry, but no attempt at all to [OnError] and
// [ExponentialBackoff], which keep Kubernetes' rule (see [Schedule]). There
// is no limit on the time spent unless [WithMaxElapsedTime] sets one.
//
// # Errors
//
// An error marked with [Permanent], or one that [WithRetryable]'s predicate
// rejects, ends Retry at once and is returned as fn returned it, the
// Permanent mark included: [IsPermanent] still reports it, and errors.Is and
// errors.As see through it to the error inside. Retry keeps the mark on
// purpose (cenkalti/backoff v4 and v5 return the error inside it instead):
// a caller that retries in turn, such as an outer Retry, or [RunWorkers]
// when the handler returns Retry's error, then stops too, instead of
// retrying an error already judged not worth it. So compare Retry's error
// with errors.Is, never with ==.
//
// When Retry gives up on an error worth retrying, it returns a [*RetryError]
// that says how many attempts were made and why it stopped:
// [ErrAttemptsExhausted], [ErrMaxElapsedTime] (see [WithMaxElapsedTime]),
// [ErrRetryBudgetExhausted] (see [WithRetryBudget]), or ctx's error.
// errors.Is and errors.As reach both that reason and fn's last error through
// it, and its Last field holds that error as fn returned it.
//
// # Waits
//
// Before attempt k+1 it waits s.Duration·s.Factor^(k-1), capped at s.Cap (0:
// no cap), then jittered as [WithJitterKind] says: by default up to s.Jitter
// times the wait is added, as [Schedule.Step] does. A Factor ≤ 1 (or NaN)
// means constant waits, and a negative Duration counts as 0. Unlike
// [ExponentialBackoff], reaching Cap never ends the retries: the waits stay
// at Cap. With no jitter, s = {10ms, ×2, Steps 5} calls fn at 0, 10, 30, 70
// and 150 ms. An error that carries a [RetryAfter] hint replaces the wait
// that follows it with the hint, bounded by [WithMaxRetryAfter]; the
// schedule still advances, so later waits are as if there had been no hint.
//
// # Deadlines
//
// Retry never starts a wait that would end at or after ctx's deadline, nor
// one that would leave the next attempt less than [WithMinAttemptTime]:
// it returns at once instead of sleeping into the deadline, with a
// [*RetryError] whose Last is fn's last error and whose Reason is
// [ErrDeadlineWouldPass], which errors.Is also matches with
// context.DeadlineExceeded. The time left is read on the real clock (see
// [WithClock]); reading it costs one ctx.Deadline() per wait.
// [WithAttemptTimeout] bounds each attempt, and
// [WithMaxElapsedTimeSinceFirstFailure] counts a budget from the first
// failure rather than the call.
//
// # Timers
//
// Every wait is a timer of the clock given with [WithClock], reused for the
// whole call, and selected against ctx.Done(); a wait of 0 does not touch the
// clock. When ctx is done during a wait, Retry returns at once, and before an
// attempt fn is not called once ctx is done (nor at all if ctx is done on
// entry). The returned [*RetryError] then matches with errors.Is both ctx's
// error and fn's last error. An attempt that fails while ctx ends returns
// the same way; one that succeeds returns nil.
//
// fn receives ctx. A panic in fn propagates. Retry allocates nothing per
// attempt once its timer exists, beyond what fn and the hooks allocate (and
// a closure's own allocation: see Hedging). It
// panics, before the first attempt, if ctx or fn is nil, if s.Factor is
// +Inf while s.Cap ≤ 0, or if s.Jitter is above [MaxRetryJitter]: those
// schedules ask for waits of centuries, which can only be a mistake.
//
// # Hedging
//
// With [WithHedge](delay), an attempt that has not answered after delay
// gets a hedge: the same fn, called again on a goroutine of its own,
// beside it; [WithMaxHedges](n) allows up to n, the k-th k·delay after
// the attempt started (default 1), and [WithHedgeDelay] learns the delay
// from past latencies. The first success wins: Retry cancels the other
// attempts through their contexts (context.Canceled), waits for them to
// return, and returns nil; [RetryValue] returns the winner's value and hands
// a loser's that succeeded anyway to [WithHedgeRelease]. A [Permanent]
// error (or one [WithRetryable] rejects) from any of them ends the call at
// once, cancelling the others. When they all fail, the error of the last to
// fail is the attempt's, and Retry waits and retries as the schedule says:
// s.Steps counts attempts, hedges aside, and [RetryError.Attempts] counts
// both. Each hedge is charged to the [WithRetryBudget] budget as a retry and
// paced by [WithPacer]'s pacer; a refusal of either suppresses that hedge,
// and never cancels an attempt in flight. The end of ctx cancels them all.
//
// fn must then be safe for concurrent use. A panic in a hedge cancels the
// other attempts and is raised again on Retry's goroutine once they have
// returned. Each attempt runs under a
// context of its own, derived from ctx, that ends when the attempt
// returns, as with [WithAttemptTimeout]: a value that fn returns must not
// need its context afterwards. A hedged attempt whose hedge does not fire
// costs its context and its timer more than a plain one: three allocations
// on the real clock, whose timers are never reused across calls (one made
// in a testing/synctest bubble must not be reset outside it), fewer on a
// fake clock, whose timer is (see BenchmarkRetryHedgeNotFired). Since fn
// may run on another goroutine, the closure
// passed as fn is allocated on the heap when it captures variables, even
// without WithHedge: Go decides that when compiling Retry.
//
// # Clock waiters
//
// Retry registers at most one waiter with its clock at a time: the timer of
// the wait in progress, from just before [WithNotify]'s hook runs until the
// wait ends. With [WithHedge], an attempt adds the timer of its hedge while
// it runs, and a hedge that is not the last the timer of the next. A test
// that runs Retry on another goroutine steps a FakeClock once HasWaiters
// reports it (or from the notify hook, as the Examples do); package
// backofftest's AutoStepClock does that for you.
func Retry(ctx context.Context, s Schedule, fn func(context.Context) error, opts ...Option) error {
	mustNotBeNil("Retry", "ctx", ctx == nil)
	mustNotBeNil("Retry", "fn", fn == nil)
	_, err := retry(ctx, s, fn, hedgeFn{fn: fn}, opts)
	return err
}

// retry is Retry, for Retry and RetryValue: fn makes the attempts on the
// caller's goroutine, h the hedges (see hedgedAttempt).
func retry(ctx context.Context, s Schedule, fn func(context.Context) error, h hedgeFn, opts []Option) (roundResult, error) {
	var out roundResult
	s = retrySchedule(s)
	var cfg config
	cfg.apply(opts)
	rc := &cfg.retry
	clk := cfg.clock
	var start time.Time // read only for an elapsed-time budget
	if rc.maxElapsed > 0 && !rc.sinceFailure {
		start = clk.Now()
	}
	gate := newBudgetGate(cfg.budget.budget, clk, start, rc.maxElapsed > 0)
	delays := newDelaySequence(s, rc.jitter)
	var t clock.Timer
	defer stopTimer(&t)
	var last error
	hedges := 0 // hedges sent so far, which RetryError.Attempts counts
	for attempt := 1; ; attempt++ {
		// Attempt: never once ctx is done. The first counts as a request of
		// the budget.
		if err := ctx.Err(); err != nil {
			return out, stoppedByContext(ctx, attempt-1+hedges, last)
		}
		if attempt == 1 {
			if rc.minAttempt > 0 && deadlineTooClose(ctx, 0, rc.minAttempt) {
				return out, &RetryError{Reason: ErrDeadlineWouldPass}
			}
			gate.request(0)
		}
		var err error
		switch {
		case rc.hedge.delay > 0:
			out = hedgedAttempt(ctx, fn, h, rc, clk, gate.budget)
			hedges += out.hedges
			if !out.started {
				return out, stoppedByContext(ctx, attempt-1+hedges, last) // ctx ended while waiting for the pacer
			}
			err = out.err
		case rc.pacer != nil:
			var started bool
			if err, started = pacedAttempt(ctx, rc.pacer, fn, clk, rc.attemptTimeout); !started {
				return out, stoppedByContext(ctx, attempt-1, last) // ctx ended while waiting for the pacer
			}
		case rc.attemptTimeout > 0:
			actx := withAttemptTimeout(ctx, clk, rc.attemptTimeout)
			err = fn(actx)
			actx.release()
		default:
			err = fn(ctx)
		}
		if err == nil {
			return out, nil
		}
		last = err
		if attempt == 1 && rc.sinceFailure && rc.maxElapsed > 0 {
			start = clk.Now()
		}

		// Classify: an error that is not to be retried is returned as fn
		// returned it; an end of ctx or of the attempts stops here.
		permanent, hint, hinted := inspectError(err)
		if permanent || (rc.retryable != nil && !rc.retryable(err)) {
			return out, err
		}
		if ctx.Err() != nil {
			return out, stoppedByContext(ctx, attempt+hedges, err)
		}
		if s.Steps > 0 && attempt >= s.Steps {
			return out, &RetryError{Attempts: attempt + hedges, Last: err, Reason: ErrAttemptsExhausted}
		}

		// Wait: the schedule's, or the error's hint; with an elapsed-time
		// budget, no attempt may start past it.
		wait := delays.next()
		if hinted && !rc.ignoreHints {
			wait = clampDuration(hint, rc.hintLimit())
		}
		var elapsed time.Duration
		if rc.maxElapsed > 0 {
			elapsed = clk.Since(start)
			if addDuration(elapsed, wait) > rc.maxElapsed {
				return out, &RetryError{Attempts: attempt + hedges, Last: err, Reason: ErrMaxElapsedTime}
			}
		}

		// Deadline: no wait that would end at or after ctx's, nor one that
		// leaves the next attempt less than WithMinAttemptTime.
		if deadlineTooClose(ctx, wait, rc.minAttempt) {
			return out, &RetryError{Attempts: attempt + hedges, Last: err, Reason: ErrDeadlineWouldPass}
		}

		// Gate: the retry budget, if any, must allow the retry. It decides
		// at the reading just taken, if any.
		if !gate.retry(elapsed) {
			return out, refused(attempt+hedges, err)
		}

		// Sleep: the timer is set before notify runs, so that a test may
		// step a fake clock from notify (see WithNotify).
		var tick <-chan time.Time
		if wait > 0 {
			tick = resetTimer(clk, &t, wait).C()
		}
		if rc.notify != nil {
			rc.notify(attempt, err, wait)
		}
		if tick != nil {
			select {
			case <-ctx.Done():
				return out, stoppedByContext(ctx, attempt+hedges, err)
			case <-tick:
			}
		}
	}
}

// retrySchedule returns the schedule Retry follows for s: [DefaultRetry] for
// one that would retry without bound and without ever waiting (the zero
// Schedule among them), s otherwise. It panics on the two schedules whose
// waits could only be a mistake: an infinite Factor without a Cap (the second
// wait would be 292 years), and a Jitter above [MaxRetryJitter].
func retrySchedule(s Schedule) Schedule {
	if s.Steps <= 0 && s.Duration <= 0 {
		return DefaultRetry
	}
	if problem, got := retryScheduleProblem(s); problem != "" {
		badArgument("Retry", problem, got)
	}
	return s
}

// MaxRetryJitter is the largest Schedule.Jitter that [Retry] accepts: a wait
// stretched by up to MaxRetryJitter times itself. A larger Jitter, such as
// 1e308, would turn a 10 ms wait into centuries; Retry panics on it instead.
// [Schedule.Step] and [ExponentialBackoff] accept any Jitter, as Kubernetes
// does, and saturate instead of overflowing.
const MaxRetryJitter = 10

// stoppedByContext is Retry's error when ctx ended after the given number of
// attempts.
func stoppedByContext(ctx context.Context, attempts int, last error) error {
	e := &RetryError{Attempts: attempts, Last: last, Reason: ctx.Err()}
	if cause := context.Cause(ctx); cause != e.Reason {
		e.cause = cause
	}
	return e
}

// RetryValue is [Retry] for a fn that returns a value: it returns the value
// of the successful attempt and nil, or the zero T and the error Retry
// returns. Everything else is as for Retry; it panics if ctx or fn is nil.
//
// With [WithHedge], each attempt's value is its own until one wins: the
// winner's is returned, and a value that another attempt returned with a
// nil error after the winner (or after a [Permanent] error ended the call)
// is passed to [WithHedgeRelease]'s function, once, before RetryValue
// returns, or dropped without it.
func RetryValue[T any](ctx context.Context, s Schedule, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	mustNotBeNil("RetryValue", "ctx", ctx == nil)
	mustNotBeNil("RetryValue", "fn", fn == nil)
	// The first attempt of each round writes v on this goroutine; a hedge's
	// value comes back in out (see hedgedAttempt), so no two attempts
	// write one variable.
	var v T
	out, err := retry(ctx, s, func(ctx context.Context) error {
		r, err := fn(ctx)
		if err == nil {
			v = r
		}
		return err
	}, hedgeFn{value: valueFunc[T](fn)}, opts)
	if out.lateValue {
		if out.release != nil {
			out.release(v)
		}
		v = *new(T)
	}
	if out.hedgeWon {
		v, _ = out.value.(T) // a nil value of an interface type T stays nil
	}
	return v, err
}

// JitterKind selects how [Retry] randomises its waits, with [WithJitterKind].
// Jitter spreads the retries of many clients that failed together, so that
// they do not all come back at the same instant and fail again. The zero
// value is [ProportionalJitter].
//
// Each kind starts from the wait the Schedule gives: b = Duration·Factor^(k-1)
// capped at Cap. ProportionalJitter and SymmetricJitter read Schedule.Jitter;
// the others decide the spread themselves and ignore it.
type JitterKind int

const (
	// ProportionalJitter waits b plus a random part of up to Jitter·b:
	// [Jitter](b, Schedule.Jitter), Kubernetes' jitter and the default. The
	// wait lies in [b, b + Jitter·b), so with Cap > 0 it can exceed Cap by up
	// to Jitter·Cap; with Jitter ≤ 0 there is no jitter at all. Use it to
	// match Kubernetes' timing, or when the waits must not be shorter than
	// the schedule (a server asked for at least that long).
	ProportionalJitter JitterKind = iota

	// FullJitter waits a random duration in [0, b). It spreads clients the
	// most and, for many clients contending for one resource, finishes the
	// work soonest with the fewest calls (the finding of AWS's "Exponential
	// Backoff and Jitter"), at the price of sometimes retrying at once. Use
	// it for many clients hitting one overloaded service. The wait never
	// exceeds Cap.
	FullJitter

	// EqualJitter waits b/2 plus a random duration in [0, b/2): never less
	// than half the schedule, so a client never retries at once, with half
	// the spread of FullJitter. Use it when an immediate retry would be
	// wasteful but clients still need spreading. The wait never exceeds Cap.
	EqualJitter

	// DecorrelatedJitter waits a random duration between Duration and Factor
	// times the previous wait (the first time, Factor·Duration), capped at
	// Cap: each wait grows from the last one actually drawn, not from the
	// attempt count, so clients that collided once drift apart for good. With
	// Factor 3 it is AWS's "decorrelated jitter"; with Factor ≤ 1 it waits
	// Duration every time. Use it for long-running retry loops where
	// clients should not resynchronise. The wait never exceeds Cap (and is
	// Cap when Duration is above Cap).
	DecorrelatedJitter

	// SymmetricJitter waits b plus or minus up to Jitter·b: a random
	// duration in [b - Jitter·b, b + Jitter·b), centred on the schedule, so
	// that on average the waits add up to the schedule's. It is the jitter
	// of cenkalti/backoff's RandomizationFactor (±50% by default) and of
	// gRPC's connection backoff (±20%). A Jitter above 1 counts as 1 (waits
	// in [0, 2b)), so that no wait is negative; with Jitter ≤ 0 there is no
	// jitter at all. Like ProportionalJitter, it is applied after Cap, so
	// the wait can exceed Cap by up to Jitter·Cap, as cenkalti's can exceed
	// its MaxInterval. Use it to keep the timing of code that used either.
	SymmetricJitter

	numJitterKinds // the number of kinds, for validation
)

// String returns the kind's name, such as "FullJitter".
func (k JitterKind) String() string {
	switch k {
	case ProportionalJitter:
		return "ProportionalJitter"
	case FullJitter:
		return "FullJitter"
	case EqualJitter:
		return "EqualJitter"
	case DecorrelatedJitter:
		return "DecorrelatedJitter"
	case SymmetricJitter:
		return "SymmetricJitter"
	}
	return "JitterKind(" + strconv.Itoa(int(k)) + ")"
}

// WithJitterKind makes [Retry] jitter its waits as k says; the default is
// [ProportionalJitter], Kubernetes' jitter. It concerns Retry only:
// [Schedule.Step] and [ExponentialBackoff] always jitter proportionally, as
// in Kubernetes. A k that is not one of the JitterKind constants makes it
// panic.
func WithJitterKind(k JitterKind) Option {
	if k < 0 || k >= numJitterKinds {
		badArgument("WithJitterKind", "k must be one of the JitterKind constants", k)
	}
	return countOption(optionJitterKind, int(k))
}

// delaySequence computes Retry's waits. Unlike Schedule.Step, reaching the
// cap does not end it, and a factor ≤ 1 means constant waits.
type delaySequence struct {
	kind    JitterKind
	initial time.Duration // Schedule.Duration, ≥ 0
	factor  float64       // > 1, or 1 for constant waits
	jitter  float64       // for ProportionalJitter and SymmetricJitter
	limit   time.Duration // Schedule.Cap; ≤ 0: none
	base    time.Duration // the capped exponential wait for the next retry
	prev    time.Duration // DecorrelatedJitter: the last wait drawn
}

func newDelaySequence(s Schedule, kind JitterKind) delaySequence {
	initial := max(s.Duration, 0)
	factor := 1.0
	if s.Factor > 1 { // false for NaN
		factor = s.Factor
	}
	return delaySequence{
		kind:    kind,
		initial: initial,
		factor:  factor,
		jitter:  s.Jitter,
		limit:   s.Cap,
		base:    clampDuration(initial, s.Cap),
		prev:    initial,
	}
}

// next returns the wait before the next retry and advances the sequence. It
// never returns a negative wait, never overflows, and never exceeds the cap
// except by the jitter of ProportionalJitter and SymmetricJitter.
func (q *delaySequence) next() time.Duration {
	b := q.base
	if q.factor > 1 {
		q.base = clampDuration(scaleDuration(b, q.factor), q.limit)
	}
	switch q.kind {
	case FullJitter:
		return randDuration(b)
	case EqualJitter:
		half := b / 2
		return b - half + randDuration(half)
	case DecorrelatedJitter:
		hi := max(scaleDuration(q.prev, q.factor), q.initial)
		d := clampDuration(q.initial+randDuration(hi-q.initial), q.limit)
		q.prev = d
		return d
	case SymmetricJitter:
		if !(q.jitter > 0) { // NaN too
			return b
		}
		// The spread is at most b (Jitter above 1 counts as 1), so the
		// low end is never negative; min guards scaleDuration's float
		// rounding at the largest durations.
		spread := min(scaleDuration(b, min(q.jitter, 1)), b)
		return addDuration(b-spread, randDuration(addDuration(spread, spread)))
	default:
		return Jitter(b, q.jitter)
	}
}

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
	gate := budgetGate{budget: newConfig(opts).budget.budget}
	attempts := 0
	err := ExponentialBackoff(s, func() (bool, error) {
		// The gate is asked before each call, after the wait before it:
		// ExponentialBackoff has no step between its wait and the check.
		attempts++
		if attempts == 1 {
			gate.request(0)
		} else if !gate.retry(0) {
			return false, refused(attempts-1, last)
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
