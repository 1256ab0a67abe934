package bench

import (
	"sync/atomic"
	"testing"
	"time"
)

// limiterKeys is the key-set size of the limiter benchmarks.
const limiterKeys = 1000

var sinkDuration atomic.Int64

// benchLimiter runs op over limiterKeys keys, serially and in parallel.
func benchLimiter(b *testing.B, mk func() limiter, op func(l limiter, key string) time.Duration) {
	ks := keys(limiterKeys)
	b.Run("mode=serial", func(b *testing.B) {
		b.ReportAllocs()
		l := mk()
		var sum time.Duration
		j := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sum += op(l, ks[j])
			if j++; j == limiterKeys {
				j = 0
			}
		}
		sinkDuration.Add(int64(sum))
	})
	b.Run("mode=parallel", func(b *testing.B) {
		b.ReportAllocs()
		l := mk()
		var start atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var sum time.Duration
			j := int(start.Add(7919)) % limiterKeys
			for pb.Next() {
				sum += op(l, ks[j])
				if j++; j == limiterKeys {
					j = 0
				}
			}
			sinkDuration.Add(int64(sum))
		})
	})
}

// BenchmarkItemExponentialWhen measures When of the item-exponential limiter
// (5 ms base, 1000 s cap) over 1,000 keys that keep failing.
func BenchmarkItemExponentialWhen(b *testing.B) {
	forEach(b, itemExpImpls, func(b *testing.B, mk func() limiter) {
		benchLimiter(b, mk, func(l limiter, k string) time.Duration { return l.When(k) })
	})
}

// BenchmarkControllerLimiterWhenForget measures When followed by Forget (a
// failure, then a success) on the default controller limiter (max of the
// 5 ms..1000 s item-exponential and a 10 qps, burst 100 token bucket) over
// 1,000 keys.
func BenchmarkControllerLimiterWhenForget(b *testing.B) {
	forEach(b, controllerImpls, func(b *testing.B, mk func() limiter) {
		benchLimiter(b, mk, func(l limiter, k string) time.Duration {
			d := l.When(k)
			l.Forget(k)
			return d
		})
	})
}

// BenchmarkBucketWhen measures When of a 10 qps, burst 100 token bucket:
// ours against client-go's BucketRateLimiter, which is
// golang.org/x/time/rate's Limiter.Reserve().Delay().
func BenchmarkBucketWhen(b *testing.B) {
	forEach(b, bucketImpls, func(b *testing.B, mk func() limiter) {
		benchLimiter(b, mk, func(l limiter, k string) time.Duration { return l.When(k) })
	})
}
