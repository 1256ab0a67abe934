package bench

import (
	"errors"
	"testing"
	"time"
)

// These tests check that the implementations compared are configured alike
// and that the harness measures what it claims: every queue absorbs and
// delivers, every limiter gives the same sequence, every Backoff the same
// delays, every retry helper the same number of attempts. CI runs them with
// the benchmarks.

func TestQueuesAbsorbAndDeliver(t *testing.T) {
	for _, im := range queueImpls {
		t.Run(im.name, func(t *testing.T) {
			q := im.make()
			defer q.ShutDown()
			fillFar(q, 0, 1000)
			absorb(t, q)
			if n := q.Len(); n != 0 {
				t.Fatalf("Len = %d with only far-future items waiting, want 0", n)
			}
			q.Add(5)
			if item, shutdown := q.Get(); item != 5 || shutdown {
				t.Fatalf("Get = %d, %v; want 5, false", item, shutdown)
			}
			q.Done(5)
		})
	}
}

func TestLimitersAgree(t *testing.T) {
	for _, set := range []struct {
		name  string
		impls []impl[func() limiter]
	}{{"item-exponential", itemExpImpls}, {"controller", controllerImpls}} {
		t.Run(set.name, func(t *testing.T) {
			var want []time.Duration
			for _, im := range set.impls {
				l := im.make()
				var got []time.Duration
				for i := 0; i < 20; i++ {
					got = append(got, l.When("k"))
				}
				if want == nil {
					want = got
					continue
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s: When #%d = %v, %s gave %v", im.name, i+1, got[i], set.impls[0].name, want[i])
					}
				}
			}
		})
	}
	t.Run("bucket", func(t *testing.T) {
		for _, im := range bucketImpls {
			l := im.make()
			for i := 0; i < 100; i++ {
				if d := l.When("k"); d != 0 {
					t.Fatalf("%s: When #%d = %v within the burst, want 0", im.name, i+1, d)
				}
			}
			if d := l.When("k"); d <= 0 || d > 100*time.Millisecond {
				t.Fatalf("%s: When after the burst = %v, want (0, 100ms]", im.name, d)
			}
		}
	})
}

func TestBackoffsAgree(t *testing.T) {
	for _, im := range backoffImpls {
		bo := im.make()
		now := time.Now()
		want := backoffInitial
		for i := 0; i < 12; i++ {
			bo.Next("k", now)
			if got := bo.Get("k"); got != want {
				t.Fatalf("%s: Get after Next #%d = %v, want %v", im.name, i+1, got, want)
			}
			want = min(2*want, backoffMax)
		}
		if !bo.IsInBackOffSince("k", time.Now()) {
			t.Fatalf("%s: IsInBackOffSince(now) = false right after Next", im.name)
		}
	}
}

func TestRetriesAgree(t *testing.T) {
	for _, im := range retryImpls {
		calls := 0
		err := im.make(retryAttempts, 0, func() error {
			calls++
			if calls < retryAttempts {
				return errAttempt
			}
			return nil
		})
		if err != nil || calls != retryAttempts {
			t.Fatalf("%s: err = %v after %d calls, want nil after %d", im.name, err, calls, retryAttempts)
		}
		calls = 0
		err = im.make(retryAttempts, time.Nanosecond, func() error { calls++; return errAttempt })
		if calls != retryAttempts {
			t.Fatalf("%s: %d calls of an always-failing fn, want %d", im.name, calls, retryAttempts)
		}
		// apimachinery reports its own timeout error rather than the last one.
		if err == nil || (!errors.Is(err, errAttempt) && im.name != "apimachinery") {
			t.Fatalf("%s: err = %v, want the last error", im.name, err)
		}
	}
}
