package backoff

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestRetryBudgetAdvanceToTheHeadKeepsItsCounts: moving the window to the
// bucket that is already its head does nothing. That is the call a goroutine
// makes when it saw an older head, then lost the race to move the window to
// another goroutine before it took the lock. Moving again would file the
// head's counts in the history under the head's own index, which the window
// never sums, and start the head empty: the window would forget them and
// allow retries that do not fit.
func TestRetryBudgetAdvanceToTheHeadKeepsItsCounts(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	b := NewRetryBudget(1, 0, 10*time.Second, WithClock(fc))
	b.RecordRequest() // bucket 0: in the history once the head moves
	fc.Step(3 * time.Second)
	b.RecordRequest()
	b.RecordRequest()
	if !b.TryRetry() {
		t.Fatal("a retry within the ratio was refused")
	}
	before := b.Snapshot()
	if before.Requests != 3 || before.Retries != 1 {
		t.Fatalf("before the call: %+v, want 3 requests and 1 retry", before)
	}

	b.advance(b.head.Load()) // the loser of the race

	if after := b.Snapshot(); after != before {
		t.Errorf("advance to the head changed the window: %+v, was %+v", after, before)
	}
}
