package backoff_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// newQueueClock returns a FakeClock at the tests' shared epoch.
func newQueueClock() *testingclock.FakeClock { return testingclock.NewFakeClock(epoch) }

// qLimiter is a RateLimiter for the queue tests: the delay of an item's n-th
// failure (n from 0) is delay(n). It counts its When calls.
type qLimiter[T comparable] struct {
	mu     sync.Mutex
	delay  func(n int) time.Duration
	counts map[T]int
	whens  int
}

func newQLimiter[T comparable](delay func(n int) time.Duration) *qLimiter[T] {
	return &qLimiter[T]{delay: delay, counts: map[T]int{}}
}

// qExponential is client-go's item-exponential series: base·2^n.
func qExponential(base time.Duration) func(n int) time.Duration {
	return func(n int) time.Duration { return base << n }
}

func (l *qLimiter[T]) When(item T) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.counts[item]
	l.counts[item] = n + 1
	l.whens++
	return l.delay(n)
}

func (l *qLimiter[T]) Forget(item T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.counts, item)
}

func (l *qLimiter[T]) NumRequeues(item T) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[item]
}

func (l *qLimiter[T]) Whens() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.whens
}

// getReady takes every item Get can hand out without blocking, in order,
// and marks each Done.
func getReady[T comparable](t *testing.T, q interface {
	Len() int
	Get() (T, bool)
	Done(T)
}) []T {
	t.Helper()
	var out []T
	for q.Len() > 0 {
		item, shutdown := q.Get()
		require.False(t, shutdown)
		q.Done(item)
		out = append(out, item)
	}
	return out
}

// getAsync calls Get on a goroutine and delivers what it returns.
type getResult[T any] struct {
	item     T
	shutdown bool
}

func getAsync[T comparable](q interface{ Get() (T, bool) }) <-chan getResult[T] {
	ch := make(chan getResult[T], 1)
	go func() {
		item, shutdown := q.Get()
		ch <- getResult[T]{item, shutdown}
	}()
	return ch
}

// get calls getFn (a queue's Get) on a goroutine and returns what it
// returns, through waitFor: a test that expects an item to be ready fails in
// seconds, naming the wait, when none is, instead of blocking in Get.
func get[T any](t testing.TB, getFn func() (T, bool), clocks ...fakeClockState) (T, bool) {
	t.Helper()
	ch := make(chan getResult[T], 1)
	go func() {
		item, shutdown := getFn()
		ch <- getResult[T]{item, shutdown}
	}()
	r := waitFor(t, "Get to hand out an item or report shutdown (is an item ready?)", ch, clocks...)
	return r.item, r.shutdown
}

// interfaces with client-go's method sets, checked at compile time below.
type (
	typedInterface[T comparable] interface {
		Add(item T)
		Len() int
		Get() (item T, shutdown bool)
		Done(item T)
		ShutDown()
		ShutDownWithDrain()
		ShuttingDown() bool
	}
	typedDelayingInterface[T comparable] interface {
		typedInterface[T]
		AddAfter(item T, duration time.Duration)
	}
	typedRateLimitingInterface[T comparable] interface {
		typedDelayingInterface[T]
		AddRateLimited(item T)
		Forget(item T)
		NumRequeues(item T) int
	}
)

var (
	_ typedInterface[string]             = (*backoff.Queue[string])(nil)
	_ typedDelayingInterface[string]     = (*backoff.DelayingQueue[string])(nil)
	_ typedRateLimitingInterface[string] = (*backoff.RateLimitingQueue[string])(nil)
	_ backoff.RateLimiter[int]           = (*qLimiter[int])(nil)
)
