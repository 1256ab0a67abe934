package backoff

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestRetryBudgetRetryAllowedInIgnoresSetAsideRetries: when a queue asks
// when a refused item may come back, the retries set aside for stripes and
// not used do not count: with half of its requests' retries used, the
// budget allows one now, however much is set aside.
func TestRetryBudgetRetryAllowedInIgnoresSetAsideRetries(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	b := NewRetryBudget(1, 0, time.Second, WithClock(fc))
	for range 10 {
		b.RecordRequest()
	}
	// Retries decided for goroutines of other stripes, as they would be:
	// the first ones take leases (5, then 2), the last count directly,
	// until cur counts all 10 retries, 5 of them allowed.
	b.mu.Lock()
	for i := range 5 {
		if !b.decideLocked(&b.stripes[i]) {
			t.Fatalf("retry %d refused", i+1)
		}
	}
	b.mu.Unlock()
	if got := b.cur.Load() & budgetCountMax; got != 10 {
		t.Fatalf("cur counts %d retries, want 10 (5 allowed, 5 set aside)", got)
	}
	if wait, ok := b.retryAllowedIn(); wait != 0 || !ok {
		t.Fatalf("retryAllowedIn() = %v, %v; want 0, true: 5 of 10 retries are used", wait, ok)
	}
	if s := b.Snapshot(); s.Retries != 5 || s.Requests != 10 {
		t.Fatalf("Snapshot() = %+v, want 10 requests and 5 retries", s)
	}
}
