package bench

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	fslimiter "github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/retrykit/backoff"
)

// The adaptive pacers against the anchors users would pick instead:
// failsafe-go's adaptivelimiter and adaptivethrottler, and the client-side
// rate limiter of the AWS SDK's adaptive retry mode. This file holds the
// method sets they share, the per-call costs and the checks that the
// adapters do what they claim; adaptive_scenario_test.go drives them through
// a capacity drop, an outage and a shared quota in real time.

// adaptiveLimiter is an adaptive concurrency limiter: our AdaptiveLimiter or
// failsafe-go's adaptivelimiter.AdaptiveLimiter, each behind a thin adapter
// that returns the permit in a permit value.
type adaptiveLimiter interface {
	TryAcquire() (permit, bool)
	Acquire(ctx context.Context) (permit, error)
	Limit() int
}

// permit is a permit of either library: ours by value and failsafe-go's
// interface, so that neither is boxed in another interface (which would
// allocate for ours). Both pay the same branch to end it.
type permit struct {
	ours     backoff.Permit
	failsafe fslimiter.Permit
}

// Record ends the permit of a call that succeeded: its latency is a sample.
func (p *permit) Record() {
	if p.failsafe != nil {
		p.failsafe.Record()
		return
	}
	p.ours.Record()
}

// limiterConfig configures an adaptive limiter; zero fields leave each
// library's default. recentWindow is the shortest window of samples of
// failsafe-go's limiter (1 s by default); ours has no such window (it
// updates every 16 samples) and ignores it.
type limiterConfig struct {
	minLimit     int
	recentWindow time.Duration
}

// throttler is client-side throttling (the SRE book's): our Throttler, and
// failsafe-go's adaptivethrottler behind an adapter. Allow asks before a
// request; Record reports whether the downstream accepted one that was sent.
type throttler interface {
	Allow() bool
	Record(accepted bool)
}

// throttlerK is the multiplier of every throttler compared: the SRE book's
// k = 2 (failsafe-go: a failure-rate threshold of 0.5, which allows
// successes/0.5 executions).
const throttlerK = 2

// pacerConfig is how an adaptivePacer is made. failFast makes an AWS pacer
// fail at once instead of waiting when it has no token
// (AdaptiveModeOptions.FailOnNoAttemptTokens): Allow needs it, Wait needs it
// off; ours has both methods and ignores it. unlimitedStart starts ours with
// no limit until the first throttling answer, as AWS's always starts, where
// a row compares the two before any throttling; without it ours starts at
// its default rate, as users get it.
type pacerConfig struct{ failFast, unlimitedStart bool }

// adaptivePacer is a request rate learned from throttling answers: our
// AdaptiveRate, or the client-side rate limiter of the AWS SDK's
// retry.AdaptiveMode, whose attempt token's release reports the answer.
// Allow never waits; Wait waits for a slot.
type adaptivePacer interface {
	Allow() (rateAttempt, bool)
	Wait(ctx context.Context) (rateAttempt, error)
}

// rateAttempt is one request let through by an adaptivePacer, to report the
// answer to: our AdaptiveRate, or the AWS SDK's attempt-token release.
type rateAttempt struct {
	ours    *backoff.AdaptiveRate
	release func(error) error
}

// Succeeded reports an answer that was not throttling.
func (a rateAttempt) Succeeded() {
	if a.release != nil {
		_ = a.release(nil)
		return
	}
	a.ours.Succeeded()
}

// Throttled reports a throttling answer (a 429) without a Retry-After.
func (a rateAttempt) Throttled() {
	if a.release != nil {
		_ = a.release(errThrottled)
		return
	}
	a.ours.Throttled(0)
}

// errThrottled is a 429 as the AWS SDK classifies it: an API error whose
// code is one of retry.DefaultThrottleErrorCodes.
var errThrottled error = throttleError{}

type throttleError struct{}

func (throttleError) Error() string     { return "429 Too Many Requests" }
func (throttleError) ErrorCode() string { return "ThrottlingException" }

// The registries, which ours_adaptive_test.go and theirs_adaptive_test.go
// fill.
var (
	adaptiveLimiterImpls []impl[func(limiterConfig) adaptiveLimiter]
	throttlerImpls       []impl[func(window time.Duration) throttler]
	adaptivePacerImpls   []impl[func(pacerConfig) adaptivePacer]
)

// twoGoroutines runs body on exactly 2 goroutines with b.RunParallel, the
// contended rows (mode=2goroutines).
func twoGoroutines(b *testing.B, body func(pb *testing.PB)) {
	procs := runtime.GOMAXPROCS(0)
	if procs > 2 {
		b.Skipf("2 goroutines need GOMAXPROCS ≤ 2 (run with -test.cpu=2); GOMAXPROCS is %d", procs)
	}
	b.SetParallelism(2 / procs)
	b.RunParallel(body)
}

