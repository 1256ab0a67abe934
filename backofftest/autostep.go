// Package backofftest helps test code that waits through
// github.com/retrykit/backoff: it offers [AutoStepClock], a fake clock on
// which waiting takes no time, for tests that run Retry, the Poll functions
// or the loop helpers to completion and check what they did, with fake
// timestamps, without stepping the clock by hand.
//
// It needs only the standard library and k8s.io/utils/clock. For tests that
// must watch a wait in progress (what happens at 59 s of a one-minute
// delay), step a plain FakeClock instead, as the package's documentation of
// WithClock shows; Go 1.25's testing/synctest is the third way.
package backofftest

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
)

// AutoStepClock is a FakeClock on which waiting on a timer takes no time:
// when code reads the channel of one of its running timers (Timer.C), the
// clock first steps to that timer's deadline, so the timer has fired by the
// time the code selects on it. Retry, ExponentialBackoff, the Poll functions
// and the loop helpers then run to completion at once, on a goroutine of the
// test's or of the code under test, and read fake timestamps that say when
// each attempt would have happened.
//
// Only timers step the clock. AfterFunc callbacks (the delaying queues', the
// timeout of PollUntilContextTimeout) fire when the clock passes them, which
// a timer's step may do: a PollUntilContextTimeout of 10 s polling every
// second returns context.DeadlineExceeded after its tenth wait. A queue's
// delays still need Step (or a wait of some loop to step past them).
//
// Every method of FakeClock is available, so a test may still Step the clock
// itself. An AutoStepClock is safe for concurrent use; each goroutine that
// waits steps the shared clock, so two loops waiting at once advance it
// together to the earlier deadline first. Create one with
// [NewAutoStepClock].
type AutoStepClock struct {
	*testclock.FakeClock
}

// NewAutoStepClock returns an [AutoStepClock] whose time starts at start.
func NewAutoStepClock(start time.Time) *AutoStepClock {
	return &AutoStepClock{FakeClock: testclock.NewFakeClock(start)}
}

// NewTimer returns a timer of the fake clock that fires d from now; reading
// its channel steps the clock to its deadline first (see [AutoStepClock]).
func (c *AutoStepClock) NewTimer(d time.Duration) clock.Timer {
	return &autoStepTimer{Timer: c.FakeClock.NewTimer(d), clock: c.FakeClock, deadline: c.Now().Add(d)}
}

// After returns the channel of a new timer of d: the clock steps to its
// deadline at once.
func (c *AutoStepClock) After(d time.Duration) <-chan time.Time {
	return c.NewTimer(d).C()
}

// autoStepTimer is a timer of an AutoStepClock: a FakeClock timer and the
// deadline it was last set to.
type autoStepTimer struct {
	clock.Timer
	clock *testclock.FakeClock

	mu       sync.Mutex
	deadline time.Time
	stopped  bool
}

// Reset sets the timer to fire d from now, as FakeClock's does.
func (t *autoStepTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	t.deadline, t.stopped = t.clock.Now().Add(d), false
	t.mu.Unlock()
	return t.Timer.Reset(d)
}

// Stop stops the timer, as FakeClock's does; reading C then steps nothing.
func (t *autoStepTimer) Stop() bool {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	return t.Timer.Stop()
}

// C steps the clock to the deadline of a running timer, then returns its
// channel, on which the firing is then waiting.
func (t *autoStepTimer) C() <-chan time.Time {
	t.mu.Lock()
	deadline, stopped := t.deadline, t.stopped
	t.mu.Unlock()
	if now := t.clock.Now(); !stopped && !now.After(deadline) {
		t.clock.Step(deadline.Sub(now))
	}
	return t.Timer.C()
}
