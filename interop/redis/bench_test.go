package redis_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
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
	// benchTimeout is the limiter's timeout in BenchmarkAllowParallel: long,
	// so that its ctx=deadline case can pass a sooner deadline that still
	// outlasts the benchmark. The cost of a derived context does not depend
	// on its length.
	benchTimeout = time.Hour
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
	reportLatencies(b, float64(b.N)/elapsed.Seconds(), lat, "")
}

// reportLatencies reports decisions/s and the p50 and p99 of lat, whose
// unit is suffixed with per ("/batch", or "" for one decision).
func reportLatencies(b *testing.B, perSecond float64, lat []time.Duration, per string) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(perSecond, "decisions/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs"+per)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs"+per)
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
// goroutines (8 per GOMAXPROCS) sharing one client (its connection pool),
// and the p50 and p99 latency of one decision. ctx=background passes a
// context without deadline, so that our limiter derives one per call (its
// WithTimeout); ctx=deadline passes one whose deadline is sooner than the
// limiter's timeout, which the limiter uses as it is.
func BenchmarkAllowParallel(b *testing.B) {
	s := startServer(b)
	keys := benchKeyNames()
	parallel := func(b *testing.B, ctx context.Context, decide func(ctx context.Context, i int) bool) {
		var (
			next atomic.Int64
			mu   sync.Mutex
			lat  = make([]time.Duration, 0, b.N)
		)
		b.ReportAllocs()
		b.SetParallelism(8)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			mine := make([]time.Duration, 0, 1024)
			for pb.Next() {
				t0 := time.Now()
				ok := decide(ctx, int(next.Add(1)))
				mine = append(mine, time.Since(t0))
				if !ok {
					b.Error("refused")
					break
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
		elapsed := time.Since(start)
		b.StopTimer()
		reportLatencies(b, float64(b.N)/elapsed.Seconds(), lat, "")
	}
	for _, c := range []struct {
		name string
		ctx  func(b *testing.B) context.Context
	}{
		{"ctx=background", func(*testing.B) context.Context { return context.Background() }},
		{"ctx=deadline", func(b *testing.B) context.Context {
			// A deadline that does not pass during the benchmark, yet
			// sooner than the limiter's timeout (benchTimeout).
			ctx, cancel := context.WithTimeout(context.Background(), benchTimeout/2)
			b.Cleanup(cancel)
			return ctx
		}},
	} {
		b.Run(c.name+"/impl=ours", func(b *testing.B) {
			k := backoffredis.NewKeyedLimiter(s.client(), "bench", benchRate, benchBurst, backoffredis.WithTimeout(benchTimeout))
			parallel(b, c.ctx(b), func(ctx context.Context, i int) bool { return k.Allow(ctx, keys[i%benchKeys]) })
			if st := k.Stats(); st.Fallback != 0 || st.Errors != 0 {
				b.Fatalf("decisions not all shared: %+v", st)
			}
		})
		b.Run(c.name+"/impl=redis_rate", func(b *testing.B) {
			l := redis_rate.NewLimiter(s.client())
			limit := redis_rate.Limit{Rate: benchRate, Burst: benchBurst, Period: time.Second}
			parallel(b, c.ctx(b), func(ctx context.Context, i int) bool {
				r, err := l.Allow(ctx, keys[i%benchKeys], limit)
				return err == nil && r.Allowed > 0
			})
		})
	}
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
	reportLatencies(b, float64(b.N*batch)/elapsed.Seconds(), lat, "/batch")
}

// BenchmarkCluster runs on a Redis Cluster of three masters started by the
// benchmark, with one Cluster client per implementation: Allow from one
// goroutine and AllowParallel from 8 goroutines per GOMAXPROCS, ours (keys
// spread over the masters, WithSpreadKeys) beside redis_rate (whose keys
// spread too); and AllowBatch of 100 keys from 4 goroutines per GOMAXPROCS,
// the keys in one slot (masters=1, the default layout) or spread over the
// three masters (masters=3). decisions/s counts keys.
func BenchmarkCluster(b *testing.B) {
	c := startCluster(b)
	keys := benchKeyNames()
	ctx := context.Background()
	b.Run("Allow/impl=ours", func(b *testing.B) {
		k := backoffredis.NewKeyedLimiter(c.client(), "bench", benchRate, benchBurst, generous, backoffredis.WithSpreadKeys())
		measure(b, func(i int) {
			if !k.Allow(ctx, keys[i%benchKeys]) {
				b.Fatal("refused")
			}
		})
	})
	b.Run("Allow/impl=redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(c.client())
		limit := redis_rate.Limit{Rate: benchRate, Burst: benchBurst, Period: time.Second}
		measure(b, func(i int) {
			r, err := l.Allow(ctx, keys[i%benchKeys], limit)
			if err != nil || r.Allowed == 0 {
				b.Fatal("refused", err)
			}
		})
	})
	b.Run("AllowParallel/impl=ours", func(b *testing.B) {
		k := backoffredis.NewKeyedLimiter(c.client(), "bench", benchRate, benchBurst, generous, backoffredis.WithSpreadKeys())
		measureParallel(b, 8, 1, func(i int) bool { return k.Allow(ctx, keys[i%benchKeys]) })
		if st := k.Stats(); st.Fallback != 0 || st.Errors != 0 {
			b.Fatalf("decisions not all shared: %+v", st)
		}
	})
	b.Run("AllowParallel/impl=redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(c.client())
		limit := redis_rate.Limit{Rate: benchRate, Burst: benchBurst, Period: time.Second}
		measureParallel(b, 8, 1, func(i int) bool {
			r, err := l.Allow(ctx, keys[i%benchKeys], limit)
			return err == nil && r.Allowed > 0
		})
	})
	const batch = 100
	for _, masters := range []int{1, 3} {
		b.Run("AllowBatch/masters="+strconv.Itoa(masters), func(b *testing.B) {
			opts := []backoffredis.Option{generous}
			if masters == 3 {
				opts = append(opts, backoffredis.WithSpreadKeys())
			}
			k := backoffredis.NewKeyedLimiter(c.client(), "bench-batch", benchRate, benchBurst, opts...)
			measureParallel(b, 4, batch, func(i int) bool {
				off := (i * batch) % benchKeys
				rs, err := k.AllowBatch(ctx, keys[off:off+batch])
				return err == nil && rs[batch-1].Allowed
			})
			if st := k.Stats(); st.Fallback != 0 || st.Errors != 0 {
				b.Fatalf("decisions not all shared: %+v", st)
			}
		})
	}
}

// measureParallel runs decide b.N times from parallelism goroutines per
// GOMAXPROCS, and reports the rate (per decides' per decisions each) and
// the latency percentiles of one call.
func measureParallel(b *testing.B, parallelism, per int, decide func(i int) bool) {
	b.Helper()
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  = make([]time.Duration, 0, b.N)
	)
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		mine := make([]time.Duration, 0, 1024)
		for pb.Next() {
			t0 := time.Now()
			ok := decide(int(next.Add(1)))
			mine = append(mine, time.Since(t0))
			if !ok {
				b.Error("refused")
				break
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	unit := ""
	if per > 1 {
		unit = "/batch"
	}
	reportLatencies(b, float64(b.N*per)/elapsed.Seconds(), lat, unit)
}
