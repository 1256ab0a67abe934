package redis

import (
	"math"
	"sync"
	"time"
)

// localBuckets is the fallback used while Redis is unavailable: token
// buckets, one per key, in this process, with x/time/rate's semantics (a
// bucket of burst tokens refilled at rate per second; n events take n tokens,
// and a reservation may take the bucket below zero, the deficit being the
// wait). It is deliberately small: it answers what the shared limiter
// answers (admit, reserve with a longest wait, cancel) so that it can be
// replaced by the library's own limiter with the same parameters.
//
// Memory: at most maxKeys buckets. A bucket that has refilled is equivalent
// to an absent one, so when the table is full such buckets are dropped; if
// none can be, a new key is refused rather than admitted without a limit.
type localBuckets struct {
	rate    float64 // tokens per second
	burst   float64
	maxKeys int

	mu      sync.Mutex
	buckets map[string]*localBucket
}

type localBucket struct {
	tokens float64
	last   time.Time // when tokens was computed; never moves back
}

func newLocalBuckets(rate float64, burst, maxKeys int) *localBuckets {
	return &localBuckets{rate: rate, burst: float64(burst), maxKeys: maxKeys, buckets: map[string]*localBucket{}}
}

// refill returns b's tokens at now. A clock stepped back earns nothing.
func (l *localBuckets) refill(b *localBucket, now time.Time) float64 {
	if !now.After(b.last) {
		return b.tokens
	}
	if math.IsInf(l.rate, 1) {
		return l.burst
	}
	return min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
}

// reserve takes n tokens from key's bucket at now if the wait this leaves is
// at most maxWait (any wait if maxWait < 0).
func (l *localBuckets) reserve(key string, n int, now time.Time, maxWait time.Duration) decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.maxKeys && !l.makeRoomLocked(now) {
			return decision{Result: Result{RetryAfter: -1}}
		}
		b = &localBucket{tokens: l.burst, last: now}
	}
	tokens := l.refill(b, now)
	if float64(n) > l.burst {
		return decision{Result: Result{RetryAfter: -1, Remaining: int(max(0, tokens))}}
	}
	left := tokens - float64(n)
	wait := time.Duration(0)
	if left < 0 {
		wait = time.Duration(math.Ceil(-left / l.rate * float64(time.Second)))
	}
	full := time.Duration(math.Ceil((l.burst - left) / l.rate * float64(time.Second)))
	if maxWait >= 0 && wait > maxWait {
		return decision{Result: Result{RetryAfter: wait, Remaining: int(max(0, tokens)),
			ResetAfter: time.Duration(math.Ceil((l.burst - tokens) / l.rate * float64(time.Second)))}}
	}
	b.tokens = left
	if now.After(b.last) {
		b.last = now
	}
	l.buckets[key] = b
	return decision{Result: Result{Allowed: true, Remaining: int(max(0, left)), ResetAfter: full}, delay: wait}
}

// makeRoomLocked drops the buckets that have refilled and reports whether
// there is room now.
func (l *localBuckets) makeRoomLocked(now time.Time) bool {
	for k, b := range l.buckets {
		if l.refill(b, now) >= l.burst {
			delete(l.buckets, k)
		}
	}
	return len(l.buckets) < l.maxKeys
}

// cancel gives back n tokens to key's bucket if the reservation, due at due,
// has not happened yet at now.
func (l *localBuckets) cancel(key string, n int, due, now time.Time) {
	if !due.After(now) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[key]; b != nil {
		b.tokens = min(l.burst, l.refill(b, now)+float64(n))
		if now.After(b.last) {
			b.last = now
		}
	}
}
