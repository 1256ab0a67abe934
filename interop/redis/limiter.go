package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// Limiter is a token bucket shared by every process that uses the same Redis
// and name: r events per second on average, at most burst at once, decided by
// the generic cell rate algorithm in one Redis round trip per decision at
// most (concurrent decisions share one), on the Redis server's clock. For the same r and burst it admits the events
// that github.com/go-redis/redis_rate admits with Limit{Rate: r, Burst:
// burst, Period: time.Second}.
//
// Its methods have the names of golang.org/x/time/rate's Limiter (and of the
// library's in-process Limiter), with a context first, because each decision
// is a network call: Allow(ctx) for the common yes/no, AllowN(ctx, n) for the
// detail and the error, Reserve, Wait and WaitN. When Redis is unavailable,
// slow or failing, the decision falls back as the options say (see
// [WithExpectedReplicas], [WithFailClosed]); no call waits for Redis longer
// than [WithTimeout].
//
// A Limiter is safe for concurrent use. Its zero value is not usable: use
// [NewLimiter].
type Limiter struct {
	l   *gcra
	key string
}

// NewLimiter returns a [Limiter] of r events per second and the given burst,
// kept in client under the key <prefix>{name} (see [WithPrefix]). Processes
// that pass the same name (and prefix) to the same Redis share the limit; they
// must pass the same r and burst. client may be a single server's client, a
// Sentinel failover client or a Cluster client.
//
// r may be math.Inf(1), which admits every event (still one round trip).
// NewLimiter panics if client is nil, name is empty or contains '{' or '}',
// r is not positive (or NaN), or burst < 1.
func NewLimiter(client goredis.UniversalClient, name string, r float64, burst int, opts ...Option) *Limiter {
	const where = "NewLimiter"
	c := newConfig(opts)
	key := baseKey(where, c.prefix, name)
	return &Limiter{l: newGCRA(where, client, key, r, burst, c, false), key: key}
}

// Allow reports whether one event may happen now. It is shorthand for
// AllowN(ctx, 1) that reads false for any error.
func (l *Limiter) Allow(ctx context.Context) bool {
	r, err := l.l.allow(ctx, l.key, 1)
	return err == nil && r.Allowed
}

// AllowN reports whether n events may happen now, and takes them if so. An n
// of 0 or less is always allowed, without a round trip. The error is non-nil
// only when no decision was made: ctx ended ([context.Cause]), or Redis was
// unavailable and the limiter fails closed ([ErrUnavailable]); a refusal is
// Result.Allowed false with a nil error.
func (l *Limiter) AllowN(ctx context.Context, n int) (Result, error) {
	return l.l.allow(ctx, l.key, n)
}

// Reserve is shorthand for ReserveN(ctx, 1) that returns a reservation that
// is not OK on error.
func (l *Limiter) Reserve(ctx context.Context) *Reservation {
	r, _ := l.l.reserve(ctx, l.key, 1, -1)
	return r
}

// ReserveN takes n events now, for a time that may be in the future: the
// caller must wait [Reservation.Delay] before acting, or call
// [Reservation.Cancel]. The reservation is not OK if n exceeds the burst.
// The result is never nil; the error is as for AllowN.
func (l *Limiter) ReserveN(ctx context.Context, n int) (*Reservation, error) {
	return l.l.reserve(ctx, l.key, n, -1)
}

// Wait is shorthand for WaitN(ctx, 1).
func (l *Limiter) Wait(ctx context.Context) error { return l.l.wait(ctx, l.key, 1) }

// WaitN blocks until n events may happen, or ctx ends. It returns at once
// [ErrExceedsBurst] if n exceeds the burst, [ErrWouldExceedDeadline] if the
// wait would outlast ctx's deadline (reserving nothing), and the context's
// cause if ctx ends while waiting (the reservation is then cancelled).
func (l *Limiter) WaitN(ctx context.Context, n int) error { return l.l.wait(ctx, l.key, n) }

// Limit returns the rate, in events per second.
func (l *Limiter) Limit() float64 { return l.l.params.Load().rate }

// Burst returns the burst.
func (l *Limiter) Burst() int { return l.l.params.Load().burst }

// SetLimit changes the rate from the next decision on. Like the rate given to
// [NewLimiter], it is this process's: every process that shares the limit
// must set the same (from the same configuration), or each decides by its
// own. The bucket kept in Redis carries over: its debt is kept in time, not
// in tokens (unlike the library's Limiter.SetLimit), so an empty bucket
// refills at the new rate from where it stands, and a full one stays full.
// An r that is NaN or not positive counts as one event per million seconds
// (a bucket that never refills could never expire from Redis);
// math.Inf(1) admits every event. While Redis is unavailable the fallback
// uses this process's share of it ([WithExpectedReplicas]).
func (l *Limiter) SetLimit(r float64) {
	l.l.setParams(func(old *params) *params { return sanitizeParams(r, old.burst) })
}

// SetBurst changes the burst from the next decision on, with SetLimit's
// rules: every process must set the same, and the bucket carries over in
// time. A negative burst counts as 0, which admits nothing while the rate is
// finite.
func (l *Limiter) SetBurst(burst int) {
	l.l.setParams(func(old *params) *params { return sanitizeParams(old.rate, burst) })
}

// Tokens returns the events that could be admitted now (at most the burst,
// negative while reservations wait), read from Redis in one round trip that
// changes nothing. There is no shared value to read without Redis: when
// Redis is unavailable Tokens returns an error that wraps [ErrUnavailable],
// whether or not the limiter fails closed; when ctx ends, its cause.
func (l *Limiter) Tokens(ctx context.Context) (float64, error) { return l.l.tokens(ctx, l.key) }

// Key returns the Redis key that holds the limit.
func (l *Limiter) Key() string { return l.key }

// Stats returns the limiter's counters of decisions and failures.
func (l *Limiter) Stats() Stats { return l.l.guard.stats() }
