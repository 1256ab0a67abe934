package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/retrykit/backoff"
)

// FuzzJitter checks Jitter for any d and maxFactor: never negative; d itself
// (0 for a negative d) when there is no jitter to add; otherwise in
// [d, d + maxFactor·d], saturating at the largest duration.
func FuzzJitter(f *testing.F) {
	f.Add(int64(time.Second), 0.5)
	f.Add(int64(time.Second), 0.0)
	f.Add(int64(time.Second), -1.0)
	f.Add(int64(-time.Second), 1.0)
	f.Add(int64(math.MaxInt64), 10.0)
	f.Add(int64(math.MaxInt64/2), math.Inf(1))
	f.Add(int64(1), math.NaN())
	f.Add(int64(3), 1e-300)
	f.Fuzz(func(t *testing.T, d int64, maxFactor float64) {
		dur := time.Duration(d)
		got := backoff.Jitter(dur, maxFactor)
		lo := max(dur, 0)
		hi := lo
		if maxFactor > 0 {
			hi = wtSatAdd(lo, wtSatScale(lo, maxFactor))
		}
		if got < lo || got > hi {
			t.Fatalf("Jitter(%v, %v) = %v, want within [%v, %v]", dur, maxFactor, got, lo, hi)
		}
	})
}
