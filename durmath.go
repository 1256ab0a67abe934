package backoff

import (
	"math"
	"time"
)

// Saturating duration arithmetic. Every delay this package computes goes
// through these helpers, so that no delay overflows into a negative value,
// whatever the number of failures or the size of the base (client-go's
// item-exponential limiter, for one, goes negative when its base is near
// math.MaxInt64/4). They take non-negative durations; a negative input is
// treated as zero.

// maxDuration is the largest representable delay, about 292 years.
const maxDuration = time.Duration(math.MaxInt64)

// addDuration returns a+b, saturating at maxDuration.
func addDuration(a, b time.Duration) time.Duration {
	a, b = max(a, 0), max(b, 0)
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

// shiftDuration returns d·2^n, saturating at maxDuration. It is exact (integer
// arithmetic), which keeps series such as 5ms·2^n exact to the nanosecond.
func shiftDuration(d time.Duration, n int) time.Duration {
	if d <= 0 {
		return 0
	}
	if n <= 0 {
		return d
	}
	// d fits in 63 bits; d<<n fits too when d has at least n+1 leading zeros.
	if n >= 63 || d > maxDuration>>uint(n) {
		return maxDuration
	}
	return d << uint(n)
}

// scaleDuration returns d·f rounded towards zero, saturating at maxDuration.
// f ≤ 0 and NaN give 0, +Inf gives maxDuration (for d > 0). The product is
// computed in float64, so it is exact only while it stays below 2^53 ns
// (about 104 days); that is the precision apimachinery's wait.Backoff has.
func scaleDuration(d time.Duration, f float64) time.Duration {
	if d <= 0 || !(f > 0) {
		return 0
	}
	p := float64(d) * f
	// float64(maxDuration) rounds up to 2^63, which does not fit: compare with ≥.
	if p >= float64(maxDuration) {
		return maxDuration
	}
	return time.Duration(p)
}

// clampDuration returns d limited to [0, limit]. A limit ≤ 0 means no upper
// limit.
func clampDuration(d, limit time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	if limit > 0 && d > limit {
		return limit
	}
	return d
}
