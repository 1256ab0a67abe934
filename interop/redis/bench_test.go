package redis_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// The benchmarks compare our shared limiter with github.com/go-redis/redis_rate
// (the usual Go answer) on one local redis-server started by the benchmark,
// with one go-redis client each. Keys rotate over 1,000 names and the limit
// is high, so that every decision admits and writes, as a busy limiter does.
// Each reports decisions/s and the p50 and p99 latency of one decision.
//
//	go test -run '^$' -bench . -benchtime=2s -count=3 ./...

const (
	benchKeys  = 1000
	benchRate  = 1e9
	benchBurst = 1 << 30
)

func benchKeyNames() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	return keys
}

// measure runs decide b.N times from one goroutine, and reports the rate and
// the latency percentiles.
func measure(b *testing.B, decide func(i int)) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		decide(i)
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkAllow(b *testing.B) {
	s := startServer(b)
	keys := benchKeyNames()
	ctx := context.Background()
	b.Run("impl=ours", func(b *testing.B) {
		k := backoffredis.NewKeyedLimiter(s.client(), "bench", benchRate, benchBurst, generous)
		measure(b, func(i int) {
			if !k.Allow(ctx, keys[i%benchKeys]) {
				b.Fatal("refused")
			}
		})
	})
	b.Run("impl=redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(s.client())
		limit := redis_rate.Limit{Rate: benchRate, Burst: benchBurst, Period: time.Second}
		measure(b, func(i int) {
			r, err := l.Allow(ctx, keys[i%benchKeys], limit)
			if err != nil || r.Allowed == 0 {
				b.Fatal("refused", err)
			}
		})
	})
}

// BenchmarkAllowParallel measures decisions/s from one process with many
// goroutines sharing one client (its connection pool).
func BenchmarkAllowParallel(b *testing.B) {
	s := startServer(b)
	keys := benchKeyNames()
	ctx := context.Background()
	parallel := func(b *testing.B, decide func(i int) bool) {
		var next atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(8)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !decide(int(next.Add(1))) {
					b.Error("refused")
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
	}
	b.Run("impl=ours", func(b *testing.B) {
		k := backoffredis.NewKeyedLimiter(s.client(), "bench", benchRate, benchBurst, generous)
		parallel(b, func(i int) bool { return k.Allow(ctx, keys[i%benchKeys]) })
	})
	b.Run("impl=redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(s.client())
		limit := redis_rate.Limit{Rate: benchRate, Burst: benchBurst, Period: time.Second}
		parallel(b, func(i int) bool {
			r, err := l.Allow(ctx, keys[i%benchKeys], limit)
			return err == nil && r.Allowed > 0
		})
	})
}

// BenchmarkAllowBatch decides for 100 keys per round trip; decisions/s
// counts keys, so it compares directly with BenchmarkAllow's.
func BenchmarkAllowBatch(b *testing.B) {
	s := startServer(b)
	keys := benchKeyNames()
	ctx := context.Background()
	const batch = 100
	k := backoffredis.NewKeyedLimiter(s.client(), "bench", benchRate, benchBurst, generous)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		off := (i * batch) % benchKeys
		t0 := time.Now()
		rs, err := k.AllowBatch(ctx, keys[off:off+batch])
		lat = append(lat, time.Since(t0))
		if err != nil || !rs[batch-1].Allowed {
			b.Fatal("refused", err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs/batch")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs/batch")
}
