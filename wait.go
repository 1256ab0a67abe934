package backoff

import (
	"context"
	"k8s.io/utils/clock"
	"math"
	"time"
)

// The loop helpers of apimachinery's wait package: run f periodically until a
// stop channel closes or a context ends. They keep apimachinery's names and
// leading parameters, so existing calls compile unchanged, and add trailing
// Options: [WithClock] to run them on a FakeClock, [WithPanicHandler] to
// survive a panicking f.
//
// The shared rules, stated once here and on every function:
//
//   - The stop channel (or context) is checked before every run of f, not
//     only while waiting. Go's select picks at random among ready cases, so a
//     timer that fires at the same moment as stop could otherwise win the
//     wait and run f once more after stop; with the check it cannot.
//   - A stop channel already closed, or a context already done, when the
//     helper is called means f never runs.
//   - Sliding: the period starts when f returns, so runs are a period apart
//     plus f's run time. Non-sliding: the period starts when f starts, so it
//     includes f's run time (an f slower than the period runs again at once).
//   - A nil f, ctx or manager panics at the call, on the caller's goroutine,
//     naming the function and the parameter, before anything runs, even when
//     the stop channel is closed already and whatever [WithPanicHandler]
//     says: the handler is for panics of f, not for a missing f. A nil stop
//     channel is not an error: it never closes, as in apimachinery.

// loopConfig holds the options that the loop helpers read. Its zero value is
// the default: a panic in f propagates out of the helper.
type loopConfig struct {
	// onPanic, when set, receives what a panicking f panicked with; the loop
	// then carries on as if f had returned.
	onPanic func(recovered any)
}

// WithPanicHandler makes the loop helpers ([Until], [JitterUntil],
// [BackoffUntil], [Forever] and their context forms) recover a panic in f,
// pass the recovered value to h, and carry on with the schedule as if f had
// returned: h runs on the loop's goroutine, and the next run follows after
// the usual period (for a sliding loop, the period starts when h returns).
//
// Without this option a panic in f propagates out of the helper, which stops
// the loop and, unless the caller recovers it, crashes the program. That is
// Kubernetes' behaviour too: its loops call runtime.HandleCrash, which logs
// the panic and panics again unless the process turned ReallyCrash off.
//
// h may not be nil: WithPanicHandler panics if it is. The option does not
// concern [Retry], the poll functions or [ExponentialBackoff], whose callbacks
// return errors and whose panics always propagate.
func WithPanicHandler(h func(recovered any)) Option {
	if h == nil {
		badArgument("WithPanicHandler", "h must not be nil", h)
	}
	return valueOption(optionPanicHandler, h)
}

// NeverStop is a stop channel that is never closed, for the loop helpers that
// take one. It is apimachinery's wait.NeverStop; [Forever] uses it. Receiving
// from it blocks forever; do not close it.
var NeverStop <-chan struct{} = make(chan struct{})

// Forever runs f every period, for ever: it is [Until] with [NeverStop]. It
// returns only if f panics (the panic propagates unless [WithPanicHandler] is
// given, in which case Forever never returns).
//
// A period ≤ 0 runs f back to back, and a nil f panics at the call. Forever
// is apimachinery's wait.Forever with trailing options.
func Forever(f func(), period time.Duration, opts ...Option) {
	mustNotBeNil("Forever", "f", f == nil)
	jitterUntil(f, period, 0, true, NeverStop, opts)
}

// Until runs f every period until stopCh is closed; it blocks until then. The
// period is sliding: it starts when f returns. Until is [JitterUntil] with no
// jitter and sliding = true, as apimachinery's wait.Until is.
//
// f runs once straight away, unless stopCh is already closed, in which case
// it never runs. stopCh is checked again before every run, so f never runs
// after stopCh is closed, even when the period ends at the same moment. A
// period ≤ 0 runs f back to back. A panic in f propagates unless
// [WithPanicHandler] is given; a nil f panics at the call.
//
// The wait goes through the clock given with [WithClock]. On a FakeClock each
// wait, a zero one included, ends only when the clock is stepped (Step(0) is
// enough for a zero period).
func Until(f func(), period time.Duration, stopCh <-chan struct{}, opts ...Option) {
	mustNotBeNil("Until", "f", f == nil)
	jitterUntil(f, period, 0, true, stopCh, opts)
}

