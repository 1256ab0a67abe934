package bench

import "testing"

// retryAttempts is how many times the retried function is called per Retry:
// it fails retryAttempts-1 times, then succeeds.
const retryAttempts = 10

// BenchmarkRetry measures the per-attempt overhead of a retry helper: one op
// is one retried call of a function that fails 9 times and then succeeds,
// with a zero delay between attempts so that nothing sleeps (each library
// handles a zero delay its own way: that handling is part of its overhead).
// ns/op is per call; ns/attempt divides by the 10 attempts.
func BenchmarkRetry(b *testing.B) {
	forEach(b, retryImpls, func(b *testing.B, retry retryFunc) {
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
			if err := retry(retryAttempts, fn); err != nil {
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
