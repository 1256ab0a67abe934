package backoff

import (
	"reflect"

	"k8s.io/utils/clock"
)

// A rate-limited queue and its limiter each read a clock: the queue for its
// delays, a token bucket for its refills. Passing a FakeClock to one of them
// only leaves the other on the real clock, and the test that follows makes
// no sense (the bucket refills in real time while the queue's time stands
// still). The way to pass it once is one options slice for both:
//
//	opts := []backoff.Option{backoff.WithClock(fc)}
//	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](opts...), opts...)
//
// and NewRateLimitingQueue checks that the limiters this package built agree
// with the queue, so that a clock passed to one only fails at construction.

// clockedLimiter is a limiter of this package that reads a clock. A
// combination reports the clock of the first of its parts that reads one.
type clockedLimiter interface {
	limiterClock() (clock.PassiveClock, bool)
}

func (l *defaultControllerRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) {
	return l.clock, true
}

func (l *BucketRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) { return l.lim.clock, true }

func (l *MaxOfRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) {
	for _, rl := range l.limiters {
		if c, ok := rl.(clockedLimiter); ok {
			if clk, ok := c.limiterClock(); ok {
				return clk, true
			}
		}
	}
	return nil, false
}

func (l *WithMaxWaitRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) {
	if c, ok := l.limiter.(clockedLimiter); ok {
		return c.limiterClock()
	}
	return nil, false
}

// mustShareClock panics if limiter is one of this package's limiters that
// reads a clock, and that clock is not the queue's. Limiters of other
// packages are not checked.
func mustShareClock(where string, limiter any, queueClock clock.PassiveClock) {
	c, ok := limiter.(clockedLimiter)
	if !ok {
		return
	}
	lc, ok := c.limiterClock()
	if !ok || sameClock(lc, queueClock) {
		return
	}
	badUse(where, "the limiter reads another clock than the queue (pass the same WithClock to both, e.g. one []Option for both)")
}

// sameClock reports whether a and b are the same clock: equal values when
// their type is comparable (clock.RealClock{}, a *FakeClock), and false
// otherwise, rather than the panic of comparing them.
func sameClock(a, b clock.PassiveClock) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	return a == b
}
