package backoff

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// PollUntilContextCancel checks condition(ctx) every interval until it is
// met, returns an error, or ctx is done; it blocks until then. It returns nil
// when the condition is met, the condition's error as is, or ctx.Err() when
// ctx ends first. It is apimachinery's wait.PollUntilContextCancel with
// trailing options; the rest of apimachinery's Poll family (Poll,
// PollImmediate, PollInfinite, PollUntil, ... and their WithContext forms) is
// deprecated there and not repeated here. Poll and PollImmediate become
// PollUntilContextTimeout with immediate false and true; PollInfinite,
// PollUntil and their Immediate forms become PollUntilContextCancel (with
// [ContextForChannel] for a stop channel). They return the context's error
// where the old ones returned ErrWaitTimeout ([Interrupted] is true for
// both), and an old timeout of 0 (forever) is PollUntilContextCancel.
//
// If immediate is true the condition is checked once at once, before any
// wait, even if ctx is already done (as in Kubernetes: immediate guarantees
// at least one check); otherwise the first check is one interval after the
// call. ctx is checked again before every later check, so the condition is
// never checked after ctx ends, even when the interval ends at the same
// moment.
//
// The interval is not sliding: checks are due on a fixed grid, interval
// apart from the call, as with Kubernetes' ticker, so a check's run time
// counts towards the interval. A check that overruns one or more grid points
// is followed at once by one more check (the tick a ticker would have kept),
// and the grid points it overran are skipped.
//
// An interval ≤ 0 checks the condition back to back, as Kubernetes does: a
// busy loop that keeps a core busy until the condition is met or returns an
// error, or ctx ends. It does not touch the clock, so a FakeClock does not hold it back
// either. Give an interval > 0 unless the condition itself blocks until
// something changes.
//
// Waits go through the clock given with [WithClock], on one timer reused for
// every wait; a wait of 0 does not touch the clock. A panic in condition
// propagates; a nil ctx or condition panics at the call.
func PollUntilContextCancel(ctx context.Context, interval time.Duration, immediate bool, condition ConditionWithContextFunc, opts ...Option) error {
	mustNotBeNil("PollUntilContextCancel", "ctx", ctx == nil)
	mustNotBeNil("PollUntilContextCancel", "condition", condition == nil)
	return poll(ctx, newConfig(opts).clock, interval, immediate, condition)
}

// PollUntilContextTimeout is [PollUntilContextCancel] with a time limit: it
// checks condition(ctx) every interval until it is met (nil), returns an
// error (returned as is), or ctx is done or timeout has passed
// (context.DeadlineExceeded, as in Kubernetes). It blocks until then. A
// timeout ≤ 0 has passed already: with immediate set the condition is still
// checked once, as in Kubernetes. An interval ≤ 0 spins until the timeout, as
// for PollUntilContextCancel.
//
// The timeout is measured on the clock given with [WithClock], not with
// context.WithTimeout, which would always read the real clock: on a
// FakeClock it expires when the fake time reaches it. The condition receives
// a context derived from ctx that ends at the timeout too: its Err is
// context.DeadlineExceeded once the timeout has passed, and its Deadline
// reports the timeout's instant on that clock (or ctx's deadline if earlier).
// With the real clock this is what context.WithTimeout would give.
//
// The timeout is a waiter of the clock for the whole call, besides the timer
// of each wait: on a FakeClock, HasWaiters is true from the call on, and a
// test that runs it on another goroutine waits for Waiters() == 2 before
// stepping an interval (see [WithClock]).
func PollUntilContextTimeout(ctx context.Context, interval, timeout time.Duration, immediate bool, condition ConditionWithContextFunc, opts ...Option) error {
	mustNotBeNil("PollUntilContextTimeout", "ctx", ctx == nil)
	mustNotBeNil("PollUntilContextTimeout", "condition", condition == nil)
	clk := newConfig(opts).clock
	tctx := withClockTimeout(ctx, clk, timeout)
	defer tctx.release()
	return poll(tctx, clk, interval, immediate, condition)
}

// poll is the loop behind both Poll functions.
func poll(ctx context.Context, clk clock.WithDelayedExecution, interval time.Duration, immediate bool, condition ConditionWithContextFunc) error {
	// The grid starts when the call does, before an immediate check, as
	// Kubernetes' ticker does.
	start := clk.Now()
	checked := start // when the last check started: the tick it consumed
	if immediate {
		if ok, err := condition(ctx); err != nil || ok {
			return err
		}
	}
	var t clock.Timer
	defer stopTimer(&t)
	for {
		var wait time.Duration
		if interval > 0 {
			wait = nextTick(start, checked, interval).Sub(clk.Now())
		}
		if err := sleep(ctx, clk, &t, wait); err != nil {
			return err
		}
		// The tick and ctx's end may have come together, and the select in
		// sleep picks either: never check the condition once ctx is done.
		if err := ctx.Err(); err != nil {
			return err
		}
		checked = clk.Now()
		if ok, err := condition(ctx); err != nil || ok {
			return err
		}
	}
}

// nextTick returns the first point of the grid start + k·interval (k ≥ 1)
// after the instant at. A ticker that fired at or before at and was read at
// at delivers its next tick then. It saturates instead of overflowing.
func nextTick(start, at time.Time, interval time.Duration) time.Time {
	elapsed := max(at.Sub(start), 0)
	return start.Add(addDuration(elapsed-elapsed%interval, interval))
}

