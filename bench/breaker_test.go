package bench

import (
	"errors"
	"testing"
	"time"
)

// callFunc makes one call through the mechanism under test (a breaker, a
// retry helper with a breaker, a hedged retry) of a function that succeeds
// at once. It returns the mechanism's error, nil when the call was made.
type callFunc func() error

// The registries of the breaker and hedging comparisons; ours_breaker_test.go
// and theirs_breaker_test.go append to them.
var (
	breakerImpls      []impl[func() callFunc] // a breaker's admission and the report of a success
	retryBreakerImpls []impl[func() callFunc] // a retry helper with a breaker, fn succeeding at once
	hedgeImpls        []impl[func() callFunc] // a hedged call whose hedge never fires
)

// succeed is the downstream of every call in these benchmarks. Every
// implementation calls it through this variable, so that no compiler can
// inline it into one implementation and not another.
var succeed = func() error { return nil }

// hedgeDelay is long enough that no hedge of BenchmarkHedgeNotFired fires.
const hedgeDelay = time.Hour

// errRefused is what an adapter returns when a breaker that answers with a
// bool refused a call.
var errRefused = errors.New("bench: refused")

// BenchmarkBreaker measures a circuit breaker's cost per call when nothing
// fails: the admission of a call, the call of a function that succeeds, and
// the report of its success. impl=ours is Allow + BreakerPermit.Done (with
// our default breaker, which keeps a 10 s rolling window of outcomes);
// impl=gobreaker is sony/gobreaker v2's Execute, with its default Settings
// (no window, counts never cleared); impl=failsafe is failsafe-go's
// count-based breaker (5 failures in a row), raw: TryAcquirePermit +
// RecordSuccess, no clock read; impl=failsafeexec is the same breaker
// through failsafe-go's executor, failsafe.With(cb).Get, built once. From
// one goroutine (mode=serial) and from GOMAXPROCS goroutines on one breaker
// (mode=parallel).
func BenchmarkBreaker(b *testing.B) {
	forEach(b, breakerImpls, func(b *testing.B, mk func() callFunc) {
		b.Run("mode=serial", func(b *testing.B) {
			b.ReportAllocs()
			call := mk()
			for b.Loop() {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("mode=parallel", func(b *testing.B) {
			b.ReportAllocs()
			call := mk()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := call(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	})
}

// BenchmarkRetryBreaker measures a retried call that succeeds at its first
// attempt, with a circuit breaker on every attempt, from one goroutine:
// impl=ours is Retry with WithPacer(breaker) (our default breaker, a
// 10 ms × 2ⁿ schedule of 5 attempts); impl=failsafeexec is failsafe-go's
// executor over a retry policy of 5 attempts with the same backoff and the
// count-based breaker of BenchmarkBreaker, failsafe.With(rp, cb).Get, built
// once.
func BenchmarkRetryBreaker(b *testing.B) {
	forEach(b, retryBreakerImpls, benchSerialCall)
}

// BenchmarkHedgeNotFired measures a hedged call whose hedge never fires
// (the delay is an hour; the function succeeds at once), from one
// goroutine: impl=ours is Retry with WithHedge; impl=nohedge is the same
// Retry without it; impl=plaintimer is that plain Retry followed by one
// time.AfterFunc armed and stopped, the cost of a plain attempt and one
// timer; impl=failsafe is failsafe-go's executor over a hedge policy with
// the same delay, failsafe.With(hp).Get, built once.
func BenchmarkHedgeNotFired(b *testing.B) {
	forEach(b, hedgeImpls, benchSerialCall)
}

// benchSerialCall runs the calls of mk from one goroutine.
func benchSerialCall(b *testing.B, mk func() callFunc) {
	call := mk()
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
}
