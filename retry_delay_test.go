package backoff_test

import (
	"context"
	"math"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff"
)

// FuzzRetryDelay runs Retry on any schedule, with every jitter kind and any
// Retry-After hint, and checks each wait it announces (through WithNotify,
// which then steps the fake clock by it): never negative, never above its
// bound. The bound is the hint limit for a hinted error (unless hints are
// ignored), Cap for the full, equal and decorrelated kinds, and Cap plus
// Jitter·Cap for the proportional kind (Kubernetes' jitter on top of the
// cap); without a Cap, only saturation bounds it.
func FuzzRetryDelay(f *testing.F) {
	ms := int64(time.Millisecond)
	f.Add(10*ms, 2.0, 0.0, int64(0), uint8(0), false, int64(0), int64(-1), uint8(5))
	f.Add(10*ms, 2.0, 0.5, 100*ms, uint8(0), false, int64(0), int64(-1), uint8(8))
	f.Add(10*ms, 3.0, 0.0, 100*ms, uint8(1), false, int64(0), int64(-1), uint8(8))
	f.Add(10*ms, 3.0, 0.0, 100*ms, uint8(2), false, int64(0), int64(-1), uint8(8))
	f.Add(10*ms, 3.0, 0.0, 100*ms, uint8(3), false, int64(0), int64(-1), uint8(8))
	f.Add(10*ms, 2.0, 0.1, 0*ms, uint8(0), true, int64(-5), int64(-1), uint8(4))
	f.Add(10*ms, 2.0, 0.1, 0*ms, uint8(1), true, int64(math.MaxInt64), int64(2000*ms), uint8(4))
	f.Add(10*ms, 2.0, 0.1, 0*ms, uint8(2), true, int64(24*time.Hour), int64(0), uint8(4))
	f.Add(int64(math.MaxInt64), math.Inf(1), math.Inf(1), int64(math.MaxInt64), uint8(3), false, int64(0), int64(-1), uint8(6))
	f.Add(int64(-1), math.NaN(), math.NaN(), int64(-1), uint8(2), false, int64(0), int64(-1), uint8(6))
	f.Add(int64(1), 1e300, -1.0, int64(0), uint8(3), false, int64(0), int64(-1), uint8(6))
	f.Fuzz(func(t *testing.T, duration int64, factor, jitter float64, limit int64, kind uint8, useHint bool, hint, maxHint int64, steps uint8) {
		s := backoff.Schedule{Duration: time.Duration(duration), Factor: factor, Jitter: jitter,
			Steps: int(steps%10) + 1, Cap: time.Duration(limit)}
		k := backoff.JitterKind(kind % 4)
		fc := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		opts := []backoff.Option{backoff.WithClock(fc), backoff.WithJitterKind(k)}
		hintLimit := backoff.DefaultMaxRetryAfter
		ignoreHints := false
		if maxHint >= 0 {
			opts = append(opts, backoff.WithMaxRetryAfter(time.Duration(maxHint)))
			hintLimit, ignoreHints = time.Duration(maxHint), maxHint == 0
		}
		bound := wtMaxDuration
		if s.Cap > 0 {
			bound = s.Cap
			if k == backoff.ProportionalJitter && jitter > 0 {
				bound = wtSatAdd(s.Cap, wtSatScale(s.Cap, jitter))
			}
		}
		if useHint && !ignoreHints && hint > 0 { // a hint ≤ 0 is no hint
			bound = hintLimit
		}
		fnErr := errFlaky
		if useHint {
			fnErr = backoff.RetryAfter(time.Duration(hint), errFlaky)
		}
		waits := 0
		opts = append(opts, backoff.WithNotify(func(attempt int, _ error, next time.Duration) {
			waits++
			if next < 0 || next > bound {
				t.Fatalf("%v, wait %d of %+v: %v, want within [0, %v]", k, attempt, s, next, bound)
			}
			fc.Step(next)
		}))
		call := func() error {
			return backoff.Retry(context.Background(), s, func(context.Context) error { return fnErr }, opts...)
		}
		if (math.IsInf(factor, 1) && s.Cap <= 0) || jitter > backoff.MaxRetryJitter {
			// Waits of centuries: Retry rejects the schedule before any attempt.
			assert.Panics(t, func() { _ = call() })
			return
		}
		err := call()
		if err == nil || waits != s.Steps-1 {
			t.Fatalf("%d waits for %d steps, err %v", waits, s.Steps, err)
		}
	})
}

// TestWithJitterKindRejectsUnknownKinds: the JitterKind constants are
// accepted; the values around them panic at the option.
func TestWithJitterKindRejectsUnknownKinds(t *testing.T) {
	for _, k := range []backoff.JitterKind{backoff.ProportionalJitter, backoff.FullJitter, backoff.EqualJitter, backoff.DecorrelatedJitter} {
		assert.NotPanics(t, func() { backoff.WithJitterKind(k) }, "kind %d", k)
	}
	for _, k := range []backoff.JitterKind{-1, backoff.DecorrelatedJitter + 1} {
		assert.Panics(t, func() { backoff.WithJitterKind(k) }, "kind %d", k)
	}
}