var sinkRefused atomic.Int64

// permitLimiterConfig is the limiter of BenchmarkAdaptivePermit: each
// library's defaults (initial limit 20) with a minimum of 8, so that the two
// goroutines always find room however the limit moves.
var permitLimiterConfig = limiterConfig{minLimit: 8}

// BenchmarkAdaptivePermit measures acquiring a permit of an adaptive
// concurrency limiter that has room and ending it as a success (a latency
// sample): op=try is TryAcquire + Record (failsafe-go: TryAcquirePermit +
// Record), op=acquire is Acquire(ctx) + Record (failsafe-go: AcquirePermit),
// from one goroutine and from 2 at once on one limiter.
func BenchmarkAdaptivePermit(b *testing.B) {
	forEach(b, adaptiveLimiterImpls, func(b *testing.B, mk func(limiterConfig) adaptiveLimiter) {
		ctx := context.Background()
		ops := []struct {
			name string
			op   func(l adaptiveLimiter) bool
		}{
			{"try", func(l adaptiveLimiter) bool {
				p, ok := l.TryAcquire()
				if ok {
					p.Record()
				}
				return ok
			}},
			{"acquire", func(l adaptiveLimiter) bool {
				p, err := l.Acquire(ctx)
				if err != nil {
					return false
				}
				p.Record()
				return true
			}},
		}
		for _, o := range ops {
			b.Run("op="+o.name+"/mode=serial", func(b *testing.B) {
				b.ReportAllocs()
				l := mk(permitLimiterConfig)
				for b.Loop() {
					if !o.op(l) {
						b.Fatal("refused with room")
					}
				}
			})
			b.Run("op="+o.name+"/mode=2goroutines", func(b *testing.B) {
				b.ReportAllocs()
				l := mk(permitLimiterConfig)
				twoGoroutines(b, func(pb *testing.PB) {
					for pb.Next() {
						if !o.op(l) {
							b.Error("refused with room")
							return
						}
					}
				})
			})
		}
	})
}

// BenchmarkThrottlerDecision measures a throttling decision and the report
// of its outcome (Allow + Record(true); failsafe-go: TryAcquirePermit +
// RecordSuccess) with k = 2 over a 1-minute window, the downstream
// accepting everything, from one goroutine and from 2 at once.
func BenchmarkThrottlerDecision(b *testing.B) {
	forEach(b, throttlerImpls, func(b *testing.B, mk func(time.Duration) throttler) {
		op := func(t throttler) bool {
			if !t.Allow() {
				return false
			}
			t.Record(true)
			return true
		}
		b.Run("mode=serial", func(b *testing.B) {
			b.ReportAllocs()
			t := mk(time.Minute)
			for b.Loop() {
				if !op(t) {
					b.Fatal("rejected while the downstream accepts everything")
				}
			}
		})
		b.Run("mode=2goroutines", func(b *testing.B) {
			b.ReportAllocs()
			t := mk(time.Minute)
			twoGoroutines(b, func(pb *testing.PB) {
				for pb.Next() {
					if !op(t) {
						b.Error("rejected while the downstream accepts everything")
						return
					}
				}
			})
		})
	})
}

// BenchmarkAdaptiveRateAllow measures Allow and the report of a success
// (ours: Allow + Succeeded; AWS: GetAttemptToken with FailOnNoAttemptTokens
// + release(nil)), from one goroutine and from 2 at once, in two states:
// state=open, before any throttling answer (both let everything through),
// and state=paced, after one 429 met a send rate near the benchmark's own,
// so that the rate law runs on every call. refused% is the share of calls
// refused in state=paced (a refused call costs less).
func BenchmarkAdaptiveRateAllow(b *testing.B) {
	forEach(b, adaptivePacerImpls, func(b *testing.B, mk func(pacerConfig) adaptivePacer) {
		for _, state := range []string{"open", "paced"} {
			fresh := func() adaptivePacer {
				p := mk(pacerConfig{failFast: true, unlimitedStart: true})
				if state == "paced" {
					primePacer(p)
				}
				return p
			}
			b.Run("state="+state+"/mode=serial", func(b *testing.B) {
				b.ReportAllocs()
				p := fresh()
				var calls, refused int64
				for b.Loop() {
					calls++
					if a, ok := p.Allow(); ok {
						a.Succeeded()
					} else {
						refused++
					}
				}
				reportRefused(b, state, calls, refused)
			})
			// RunParallel calls the function once per b.N tried: prime once.
			var shared adaptivePacer
			b.Run("state="+state+"/mode=2goroutines", func(b *testing.B) {
				b.ReportAllocs()
				if shared == nil {
					shared = fresh()
					b.ResetTimer()
				}
				var calls, refused atomic.Int64
				twoGoroutines(b, func(pb *testing.PB) {
					var c, r int64
					for pb.Next() {
						c++
						if a, ok := shared.Allow(); ok {
							a.Succeeded()
						} else {
							r++
						}
					}
					calls.Add(c)
					refused.Add(r)
				})
				reportRefused(b, state, calls.Load(), refused.Load())
			})
		}
	})
}

