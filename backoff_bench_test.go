package backoff_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/backoff"
)

// Benchmarks of the hot paths over 1 id (every call on one shard: the worst
// case for contention) and over 100,000 ids (calls spread over the shards,
// entries beyond the caches), serial and parallel. They use the real clock:
// a FakeClock takes a lock on every read and would measure itself. The ids
// are generated beforehand, so the steady state allocates nothing.

var benchIDs = func() []string {
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("namespace-%d/pod-%d_container", i%100, i)
	}
	return ids
}()

func benchBackoff(b *testing.B, keys int) (*backoff.Backoff, []string) {
	b.Helper()
	// max of an hour: nothing expires while the benchmark runs.
	bo := backoff.NewBackOffWithJitter(time.Millisecond, time.Hour, 0.1)
	ids := benchIDs[:keys]
	now := time.Now()
	for _, id := range ids {
		bo.Next(id, now)
	}
	return bo, ids
}

func benchmarkBackoff(b *testing.B, op func(bo *backoff.Backoff, id string, now time.Time)) {
	for _, keys := range []int{1, 100_000} {
		b.Run(fmt.Sprintf("keys=%d/serial", keys), func(b *testing.B) {
			bo, ids := benchBackoff(b, keys)
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				op(bo, ids[i%len(ids)], now)
			}
		})
		b.Run(fmt.Sprintf("keys=%d/parallel", keys), func(b *testing.B) {
			bo, ids := benchBackoff(b, keys)
			now := time.Now()
			var start atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(7919)) // each goroutine from its own place
				for pb.Next() {
					op(bo, ids[i%len(ids)], now)
					i++
				}
			})
		})
	}
}

func BenchmarkBackoffNext(b *testing.B) {
	benchmarkBackoff(b, func(bo *backoff.Backoff, id string, now time.Time) { bo.Next(id, now) })
}

func BenchmarkBackoffIsInBackOffSince(b *testing.B) {
	benchmarkBackoff(b, func(bo *backoff.Backoff, id string, now time.Time) { bo.IsInBackOffSince(id, now) })
}

func BenchmarkBackoffGet(b *testing.B) {
	benchmarkBackoff(b, func(bo *backoff.Backoff, id string, _ time.Time) { bo.Get(id) })
}
