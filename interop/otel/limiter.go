package otel

import (
	"context"
	"sync/atomic"

	"github.com/retrykit/backoff"
)

type limiterObservation struct {
	name    string
	limiter *backoff.Limiter
}

type pacerObservation struct {
	name  string
	pacer backoff.Pacer
}

// ObservePacer reports an adaptive pacer's state under name, read when the
// metrics are collected, until the returned function is called: a
// backoff.AdaptiveLimiter's limit and permits in flight
// (retrykit.adaptive_limiter.limit, retrykit.adaptive_limiter.inflight), a
// backoff.AdaptiveRate's rate (retrykit.adaptive_rate.rate), a
// backoff.Throttler's local rejections (retrykit.throttler.rejected), or a
// backoff.Breaker's state, changes of state and refusals
// (retrykit.breaker.state, retrykit.breaker.transitions,
// retrykit.breaker.rejected). Reading a Breaker's state moves an open
// breaker whose open time has passed to half-open, as its next call would;
// its state-change function may then run on the collecting goroutine. A
// backoff.Limiter reports nothing here: observe it with
// [Metrics.ObserveLimiter]. ObservePacer panics if name is empty or p is
// nil.
func (m *Metrics) ObservePacer(name string, p backoff.Pacer) (stop func()) {
	if name == "" {
		panic("otel: ObservePacer: name must not be empty")
	}
	if p == nil {
		panic("otel: ObservePacer: p must not be nil")
	}
	return observe(m, m.pacers, &pacerObservation{name: name, pacer: p})
}

type keyedObservation struct {
	name    string
	limiter interface{ Len() int }
}

// ObserveLimiter reports l's rate, burst and tokens in
// retrykit.limiter.limit, retrykit.limiter.burst and
// retrykit.limiter.tokens under name, read from l when the metrics are
// collected, until the returned function is called: the limiter's hot
// path (Allow, Wait, Reserve) is untouched. An infinite rate
// (backoff.InfLimit) is reported as is, about 1.8e308. Observe each
// limiter once, under a name no other limiter uses. ObserveLimiter panics
// if name is empty or l is nil.
func (m *Metrics) ObserveLimiter(name string, l *backoff.Limiter) (stop func()) {
	if name == "" {
		panic("otel: ObserveLimiter: name must not be empty")
	}
	if l == nil {
		panic("otel: ObserveLimiter: l must not be nil")
	}
	return observe(m, m.limiters, &limiterObservation{name: name, limiter: l})
}

// ObserveKeyedLimiter reports how many keys k tracks (its Len, for a
// backoff.KeyedLimiter of any key type) in retrykit.keyed_limiter.keys
// under name, until the returned function is called. ObserveKeyedLimiter
// panics if name is empty or k is nil.
func (m *Metrics) ObserveKeyedLimiter(name string, k interface{ Len() int }) (stop func()) {
	if name == "" {
		panic("otel: ObserveKeyedLimiter: name must not be empty")
	}
	if k == nil {
		panic("otel: ObserveKeyedLimiter: k must not be nil")
	}
	return observe(m, m.keyedLimiters, &keyedObservation{name: name, limiter: k})
}

// admissions counts the decisions of a wrapped limiter.
type admissions struct {
	name               string
	admitted, rejected atomic.Int64
}

// count records one decision.
func (a *admissions) count(ok bool) bool {
	if ok {
		a.admitted.Add(1)
	} else {
		a.rejected.Add(1)
	}
	return ok
}

// Limiter is a backoff.Limiter whose Allow, AllowN, Wait and WaitN count
// their decisions in retrykit.limiter.admitted and
// retrykit.limiter.rejected (a Wait that returns an error is a rejection).
// Reserve and ReserveN, and the methods that change or read the limiter,
// are the embedded Limiter's, uncounted. Each counted call costs an atomic
// add on top of the Limiter's own. Get one from [Metrics.WrapLimiter].
//
// A Limiter is safe for concurrent use by multiple goroutines. Its zero
// value is not usable.
type Limiter struct {
	*backoff.Limiter
	a *admissions
}

// WrapLimiter returns l wrapped to count its decisions under name, and
// observes it as [Metrics.ObserveLimiter] does, until stop is called.
// WrapLimiter panics if name is empty or l is nil.
func (m *Metrics) WrapLimiter(name string, l *backoff.Limiter) (wrapped *Limiter, stop func()) {
	if name == "" {
		panic("otel: WrapLimiter: name must not be empty")
	}
	if l == nil {
		panic("otel: WrapLimiter: l must not be nil")
	}
	stopGauges := m.ObserveLimiter(name, l)
	a := &admissions{name: name}
	stopCounts := observe(m, m.admissions, a)
	return &Limiter{Limiter: l, a: a}, func() { stopGauges(); stopCounts() }
}

// Allow is backoff.Limiter.Allow, counted.
func (l *Limiter) Allow() bool { return l.a.count(l.Limiter.Allow()) }

// AllowN is backoff.Limiter.AllowN, counted.
func (l *Limiter) AllowN(n int) bool { return l.a.count(l.Limiter.AllowN(n)) }

// Wait is backoff.Limiter.Wait, counted.
func (l *Limiter) Wait(ctx context.Context) error {
	err := l.Limiter.Wait(ctx)
	l.a.count(err == nil)
	return err
}

// WaitN is backoff.Limiter.WaitN, counted.
func (l *Limiter) WaitN(ctx context.Context, n int) error {
	err := l.Limiter.WaitN(ctx, n)
	l.a.count(err == nil)
	return err
}

// KeyedLimiter is a backoff.KeyedLimiter whose Allow, AllowN and Wait
// count their decisions, over all keys, as [Limiter]'s do. Get one from
// [WrapKeyedLimiter].
//
// A KeyedLimiter is safe for concurrent use by multiple goroutines. Its
// zero value is not usable.
type KeyedLimiter[K comparable] struct {
	*backoff.KeyedLimiter[K]
	a *admissions
}

// WrapKeyedLimiter returns k wrapped to count its decisions under name, and
// observes it as [Metrics.ObserveKeyedLimiter] does, until stop is called.
// WrapKeyedLimiter panics if name is empty or k is nil.
func WrapKeyedLimiter[K comparable](m *Metrics, name string, k *backoff.KeyedLimiter[K]) (wrapped *KeyedLimiter[K], stop func()) {
	if name == "" {
		panic("otel: WrapKeyedLimiter: name must not be empty")
	}
	if k == nil {
		panic("otel: WrapKeyedLimiter: k must not be nil")
	}
	stopGauges := m.ObserveKeyedLimiter(name, k)
	a := &admissions{name: name}
	stopCounts := observe(m, m.admissions, a)
	return &KeyedLimiter[K]{KeyedLimiter: k, a: a}, func() { stopGauges(); stopCounts() }
}

// Allow is backoff.KeyedLimiter.Allow, counted.
func (k *KeyedLimiter[K]) Allow(key K) bool { return k.a.count(k.KeyedLimiter.Allow(key)) }

// AllowN is backoff.KeyedLimiter.AllowN, counted.
func (k *KeyedLimiter[K]) AllowN(key K, n int) bool {
	return k.a.count(k.KeyedLimiter.AllowN(key, n))
}

// Wait is backoff.KeyedLimiter.Wait, counted.
func (k *KeyedLimiter[K]) Wait(ctx context.Context, key K) error {
	err := k.KeyedLimiter.Wait(ctx, key)
	k.a.count(err == nil)
	return err
}
