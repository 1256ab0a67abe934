package backoff

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

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
