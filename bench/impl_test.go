package bench

import (
	"fmt"
	"testing"
	"time"
)

// queue is the method set every delaying queue under test shares: client-go's
// TypedRateLimitingInterface[int], controller-runtime's PriorityQueue[int]
// and ours all satisfy it, so every benchmark body calls them identically
// (one interface call each).
type queue interface {
	Add(item int)
	AddAfter(item int, d time.Duration)
	Get() (item int, shutdown bool)
	Done(item int)
	Len() int
	ShutDown()
}

// limiter is the method set of client-go's workqueue.TypedRateLimiter[string]
// and of our RateLimiter[string].
type limiter interface {
	When(item string) time.Duration
	Forget(item string)
	NumRequeues(item string) int
}

// perKeyBackoff is the part of client-go's flowcontrol.Backoff that our
// Backoff mirrors and the benchmarks call.
type perKeyBackoff interface {
	Next(id string, eventTime time.Time)
	IsInBackOffSince(id string, eventTime time.Time) bool
	Get(id string) time.Duration
}

// impl is one implementation of a comparison: its name (the impl=NAME
// sub-benchmark) and how to build a fresh instance.
type impl[F any] struct {
	name string
	make F
}

// The registries. The files named for each library append to them from init;
// ours_*_test.go add our implementation as each part of the library lands.
var (
	queueImpls        []impl[func() queue]
	backoffImpls      []impl[func() perKeyBackoff]
	itemExpImpls      []impl[func() limiter] // 5ms..1000s item-exponential
	controllerImpls   []impl[func() limiter] // the default controller limiter
	bucketImpls       []impl[func() limiter] // a 10 qps, burst 100 token bucket
	retryImpls        []impl[retryFunc]
	latenessImplsOnly []impl[func() queue] // extra rows for lateness only (the timer floors)
)

// retryFunc makes one retried call: fn is called until it returns nil, at
// most attempts times, waiting delay between attempts.
type retryFunc func(attempts int, delay time.Duration, fn func() error) error

// forEach runs body once per implementation as sub-benchmark impl=NAME.
func forEach[F any](b *testing.B, impls []impl[F], body func(b *testing.B, mk F)) {
	b.Helper()
	if len(impls) == 0 {
		b.Skip("no implementation registered")
	}
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			b.ReportAllocs()
			body(b, im.make)
		})
	}
}

// keys returns n distinct object keys shaped like a controller's
// namespace/name keys.
func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("ns-%d/object-%d", i%97, i)
	}
	return ks
}

// count formats n the way the sub-benchmark names show sizes.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
