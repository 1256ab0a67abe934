package backoff

import (
	testingclock "k8s.io/utils/clock/testing"
	"math"
	"testing"
	"time"
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

// TestRetryBudgetTryRetryAfterDecidesAtTheTimeGiven: a gate on its caller's
// clock decides at offset+elapsed, the time its caller has just read, not at
// the time the budget's clock shows; only a sum that overflows makes it read the clock.
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
			gate := budgetGate{budget: b, shared: true, offset: tc.offset}
			if got := gate.retry(tc.elapsed); got != tc.allowed {
				t.Fatalf("a gate at offset %v asked after %v with the clock %v after the origin = %v, want %v",
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

// TestRetryBudgetRetryAllowedInCountsTheWindowOfEachCandidateBucket: the
// wait retryAllowedIn returns is the start of the first bucket whose window
// (requests of the last 10 buckets, retries of the last 11 with it) has room
// for one more retry, counting the head's counts, the older buckets' history
// and the floor. Window 10 s, so buckets of 1 s; ratio 1.
func TestRetryBudgetRetryAllowedInCountsTheWindowOfEachCandidateBucket(t *testing.T) {
	type step struct {
		at       time.Duration // since the origin, non-decreasing
		requests int
		retries  int // each must be allowed
	}
	for _, tc := range []struct {
		name      string
		perSecond float64
		steps     []step
		wait      time.Duration
		ok        bool
	}{
		{
			// The floor's retry and the request's retry, both at 0, stay
			// 11 buckets: the first bucket without them is 11.
			name: "head only", perSecond: 0.1,
			steps: []step{{0, 1, 2}}, wait: 11 * time.Second, ok: true,
		},
		{
			// Bucket 0 in history (1 request, 2 retries), bucket 3 the head
			// (1 request, 1 retry): at bucket 10 the request of 0 has left,
			// its retries have not; at 11 they have.
			name: "history and head", perSecond: 0.1,
			steps: []step{{0, 1, 2}, {3 * time.Second, 1, 1}}, wait: 8 * time.Second, ok: true,
		},
		{
			// Bucket 0: the floor's retry; bucket 1: 2 requests, 2 retries.
			// At bucket 11 the requests of 1 have left but its retries have
			// not (2 + 1 > the floor of 1); at 12 both have.
			name: "requests leave a bucket before retries", perSecond: 0.1,
			steps: []step{{0, 0, 1}, {time.Second, 2, 2}}, wait: 11 * time.Second, ok: true,
		},
		{
			name: "no floor, no request", perSecond: 0,
			steps: nil, wait: 0, ok: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			b := NewRetryBudget(1, tc.perSecond, 10*time.Second, WithClock(fc))
			origin := fc.Now()
			for _, s := range tc.steps {
				fc.SetTime(origin.Add(s.at))
				for range s.requests {
					b.RecordRequest()
				}
				for i := range s.retries {
					if !b.TryRetry() {
						t.Fatalf("at %v: retry %d refused", s.at, i+1)
					}
				}
			}
			if b.TryRetry() {
				t.Fatal("one more retry now was allowed: the case needs a refusal")
			}
			wait, ok := b.retryAllowedIn()
			if wait != tc.wait || ok != tc.ok {
				t.Fatalf("retryAllowedIn() = %v, %v; want %v, %v", wait, ok, tc.wait, tc.ok)
			}
		})
	}
}

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
