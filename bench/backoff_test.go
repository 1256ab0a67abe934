package bench

import (
	"sync/atomic"
	"testing"
	"time"
)

// backoffKeyCounts are the key-set sizes of the per-key Backoff benchmarks:
// one hot key, and a large controller's worth of keys.
var backoffKeyCounts = []int{1, 100_000}

// benchBackoff runs op over every key count, serially and in parallel, on a
// Backoff that already holds an entry for every key (so the timed region is
// steady state, not map growth). eventTime is fixed: the entries never
// expire, as with a crash-looping container polled every second.
func benchBackoff(b *testing.B, mk func() perKeyBackoff, op func(bo perKeyBackoff, id string, eventTime time.Time)) {
	for _, n := range backoffKeyCounts {
		ks := keys(n)
		b.Run("keys="+count(n), func(b *testing.B) {
			setup := func() (perKeyBackoff, time.Time) {
				bo := mk()
				now := time.Now()
				for _, k := range ks {
					bo.Next(k, now)
				}
				return bo, now
			}
			b.Run("mode=serial", func(b *testing.B) {
				b.ReportAllocs()
				bo, now := setup()
				j := 0
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					op(bo, ks[j], now)
					if j++; j == n {
						j = 0
					}
				}
			})
			b.Run("mode=parallel", func(b *testing.B) {
				b.ReportAllocs()
				bo, now := setup()
				var start atomic.Int64
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					j := int(start.Add(7919)) % n
					for pb.Next() {
						op(bo, ks[j], now)
						if j++; j == n {
							j = 0
						}
					}
				})
			})
		})
	}
}

// BenchmarkBackoffNext measures Backoff.Next over 1 and 100,000 keys, serial
// and parallel (b.RunParallel, GOMAXPROCS goroutines).
func BenchmarkBackoffNext(b *testing.B) {
	forEach(b, backoffImpls, func(b *testing.B, mk func() perKeyBackoff) {
		benchBackoff(b, mk, func(bo perKeyBackoff, id string, t time.Time) { bo.Next(id, t) })
	})
}

var sinkBool bool

// BenchmarkBackoffIsInBackOffSince measures Backoff.IsInBackOffSince over 1
// and 100,000 keys, serial and parallel.
func BenchmarkBackoffIsInBackOffSince(b *testing.B) {
	forEach(b, backoffImpls, func(b *testing.B, mk func() perKeyBackoff) {
		benchBackoff(b, mk, func(bo perKeyBackoff, id string, t time.Time) {
			if bo.IsInBackOffSince(id, t) {
				sinkBool = true
			}
		})
	})
}
