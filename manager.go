package backoff

import (
	"math"
	"time"

	"k8s.io/utils/clock"
)

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
