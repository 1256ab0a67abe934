package redis

import (
	"math"
	"time"

	"github.com/retrykit/backoff"
)

// fallback decides while Redis is unavailable, in this process, with the
// library's own limiters (backoff.Limiter for a Limiter,
// backoff.KeyedLimiter for a KeyedLimiter, keyed by Redis key), given this
// process's share of the shared rate and burst ([WithExpectedReplicas]).
type fallback struct {
	replicas int
	single   *backoff.Limiter
	keyed    *backoff.KeyedLimiter[string]
}

func newFallback(keyed bool, r float64, burst int, c config) *fallback {
	f := &fallback{replicas: c.replicas}
	r, burst = f.share(r, burst)
	if keyed {
		f.keyed = backoff.NewKeyedLimiter[string](r, burst, backoff.WithClock(c.clock), backoff.WithMaxKeys(c.fallbackKeys))
	} else {
		f.single = backoff.NewLimiter(r, burst, backoff.WithClock(c.clock))
	}
	return f
}

// share returns this process's share of a shared rate and burst: divided by
// the replicas, a burst of at least 1 unless the shared burst is 0.
func (f *fallback) share(r float64, burst int) (float64, int) {
	b := burst / f.replicas
	if burst > 0 {
		b = max(b, 1)
	}
	return r / float64(f.replicas), b
}

// setLimit gives the fallback the share of a new shared rate and burst.
// A KeyedLimiter's cannot change (only a key's own can); its callers never
// ask.
func (f *fallback) setLimit(r float64, burst int) {
	if f.single != nil {
		r, burst = f.share(r, burst)
		f.single.SetLimit(r)
		f.single.SetBurst(burst)
	}
}

// setKeyLimit gives key the share of its own rate and burst, or the
// limiter's again when p is nil.
func (f *fallback) setKeyLimit(key string, p *params) {
	if f.keyed == nil {
		return
	}
	if p == nil {
		f.keyed.ClearKeyLimit(key)
		return
	}
	r, burst := f.share(p.rate, p.burst)
	f.keyed.SetKeyLimit(key, r, burst)
}

// reserve decides locally for n events of key, whose shared rate and burst
// are p, admitting them if the wait is at most maxWait (any wait if maxWait
// < 0). Remaining and ResetAfter are those of the local Limiter; the local
// KeyedLimiter does not tell a key's tokens, so they are 0 for it.
func (f *fallback) reserve(key string, n int, p *params, maxWait time.Duration) decision {
	rate, burst := f.share(p.rate, p.burst)
	if n > burst && p.interval != 0 {
		return f.result(decision{Result: Result{RetryAfter: -1}}, rate, burst)
	}
	if maxWait == 0 && f.allow(key, n) {
		// Allow's common case, without building reservations.
		return f.result(decision{Result: Result{Allowed: true}}, rate, burst)
	}
	var rs []backoff.Reservation
	if f.single != nil {
		rs = []backoff.Reservation{f.single.ReserveN(n)}
	} else {
		// The library's KeyedLimiter reserves one event at a time; n
		// reservations made in a row leave the bucket, and the last one's
		// delay, as one reservation of n would.
		rs = make([]backoff.Reservation, n)
		for i := range rs {
			rs[i] = f.keyed.Reserve(key)
		}
	}
	last := rs[len(rs)-1]
	delay := last.Delay()
	if !last.OK() || (maxWait >= 0 && delay > maxWait) {
		for i := len(rs) - 1; i >= 0; i-- {
			rs[i].Cancel()
		}
		if !last.OK() {
			delay = -1
		}
		return f.result(decision{Result: Result{RetryAfter: delay}}, rate, burst)
	}
	return f.result(decision{Result: Result{Allowed: true}, delay: delay, local: rs}, rate, burst)
}

func (f *fallback) allow(key string, n int) bool {
	if f.single != nil {
		return f.single.AllowN(n)
	}
	return f.keyed.AllowN(key, n)
}

// result fills in d's Remaining and ResetAfter from the local Limiter.
func (f *fallback) result(d decision, rate float64, burst int) decision {
	if f.single == nil || math.IsInf(rate, 1) {
		return d
	}
	tokens := f.single.Tokens()
	d.Remaining = int(max(0, tokens))
	d.ResetAfter = time.Duration(math.Ceil((float64(burst) - tokens) / rate * float64(time.Second)))
	return d
}