// withClockTimeout returns a context derived from parent that also ends, with
// context.DeadlineExceeded, when timeout has passed on clk. The caller
// releases it with release, after which its Err is context.Canceled, as after
// a context.WithTimeout's cancel. It is context.WithTimeout on an injected
// clock.
//
// What it allocates is what PollUntilContextTimeout costs beyond
// PollUntilContextCancel (see BenchmarkPollOptions): the context itself, and
// the clock's timer for the timeout with its callback, which is on the real
// clock time.AfterFunc's timer and clock.RealClock's wrapper around it. The
// timer is registered at once, so that the timeout is a waiter of the clock
// for the whole call, as PollUntilContextTimeout's doc promises. The rest is
// made only when used: the Done channel and the callback that ends the
// context with its parent, on the first call of Done; Err asks the parent
// itself. A condition that is met before the poll waits, and never calls
// Done, costs neither.
func withClockTimeout(parent context.Context, clk clock.WithDelayedExecution, timeout time.Duration) *clockTimeoutContext {
	c := &clockTimeoutContext{parent: parent, deadline: clk.Now().Add(max(timeout, 0)), hasDeadline: true}
	if timeout <= 0 {
		c.end(context.DeadlineExceeded)
		return c
	}
	// The callback only closes a channel: it may run inside a FakeClock's
	// Step, with the clock's lock held, so it must not call the clock.
	c.timer = clk.AfterFunc(timeout, c.expire)
	return c
}

// withAttemptTimeout is withClockTimeout for one attempt of a call that
// goes on doing real I/O (an HTTP request, a handler's calls): its Deadline
// reports the timeout's instant only when clk is the real clock, and the
// parent's deadline otherwise. Code that reads a context's deadline
// (net.Dialer, http.Transport, gRPC) compares it with the real clock, so a
// FakeClock's instant, months in the past or future, would fail its dial
// at once or bound nothing; the timeout itself still runs on clk.
func withAttemptTimeout(parent context.Context, clk clock.WithDelayedExecution, timeout time.Duration) *clockTimeoutContext {
	c := withClockTimeout(parent, clk, timeout)
	c.hasDeadline = sameClock(clk, clock.RealClock{})
	return c
}

// clockTimeoutContext is the context of withClockTimeout: its parent's
// values, and a Done channel closed at the first of the parent's end, the
// timeout, and release. It is safe for concurrent use.
type clockTimeoutContext struct {
	parent      context.Context
	deadline    time.Time
	hasDeadline bool        // whether Deadline reports deadline (see withAttemptTimeout)
	timer       clock.Timer // the timeout's; nil when it had passed on entry

	mu         sync.Mutex
	err        error         // set once, when the context ends
	done       chan struct{} // made by the first Done; closed when err is set
	stopParent func() bool   // stops the parent's callback that Done registered
}

// Value serves the parent's values, but through context.WithoutCancel, which
// hides the parent's own cancel state from context.Cause: Cause then reports
// this context's Err instead of the parent's (nil) cause.
func (c *clockTimeoutContext) Value(key any) any {
	return context.WithoutCancel(c.parent).Value(key)
}

func (c *clockTimeoutContext) Done() <-chan struct{} {
	c.mu.Lock()
	if c.done != nil {
		defer c.mu.Unlock()
		return c.done
	}
	c.done = make(chan struct{})
	done := c.done
	watch := c.err == nil
	if c.err != nil {
		close(c.done)
	}
	c.mu.Unlock()
	if watch && c.parent.Done() != nil {
		// The parent is asked, and the callback registered, without the
		// lock: a parent of another package may run the callback at once,
		// on this goroutine, or hold a lock of its own that the callback
		// waits behind.
		stop := context.AfterFunc(c.parent, func() { c.end(c.parent.Err()) })
		c.mu.Lock()
		ended := c.err != nil
		if !ended {
			c.stopParent = stop
		}
		c.mu.Unlock()
		if ended {
			stop()
		}
	}
	return done
}

// Err asks the parent itself, without the lock (see Done), rather than wait
// for the parent's callback, which Done registers only when it is needed.
func (c *clockTimeoutContext) Err() error {
	if err := c.ended(); err != nil {
		return err
	}
	if err := c.parent.Err(); err != nil {
		c.end(err)
	}
	return c.ended()
}

// ended returns the error the context ended with, or nil.
func (c *clockTimeoutContext) ended() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *clockTimeoutContext) Deadline() (time.Time, bool) {
	d, ok := c.parent.Deadline()
	if !c.hasDeadline || (ok && d.Before(c.deadline)) {
		return d, ok
	}
	return c.deadline, true
}

// expire ends the context at its timeout.
func (c *clockTimeoutContext) expire() { c.end(context.DeadlineExceeded) }

// release ends the context, if it has not ended, and stops its timer and the
// parent's callback.
func (c *clockTimeoutContext) release() {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Lock()
	c.endLocked(context.Canceled)
	stop := c.stopParent
	c.stopParent = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// end ends the context with err, unless it has ended already.
func (c *clockTimeoutContext) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(err)
}

func (c *clockTimeoutContext) endLocked(err error) {
	if c.err == nil {
		c.err = err
		if c.done != nil {
			close(c.done)
		}
	}
}
