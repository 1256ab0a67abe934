package backoff

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// countingBudgetMetrics counts the calls of RetryBudgetMetrics.
type countingBudgetMetrics struct{ requests, retries, refused int }

func (m *countingBudgetMetrics) IncRequests() { m.requests++ }
func (m *countingBudgetMetrics) IncRetries()  { m.retries++ }
func (m *countingBudgetMetrics) IncRefused()  { m.refused++ }

// leased returns the retries the budget's stripes hold in leases.
func (b *RetryBudget) leased() uint64 {
	var n uint64
	for i := range b.stripes {
		n += b.stripes[i].lease.Load() & budgetLeaseCountMask
	}
	return n
}

// TestRetryBudgetMetricsCountRetriesGrantedFromLeases: the retries metric
// counts every retry the budget allows, those a goroutine takes from its
// stripe's lease included, in each bucket of the window, and agrees with
// TryRetry's answers and the Snapshot.
func TestRetryBudgetMetricsCountRetriesGrantedFromLeases(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	m := &countingBudgetMetrics{}
	b := NewRetryBudget(1, 0, time.Second, WithClock(fc), WithRetryBudgetMetrics(m))

	allowed, refused := 0, 0
	for round, requests := range []int{100, 40} {
		if round > 0 {
			fc.Step(2 * time.Second) // the window passes: its retries no longer count
		}
		for range requests {
			b.RecordRequest()
		}
		if !b.TryRetry() {
			t.Fatalf("round %d: the first retry was refused", round)
		}
		allowed++
		// With room for many more retries, that decision took a lease:
		// the next ones are granted from the stripe, without touching cur.
		if b.leased() == 0 {
			t.Fatalf("round %d: no stripe holds a lease after the first of %d allowed retries", round, requests)
		}
		for b.TryRetry() {
			allowed++
		}
		refused++
		if m.retries != allowed || m.refused != refused {
			t.Fatalf("round %d: metrics count %d retries and %d refusals; TryRetry allowed %d and refused %d",
				round, m.retries, m.refused, allowed, refused)
		}
	}
	if want := 100 + 40; allowed != want {
		t.Fatalf("TryRetry allowed %d retries, want %d (ratio 1, no floor)", allowed, want)
	}
	if m.requests != 140 {
		t.Fatalf("metrics count %d requests, want 140", m.requests)
	}
	if s := b.Snapshot(); s.Retries != 40 || s.Requests != 40 || s.Refused != int64(refused) {
		t.Fatalf("Snapshot() = %+v, want the last window's 40 requests and 40 retries, and %d refusals", s, refused)
	}
}