// UntilWithContext runs f(ctx) every period until ctx is done; it blocks until
// then. It is [Until] with a context instead of a stop channel: f never runs
// if ctx is already done, and never runs once more after ctx ends. A nil ctx
// or f panics at the call.
func UntilWithContext(ctx context.Context, f func(context.Context), period time.Duration, opts ...Option) {
	mustNotBeNil("UntilWithContext", "ctx", ctx == nil)
	mustNotBeNil("UntilWithContext", "f", f == nil)
	jitterUntilWithContext(ctx, f, period, 0, true, opts)
}

// NonSlidingUntil runs f every period until stopCh is closed; it blocks until
// then. Unlike [Until], the period starts when f starts, so it includes f's
// run time: with a period of 1s and an f that takes 300ms, runs start 1s
// apart (Until would start them 1.3s apart), and an f slower than the period
// runs again as soon as it returns. Otherwise it behaves as Until: f runs at
// once, never after stopCh is closed, and back to back for a period ≤ 0; a
// nil f panics at the call.
func NonSlidingUntil(f func(), period time.Duration, stopCh <-chan struct{}, opts ...Option) {
	mustNotBeNil("NonSlidingUntil", "f", f == nil)
	jitterUntil(f, period, 0, false, stopCh, opts)
}

// NonSlidingUntilWithContext is [NonSlidingUntil] with a context instead of a
// stop channel: it runs f(ctx) every period, the period including f's run
// time, until ctx is done. A nil ctx or f panics at the call.
func NonSlidingUntilWithContext(ctx context.Context, f func(context.Context), period time.Duration, opts ...Option) {
	mustNotBeNil("NonSlidingUntilWithContext", "ctx", ctx == nil)
	mustNotBeNil("NonSlidingUntilWithContext", "f", f == nil)
	jitterUntilWithContext(ctx, f, period, 0, false, opts)
}

// JitterUntil runs f every period, stretched by jitter, until stopCh is
// closed; it blocks until then. Each wait is [Jitter](period, jitterFactor): a
// random duration in [period, period + jitterFactor·period), drawn afresh for
// every run, so that many processes started together drift apart.
//
// A jitterFactor ≤ 0 (or NaN) means no jitter: every wait is exactly period.
// apimachinery's JitterUntil means the same, but its [Jitter] treats a factor
// ≤ 0 as 1.0; ours never does. A period ≤ 0 counts as 0 and runs f back to
// back. The wait saturates instead of overflowing.
//
// If sliding is true the period starts when f returns; if false it starts
// when f starts, so it includes f's run time. f runs once straight away,
// unless stopCh is already closed, in which case it never runs; stopCh is
// checked again before every run, so f never runs after stopCh is closed,
// even when the wait ends at the same moment. A panic in f propagates unless
// [WithPanicHandler] is given; a nil f panics at the call. Waits go through
// the clock given with [WithClock].
func JitterUntil(f func(), period time.Duration, jitterFactor float64, sliding bool, stopCh <-chan struct{}, opts ...Option) {
	mustNotBeNil("JitterUntil", "f", f == nil)
	jitterUntil(f, period, jitterFactor, sliding, stopCh, opts)
}

// jitterUntil is JitterUntil once its arguments are checked, for every helper
// that takes a stop channel and a period.
func jitterUntil(f func(), period time.Duration, jitterFactor float64, sliding bool, stopCh <-chan struct{}, opts []Option) {
	jitterUntilWithContext(ContextForChannel(stopCh), func(context.Context) { f() }, period, jitterFactor, sliding, opts)
}

// JitterUntilWithContext is [JitterUntil] with a context instead of a stop
// channel: it runs f(ctx) every jittered period until ctx is done. f never
// runs if ctx is already done, and never runs once more after ctx ends. A nil
// ctx or f panics at the call.
func JitterUntilWithContext(ctx context.Context, f func(context.Context), period time.Duration, jitterFactor float64, sliding bool, opts ...Option) {
	mustNotBeNil("JitterUntilWithContext", "ctx", ctx == nil)
	mustNotBeNil("JitterUntilWithContext", "f", f == nil)
	jitterUntilWithContext(ctx, f, period, jitterFactor, sliding, opts)
}

