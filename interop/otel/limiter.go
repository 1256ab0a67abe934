package otel

import "github.com/retrykit/backoff"

type limiterObservation struct {
	name    string
	limiter *backoff.Limiter
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
	if name == "" || l == nil {
		panic("otel: ObserveLimiter: name must not be empty and l must not be nil")
	}
	return observe(m, m.limiters, &limiterObservation{name: name, limiter: l})
}

// ObserveKeyedLimiter reports how many keys k tracks (its Len, for a
// backoff.KeyedLimiter of any key type) in retrykit.keyed_limiter.keys
// under name, until the returned function is called. ObserveKeyedLimiter
// panics if name is empty or k is nil.
func (m *Metrics) ObserveKeyedLimiter(name string, k interface{ Len() int }) (stop func()) {
	if name == "" || k == nil {
		panic("otel: ObserveKeyedLimiter: name must not be empty and k must not be nil")
	}
	return observe(m, m.keyedLimiters, &keyedObservation{name: name, limiter: k})
}
