package bench

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

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

var sinkAllowed atomic.Int64

// BenchmarkLimiterAllow measures Allow on one limiter, from one goroutine
// and from GOMAXPROCS goroutines at once, with two loads: at 1,000,000
// events per second with bursts of 100 (the rows without load=), so that
// many calls are refused; and, as load=admitting, at 1e9 events per second
// with bursts of 1,000,000, so that every call is admitted, as it is on a
// limiter that is not saturated.
func BenchmarkLimiterAllow(b *testing.B) {
	forEach(b, pacerImpls, func(b *testing.B, mk func(float64, int) pacer) {
		benchAllow(b, func() pacer { return mk(1e6, 100) })
		b.Run("load=admitting", func(b *testing.B) {
			benchAllow(b, func() pacer { return mk(1e9, 1e6) })
		})
	})
}

// benchAllow runs Allow on a limiter made by mk, serially and in parallel.
func benchAllow(b *testing.B, mk func() pacer) {
	b.Run("mode=serial", func(b *testing.B) {
		b.ReportAllocs()
		l := mk()
		n := 0
		for b.Loop() {
			if l.Allow() {
				n++
			}
		}
		sinkAllowed.Add(int64(n))
	})
	b.Run("mode=parallel", func(b *testing.B) {
		b.ReportAllocs()
		l := mk()
		b.RunParallel(func(pb *testing.PB) {
			n := 0
			for pb.Next() {
				if l.Allow() {
					n++
				}
			}
			sinkAllowed.Add(int64(n))
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

// keyedFilled caches, per implementation and parameter set, a keyed
// limiter filled with every key and the heap it took, so that each 1M-key
// fill runs once per process.
var keyedFilled = map[string]struct {
	l           keyedPacer
	bytesPerKey float64
}{}

// BenchmarkKeyedLimiterAllow measures Allow over 1,000,000 keys (100,000
// with -short), every key seen before: ours against one mutex and a map of
// x/time/rate limiters. B/key is the heap the fill took, per key (the keys'
// own bytes excluded: they exist before the fill). The row without refill=
// runs at 0.001 events per second and bursts of 10, so that no key refills
// during a run; the refill=10 rows at 10 events per second and bursts of
// 100 (a per-client API limit), so that every key has refilled, at least in
// part, by the time it comes round again, with the keys visited in the
// order they were first seen (order=seen) or in a random order fixed for
// the run (order=random).
func BenchmarkKeyedLimiterAllow(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	ks := keys(n)
	shuffled := slices.Clone(ks)
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	small := keys(10_000)
	smallShuffled := slices.Clone(small)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(small), func(i, j int) {
		smallShuffled[i], smallShuffled[j] = smallShuffled[j], smallShuffled[i]
	})
	for _, im := range keyedPacerImpls {
		b.Run("impl="+im.name, func(b *testing.B) {
			b.Run("keys="+count(n), func(b *testing.B) {
				benchKeyed(b, im, "norefill", ks, 0.001, 10)
			})
			b.Run("refill=10", func(b *testing.B) {
				b.Run("order=seen/keys="+count(n), func(b *testing.B) {
					benchKeyed(b, im, "seen", ks, 10, 100)
				})
				b.Run("order=random/keys="+count(n), func(b *testing.B) {
					benchKeyed(b, im, "random", shuffled, 10, 100)
				})
			})
			// The small regime: 10,000 keys, whose table fits in the
			// caches, at a rate high enough (1,000/s) that a key's bucket
			// has refilled again by its next call, as at 1M keys and 10/s.
			b.Run("refill=1000", func(b *testing.B) {
				b.Run("order=seen/keys="+count(len(small)), func(b *testing.B) {
					benchKeyed(b, im, "small-seen", small, 1000, 100)
				})
				b.Run("order=random/keys="+count(len(small)), func(b *testing.B) {
					benchKeyed(b, im, "small-random", smallShuffled, 1000, 100)
				})
			})
		})
	}
}

// benchKeyed fills a keyed limiter of im's (once per process and set) with
// ks, in order, three times, then measures Allow over ks in the same order:
// the timed loop starts where clients that keep coming back keep a limiter,
// whatever the run's length (ours holds a new set of returning keys within
// three rounds over them, the first of which inserts every key). B/key is
// the heap the limiter holds then, per key.
func benchKeyed(b *testing.B, im impl[func(float64, int) keyedPacer], set string, ks []string, r float64, burst int) {
	n := len(ks)
	f, ok := keyedFilled[im.name+"/"+set]
	if !ok {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f.l = im.make(r, burst)
		for range 3 {
			for _, k := range ks {
				f.l.Allow(k)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		f.bytesPerKey = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
		keyedFilled[im.name+"/"+set] = f
	}
	b.ReportAllocs()
	b.ResetTimer()
	j, allowed := 0, 0
	for i := 0; i < b.N; i++ {
		if f.l.Allow(ks[j]) {
			allowed++
		}
		if j++; j == n {
			j = 0
		}
	}
	b.StopTimer()
	sinkAllowed.Add(int64(allowed))
	b.ReportMetric(f.bytesPerKey, "B/key")
}