// jitterUntilWithContext is JitterUntilWithContext once its arguments are
// checked, for every helper that takes a period.
func jitterUntilWithContext(ctx context.Context, f func(context.Context), period time.Duration, jitterFactor float64, sliding bool, opts []Option) {
	cfg := newConfig(opts)
	p := pacer{jittered: jitteredManager{clock: cfg.clock, period: max(period, 0), factor: jitterFactor}}
	loop(ctx, f, &p, sliding, cfg.loop)
}

// BackoffUntil runs f until stopCh is closed, waiting between runs for the
// timer that manager.Backoff returns; it blocks until stopCh is closed. With
// [NewExponentialBackoffManager] the waits grow after each run and shrink
// back after a quiet spell, which is how client-go's reflector paces its
// re-lists.
//
// If sliding is true, manager.Backoff is called after f returns, so the wait
// starts then; if false, it is called before f runs, so the wait includes f's
// run time. f runs once straight away, unless stopCh is already closed, in
// which case it never runs; stopCh is checked again before every run, so f
// never runs after stopCh is closed, even when the timer fires at the same
// moment. When stopCh closes during a wait, BackoffUntil stops the timer and
// discards a tick it may hold, so the manager can be reused. A panic in f
// propagates unless [WithPanicHandler] is given; a nil f or manager (a typed
// nil included) panics at the call.
//
// The waits are the manager's timers, on the manager's clock: the clock
// option of BackoffUntil itself is not used.
func BackoffUntil(f func(), manager BackoffManager, sliding bool, stopCh <-chan struct{}, opts ...Option) {
	mustNotBeNil("BackoffUntil", "f", f == nil)
	mustNotBeNil("BackoffUntil", "manager", isNilValue(manager))
	backoffUntil(ContextForChannel(stopCh), func(context.Context) { f() }, manager, sliding, opts)
}

// BackoffUntilWithContext is [BackoffUntil] with a context instead of a stop
// channel: it runs f(ctx), waiting for manager's timer between runs, until ctx
// is done. f never runs if ctx is already done, and never runs once more
// after ctx ends. A nil ctx, f or manager (a typed nil included) panics at
// the call.
func BackoffUntilWithContext(ctx context.Context, f func(context.Context), manager BackoffManager, sliding bool, opts ...Option) {
	mustNotBeNil("BackoffUntilWithContext", "ctx", ctx == nil)
	mustNotBeNil("BackoffUntilWithContext", "f", f == nil)
	mustNotBeNil("BackoffUntilWithContext", "manager", isNilValue(manager))
	backoffUntil(ctx, f, manager, sliding, opts)
}

// backoffUntil is BackoffUntilWithContext once its arguments are checked.
func backoffUntil(ctx context.Context, f func(context.Context), manager BackoffManager, sliding bool, opts []Option) {
	p := pacer{manager: manager}
	loop(ctx, f, &p, sliding, newConfig(opts).loop)
}

// pacer gives the loop its timers: the manager's, or for the jittered
// helpers a jitteredManager of the loop's own, which, unlike one behind a
// BackoffManager, stays on the helper's stack (see BenchmarkLoopOptions).
type pacer struct {
	manager  BackoffManager // nil: jittered
	jittered jitteredManager
}

// next returns the timer of the next wait.
func (p *pacer) next() clock.Timer {
	if p.manager != nil {
		return p.manager.Backoff()
	}
	return p.jittered.Backoff()
}

