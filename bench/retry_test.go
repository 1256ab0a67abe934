package bench

import (
	"testing"
	"time"
)

// retryAttempts is how many times the retried function is called per Retry:
// it fails retryAttempts-1 times, then succeeds.
const retryAttempts = 10

// BenchmarkRetry measures the per-attempt overhead of a retry helper: one op
// is one retried call of a function that fails 9 times and then succeeds.
// Nothing really sleeps: with delay=0 each library handles a zero delay its
// own way (ours skips the timer; cenkalti/backoff/v5 and apimachinery arm a
// 0-length runtime timer), and that handling is part of its overhead; with
// delay=1ns every library arms a real runtime timer that has expired by the
// time it is waited on, so the wait returns at once (Go ≥ 1.23 timer
// channels). ns/op is per call; ns/attempt divides by the 10 attempts.
func BenchmarkRetry(b *testing.B) {
	forEach(b, retryImpls, func(b *testing.B, retry retryFunc) {
		for _, delay := range []time.Duration{0, time.Nanosecond} {
			b.Run("delay="+delay.String(), func(b *testing.B) {
				b.ReportAllocs()
				attempt := 0
				fn := func() error {
					attempt++
					if attempt < retryAttempts {
						return errAttempt
					}
					return nil
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					attempt = 0
					if err := retry(retryAttempts, delay, fn); err != nil {
						b.Fatal(err)
					}
					if attempt != retryAttempts {
						b.Fatalf("fn ran %d times, want %d", attempt, retryAttempts)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*retryAttempts), "ns/attempt")
			})
		}
	})
}
