package backoff_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// waitTimeout is how long, in real time, a test waits for the code under
// test before it fails. It is a safety net, not a timing assertion: on a
// FakeClock everything a test waits for happens as soon as the goroutines
// involved are scheduled, so a wait that lasts this long means a bug (a
// missed wake-up, a timer that was never armed, a wait on a clock nobody
// steps). It is short so that such a bug costs seconds, not go test's
// 10-minute timeout, and long enough for a loaded machine under -race.
const waitTimeout = 5 * time.Second

// fakeClockState is what a failed wait reports about a fake clock:
// testingclock.FakeClock and the tests' handshakeClock both have it.
type fakeClockState interface {
	Now() time.Time
	Waiters() int
}

// describeClock says where each clock stands and how many timers, tickers
// and sleeps wait on it, for the message of a failed wait: "0 waiters" on a
// clock the code under test should be waiting on points at a wait that
// ended too early, or was never set; waiters on a clock that nobody steps
// point at a wait that should not have been made.
func describeClock(clocks ...fakeClockState) string {
	if len(clocks) == 0 {
		return "no fake clock given"
	}
	parts := make([]string, len(clocks))
	for i, c := range clocks {
		parts[i] = fmt.Sprintf("fake clock at %s has %d waiter(s)", c.Now().Format(time.RFC3339Nano), c.Waiters())
	}
	return strings.Join(parts, "; ")
}

// waitFor returns the next value received from ch. If none comes within
// waitTimeout of real time, it fails the test at once, saying what did not
// happen (what completes "timed out waiting for ...") and the state of the
// given fake clocks. Every test that blocks waiting for the code under test
// waits through waitFor or waitForCall.
func waitFor[T any](t testing.TB, what string, ch <-chan T, clocks ...fakeClockState) T {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	select {
	case v := <-ch:
		return v
	case <-timeout.C:
		t.Fatalf("timed out (%v real time) waiting for %s; %s", waitTimeout, what, describeClock(clocks...))
	}
	var zero T
	return zero
}

// waitForCall runs wait (a WaitGroup's Wait, a function that drains a
// channel, ...) on a goroutine and waits for it to return, as waitFor does.
// On timeout the goroutine is left blocked: the test has failed anyway.
func waitForCall(t testing.TB, what string, wait func(), clocks ...fakeClockState) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait()
	}()
	waitFor(t, what, done, clocks...)
}
