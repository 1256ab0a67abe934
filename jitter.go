package backoff

import (
	"math/rand/v2"
	"time"
)

// Jitter returns a random duration in [d, d + maxFactor·d): d plus up to
// maxFactor times d. It spreads out the retries of many clients that failed
// at the same moment, so that they do not all come back at once.
//
// A maxFactor that is ≤ 0 or NaN means no jitter: Jitter returns d unchanged.
// This differs from apimachinery's wait.Jitter, which silently treats a
// maxFactor ≤ 0 as 1.0 and so doubles the spread a caller asked to turn off.
// A negative d is treated as 0. The result saturates at the largest
// time.Duration instead of overflowing.
//
// Jitter is safe for concurrent use and does not allocate: it draws from
// math/rand/v2's per-goroutine source, so it needs no lock.
func Jitter(d time.Duration, maxFactor float64) time.Duration {
	if d <= 0 {
		return 0
	}
	if !(maxFactor > 0) {
		return d
	}
	return addDuration(d, scaleDuration(d, maxFactor*rand.Float64()))
}

// randDuration returns a uniformly random duration in [0, n), or 0 if n ≤ 0.
func randDuration(n time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(n)))
}