// loop is the one loop behind every helper above.
func loop(ctx context.Context, f func(context.Context), p *pacer, sliding bool, cfg loopConfig) {
	var t clock.Timer
	defer func() {
		// Stop the timer and discard a tick it may already hold, so that a
		// manager whose timer is reused does not hand the next loop a stale
		// tick. The receive must not block: a timer that was stopped in time
		// holds nothing, and under Go 1.23 timer semantics never will.
		if t != nil && !t.Stop() {
			select {
			case <-t.C():
			default:
			}
		}
	}()
	for {
		// The check that keeps f from running after stop (see the top of
		// this file): the select below may have taken the timer's tick even
		// though ctx was done too.
		if ctx.Err() != nil {
			return
		}
		if !sliding {
			t = p.next()
		}
		runOnce(ctx, f, cfg.onPanic)
		if sliding {
			t = p.next()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// runOnce calls f, recovering a panic only when there is a handler for it.
func runOnce(ctx context.Context, f func(context.Context), onPanic func(any)) {
	if onPanic != nil {
		defer func() {
			if r := recover(); r != nil {
				onPanic(r)
			}
		}()
	}
	f(ctx)
}

// ContextForChannel returns a context that is done when stopCh is closed,
// for passing a stop channel where a context is expected. Its Err is
// context.Canceled once stopCh is closed and nil before; it has no deadline
// and no values. A nil stopCh gives a context that is never done.
//
// It is apimachinery's wait.ContextForChannel. Like it, it starts no
// goroutine and needs no cancel function. It is safe for concurrent use.
func ContextForChannel(stopCh <-chan struct{}) context.Context {
	if stopCh == NeverStop {
		// Neither ever closes, but a wait on a nil channel blocks durably in a
		// testing/synctest bubble, and one on NeverStop, made at package
		// initialisation outside every bubble, does not: the bubble's clock
		// would never advance. Done may be nil for a context that never ends.
		stopCh = nil
	}
	return stopContext{stop: stopCh}
}

// stopContext is a context that ends when a stop channel closes.
type stopContext struct{ stop <-chan struct{} }

func (c stopContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c stopContext) Done() <-chan struct{}       { return c.stop }
func (c stopContext) Value(any) any               { return nil }

func (c stopContext) Err() error {
	select {
	case <-c.stop:
		return context.Canceled
	default:
		return nil
	}
}

// BackoffManager paces [BackoffUntil]: before or after every run of f (see
// sliding), the loop calls Backoff and waits for the timer it returns. It is
// apimachinery's wait.BackoffManager, method for method, so managers written
// for apimachinery work here and ours work there.
//
// Backoff may return the same timer every time, Reset to the next delay (both
// managers of this package do, to allocate nothing per run). A caller must
// therefore have received from, or stopped, the previous timer before it
// calls Backoff again, and one manager can pace only one loop at a time.
// Implementations need not be safe for concurrent use.
type BackoffManager interface {
	// Backoff returns a timer that fires when the next run may start.
	Backoff() clock.Timer
}

// NewExponentialBackoffManager returns a [BackoffManager] whose delays grow
// exponentially and shrink back after a quiet spell, read on the clock given
// with [WithClock]. It is apimachinery's wait.NewExponentialBackoffManager,
// with the clock passed as WithClock(c) instead of as the last argument.
//
// The first delay is initBackoff; each later one is the previous times
// backoffFactor, until it reaches maxBackoff, where it stays. Each delay is
// then stretched by [Jitter](delay, jitter), so the wait can exceed maxBackoff
// by up to jitter·maxBackoff, as in Kubernetes. If Backoff was last called
// more than resetDuration ago, the delays start again from initBackoff: a
// loop that ran quietly for a while does not inherit an old, long delay.
// resetDuration is measured between calls of Backoff, so for a sliding
// [BackoffUntil] it counts f's run time (an f that itself ran for longer than
// resetDuration resets the delay too).
//
// initBackoff must be positive, maxBackoff 0 (no cap) or at least
// initBackoff, resetDuration not negative (0 resets whenever any time passed
// between calls), and backoffFactor and jitter finite and not negative; a
// backoffFactor of 0 means constant delays, and one below 1 shrinks them,
// exactly as [Schedule.Step] does, which computes the delays. Other values
// make it panic. The delays saturate instead of overflowing.
//
// The manager is not safe for concurrent use: it hands out one timer, which
// only one loop can wait on.
//
// apimachinery deprecated this constructor in favour of its newer
// Backoff.DelayWithReset and Timer API; this package keeps the manager form,
// which is what BackoffUntil takes in both.
func NewExponentialBackoffManager(initBackoff, maxBackoff, resetDuration time.Duration, backoffFactor, jitter float64, opts ...Option) BackoffManager {
	const where = "NewExponentialBackoffManager"
	mustBePositive(where, "initBackoff", initBackoff)
	mustNotBeNegative(where, "maxBackoff", maxBackoff)
	if maxBackoff > 0 && maxBackoff < initBackoff {
		badArgument(where, "maxBackoff must be 0 or at least initBackoff ("+initBackoff.String()+")", maxBackoff)
	}
	mustNotBeNegative(where, "resetDuration", resetDuration)
	mustBeFactor(where, "backoffFactor", backoffFactor)
	mustBeFactor(where, "jitter", jitter)
	clk := newConfig(opts).clock
	initial := Schedule{
		Duration: initBackoff,
		Factor:   backoffFactor,
		Jitter:   jitter,
		// Step stops growing the delay once Steps runs out; with this many
		// it never does in practice, as in Kubernetes.
		Steps: math.MaxInt32,
		Cap:   maxBackoff,
	}
	return &exponentialManager{
		clock:      clk,
		initial:    initial,
		schedule:   initial,
		resetAfter: resetDuration,
		last:       clk.Now(),
	}
}

// exponentialManager is the BackoffManager of NewExponentialBackoffManager.
type exponentialManager struct {
	clock      clock.WithDelayedExecution
	initial    Schedule // what schedule returns to after a quiet spell
	schedule   Schedule // the delays still to come
	resetAfter time.Duration
	last       time.Time // when Backoff was last called (or the manager made)
	timer      clock.Timer
}

// Backoff returns the manager's timer, set to the next delay.
func (m *exponentialManager) Backoff() clock.Timer {
	now := m.clock.Now()
	if now.Sub(m.last) > m.resetAfter {
		m.schedule = m.initial
	}
	m.last = now
	return resetTimer(m.clock, &m.timer, m.schedule.Step())
}

// NewJitteredBackoffManager returns a [BackoffManager] whose every delay is
// [Jitter](duration, jitter): duration plus a random part of up to
// jitter·duration, drawn afresh each time, read on the clock given with
// [WithClock]. [JitterUntil] is [BackoffUntil] with such a manager. It is
// apimachinery's wait.NewJitteredBackoffManager, with the clock passed as
// WithClock(c) instead of as the last argument.
//
// duration must not be negative (0 means no wait), and jitter must be finite
// and not negative (0 means no jitter); other values make it panic.
// apimachinery accepts a negative jitter and treats it as 0; here that is a
// programming error, caught when the manager is made. The delays saturate
// instead of overflowing.
//
// The manager is not safe for concurrent use: it hands out one timer, which
// only one loop can wait on.
//
// apimachinery deprecated this constructor too, in favour of
// Backoff{Duration: d, Jitter: j}.Timer(); this package keeps the manager
// form, which is what BackoffUntil takes.
func NewJitteredBackoffManager(duration time.Duration, jitter float64, opts ...Option) BackoffManager {
	const where = "NewJitteredBackoffManager"
	mustNotBeNegative(where, "duration", duration)
	mustBeFactor(where, "jitter", jitter)
	return &jitteredManager{clock: newConfig(opts).clock, period: duration, factor: jitter}
}

// jitteredManager is the BackoffManager of NewJitteredBackoffManager and of
// JitterUntil. JitterUntil builds it directly, because its period and factor
// arrive at call time and are clamped rather than rejected: a negative period
// counts as 0, and Jitter ignores a factor ≤ 0 or NaN.
type jitteredManager struct {
	clock  clock.WithDelayedExecution
	period time.Duration
	factor float64
	timer  clock.Timer
}

// Backoff returns the manager's timer, set to the next jittered period.
func (m *jitteredManager) Backoff() clock.Timer {
	return resetTimer(m.clock, &m.timer, Jitter(m.period, m.factor))
}

// resetTimer sets *t to fire after d, creating it on first use; the managers
// reuse one timer so that a loop allocates nothing per run.
func resetTimer(clk clock.WithDelayedExecution, t *clock.Timer, d time.Duration) clock.Timer {
	if *t == nil {
		*t = clk.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	return *t
}
