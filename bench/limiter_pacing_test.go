package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/retrykit/backoff"
)

// pacer is the part of x/time/rate's Limiter and of our Limiter that the
// pacing benchmarks call.
type pacer interface {
	Allow() bool
	Wait(ctx context.Context) error
}

// keyedPacer is a per-key limiter: ours, or the map of x/time/rate limiters
// that services write by hand.
type keyedPacer interface {
	Allow(key string) bool
}

var (
	pacerImpls      []impl[func(r float64, burst int) pacer]
	keyedPacerImpls []impl[func(r float64, burst int) keyedPacer]
)

func init() {
	pacerImpls = append(pacerImpls,
		impl[func(float64, int) pacer]{"xrate", func(r float64, burst int) pacer {
			return rate.NewLimiter(rate.Limit(r), burst)
		}},
		impl[func(float64, int) pacer]{"ours", func(r float64, burst int) pacer {
			return backoff.NewLimiter(r, burst)
		}},
	)
	keyedPacerImpls = append(keyedPacerImpls,
		impl[func(float64, int) keyedPacer]{"xrate", func(r float64, burst int) keyedPacer {
			return &xrateKeyed{limit: rate.Limit(r), burst: burst, m: map[string]*rate.Limiter{}}
		}},
		impl[func(float64, int) keyedPacer]{"ours", func(r float64, burst int) keyedPacer {
			return backoff.NewKeyedLimiter[string](r, burst)
		}},
	)
}

// xrateKeyed is the per-key limiter services write around x/time/rate: one
// mutex, one map, a Limiter per key made on first use.
type xrateKeyed struct {
	mu    sync.Mutex
	limit rate.Limit
	burst int
	m     map[string]*rate.Limiter
}

func (k *xrateKeyed) Allow(key string) bool {
	k.mu.Lock()
	l, ok := k.m[key]
	if !ok {
		l = rate.NewLimiter(k.limit, k.burst)
		k.m[key] = l
	}
	k.mu.Unlock()
	return l.Allow()
}

var sinkBool atomic.Int64

// BenchmarkLimiterAllow measures Allow on one limiter at 1,000,000 events
// per second with bursts of 100 (so that some calls are refused), from one
// goroutine and from GOMAXPROCS goroutines at once.
func BenchmarkLimiterAllow(b *testing.B) {
	forEach(b, pacerImpls, func(b *testing.B, mk func(float64, int) pacer) {
		b.Run("mode=serial", func(b *testing.B) {
			b.ReportAllocs()
			l := mk(1e6, 100)
			n := 0
			for b.Loop() {
				if l.Allow() {
					n++
				}
			}
			sinkBool.Add(int64(n))
		})
		b.Run("mode=parallel", func(b *testing.B) {
			b.ReportAllocs()
			l := mk(1e6, 100)
			b.RunParallel(func(pb *testing.PB) {
				n := 0
				for pb.Next() {
					if l.Allow() {
						n++
					}
				}
				sinkBool.Add(int64(n))
			})
		})
	})
}

// BenchmarkLimiterWait measures a Wait that has to wait: 100,000 events per
// second with a burst of 1, so every call after the first sleeps about 10 µs
// on a real timer.
func BenchmarkLimiterWait(b *testing.B) {
	forEach(b, pacerImpls, func(b *testing.B, mk func(float64, int) pacer) {
		l := mk(1e5, 1)
		ctx := context.Background()
		for b.Loop() {
			if err := l.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
