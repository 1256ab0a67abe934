package backoff

import (
	"math"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestRetryBudgetTryRetryAfterDecidesAtTheTimeGiven: tryRetryAfter decides
// at offset+elapsed, the time its caller has just read, not at the time the
// budget's clock shows; only a sum that overflows makes it read the clock.
// The budget allows one retry per 10 s window, and that retry is spent at
// the origin, so a decision within the first window is a refusal and one at
// 20 s, after the window has moved past the spent retry, is an admission.
func TestRetryBudgetTryRetryAfterDecidesAtTheTimeGiven(t *testing.T) {
	const window = 10 * time.Second
	minDuration := time.Duration(math.MinInt64)
	for _, tc := range []struct {
		name            string
		clockAt         time.Duration // the budget's clock at the decision
		offset, elapsed time.Duration
		allowed         bool
	}{
		{"later than the clock", 0, 0, 2 * window, true},
		{"earlier than the clock", 2 * window, 0, 0, false},
		{"within the window", 2 * window, 0, window / 2, false},
		{"negative elapsed", 0, 3 * window, -window, true},
		{"sum over the largest duration reads the clock", 2 * window, maxDuration - time.Second, 2 * time.Second, true},
		{"sum over the largest duration reads the clock, still in the window", 0, maxDuration - time.Second, 2 * time.Second, false},
		{"sum under the smallest duration reads the clock", 0, minDuration + time.Second, -2 * time.Second, false},
		{"sum under the smallest duration reads the clock, window moved", 2 * window, minDuration + time.Second, -2 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			b := NewRetryBudget(0, 0.1, window, WithClock(fc))
			if !b.TryRetry() {
				t.Fatal("the first retry of the window was refused")
			}
			fc.Step(tc.clockAt)
			if got := b.tryRetryAfter(tc.offset, tc.elapsed); got != tc.allowed {
				t.Fatalf("tryRetryAfter(%v, %v) with the clock %v after the origin = %v, want %v",
					tc.offset, tc.elapsed, tc.clockAt, got, tc.allowed)
			}
		})
	}
}

// TestRetryBudgetRetryAtTheHeadsEndCountsInTheNextBucket: a retry decided
// exactly at the end of the head bucket belongs to the next bucket, even when
// the caller's stripe still holds a lease taken in the head: it leaves the
// window a bucket later than a retry of the head.
func TestRetryBudgetRetryAtTheHeadsEndCountsInTheNextBucket(t *testing.T) {
	const window = 10 * time.Second // 10 buckets of 1 s
	fc := testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	b := NewRetryBudget(0, 10, window, WithClock(fc))
	// Both decisions come from this frame, so from the same stripe.
	if !b.tryRetryAt(0) {
		t.Fatal("the first retry was refused")
	}
	leased := false
	for i := range b.stripes {
		leased = leased || b.stripes[i].lease.Load()&budgetLeaseCountMask != 0
	}
	if !leased {
		t.Fatal("the first retry took no lease: the test needs one")
	}
	fc.Step(time.Second)
	if !b.tryRetryAt(time.Second) {
		t.Fatal("the retry at the head's end was refused")
	}
	fc.Step(window)
	if s := b.Snapshot(); s.Retries != 1 {
		t.Fatalf("a window after the second retry, Snapshot().Retries = %d, want 1: the retry at 1 s is still in the window, the one at 0 is not", s.Retries)
	}
}