func reportRefused(b *testing.B, state string, calls, refused int64) {
	sinkRefused.Add(refused)
	if state == "paced" && calls > 0 {
		b.ReportMetric(100*float64(refused)/float64(calls), "refused%")
	}
}

// primePacer puts a pacer in the paced state at about the rate of a tight
// loop: it sends successes for 600 ms (the AWS limiter measures its send rate
// over half-second buckets of the wall clock, and needs one to have ended),
// then reports one throttling answer.
func primePacer(p adaptivePacer) {
	var last rateAttempt
	for start := time.Now(); time.Since(start) < 600*time.Millisecond; {
		for range 1000 {
			if a, ok := p.Allow(); ok {
				a.Succeeded()
				last = a
			}
		}
	}
	last.Throttled()
}

// TestAdaptiveLimitersAdmitAndRecord checks that every adaptive limiter
// admits up to its limit with both methods, refuses beyond it, and counts a
// recorded permit free again.
func TestAdaptiveLimitersAdmitAndRecord(t *testing.T) {
	for _, im := range adaptiveLimiterImpls {
		t.Run(im.name, func(t *testing.T) {
			l := im.make(permitLimiterConfig)
			n := l.Limit()
			if n != 20 {
				t.Fatalf("initial Limit = %d, want 20 (both libraries' default)", n)
			}
			var held []permit
			for i := 0; i < n; i++ {
				var p permit
				var ok bool
				if i%2 == 0 {
					p, ok = l.TryAcquire()
				} else {
					var err error
					p, err = l.Acquire(context.Background())
					ok = err == nil
				}
				if !ok {
					// Ours measures its no-load latency first, at the initial
					// limit or half of it: admitting at least half is enough.
					if i < n/2 {
						t.Fatalf("permit %d of a limit of %d refused", i+1, n)
					}
					break
				}
				held = append(held, p)
			}
			if _, ok := l.TryAcquire(); ok {
				t.Fatalf("TryAcquire admitted a call beyond the %d held", len(held))
			}
			held[0].Record()
			p, ok := l.TryAcquire()
			if !ok {
				t.Fatal("TryAcquire refused after a permit ended")
			}
			p.Record()
			for i := range held[1:] {
				held[1+i].Record()
			}
		})
	}
}

// TestThrottlersAgree checks that every throttler lets everything through
// while the downstream accepts it, and rejects a good part of the requests
// once it accepts none.
func TestThrottlersAgree(t *testing.T) {
	for _, im := range throttlerImpls {
		t.Run(im.name, func(t *testing.T) {
			th := im.make(time.Minute)
			for i := 0; i < 1000; i++ {
				if !th.Allow() {
					t.Fatalf("request %d rejected while the downstream accepts everything", i+1)
				}
				th.Record(true)
			}
			allowed := 0
			for i := 0; i < 10000; i++ {
				if th.Allow() {
					allowed++
					th.Record(false)
				}
			}
			// Ours lets about 4,400 through (the requests reaching it settle
			// near k times the 1,000 accepts), failsafe-go about 5,300 (it
			// counts the executions, not the requests, and rejects at most
			// 90%).
			if allowed > 7500 || allowed < 1000 {
				t.Fatalf("%d of 10,000 requests allowed while the downstream refuses everything", allowed)
			}
		})
	}
}

// TestAdaptivePacersSlowDown checks that every pacer lets everything through
// until a throttling answer, and paces (refuses some calls of a tight loop)
// after one.
func TestAdaptivePacersSlowDown(t *testing.T) {
	for _, im := range adaptivePacerImpls {
		t.Run(im.name, func(t *testing.T) {
			p := im.make(pacerConfig{failFast: true, unlimitedStart: true})
			var a rateAttempt
			for i := 0; i < 1000; i++ {
				var ok bool
				if a, ok = p.Allow(); !ok {
					t.Fatalf("call %d refused before any throttling answer", i+1)
				}
				a.Succeeded()
			}
			a.Throttled()
			for i := 0; i < 1_000_000; i++ {
				if _, ok := p.Allow(); !ok {
					return
				}
			}
			t.Fatal("no call of a tight loop refused after a throttling answer")
		})
	}
	for _, im := range adaptivePacerImpls {
		t.Run(im.name+"/wait", func(t *testing.T) {
			p := im.make(pacerConfig{})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a, err := p.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			a.Succeeded()
		})
	}
}
