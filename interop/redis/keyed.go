package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// KeyedLimiter is one shared limit per key (per client, per tenant, per
// endpoint): every key has its own token bucket of the same rate and burst,
// kept in Redis as <prefix>{name}:<key>, shared by every process that uses
// the same Redis and name. A key costs Redis memory only while its bucket is
// not full: its entry expires as the bucket refills. All keys of one
// KeyedLimiter share the hash tag {name}, so in a Redis Cluster they live in
// one slot, and [KeyedLimiter.AllowBatch] decides for many keys in one round
// trip; [WithSpreadKeys] spreads them over a Cluster's masters, one round
// trip per master.
//
// The methods are [Limiter]'s, with the key after the context. Keys are
// strings, since Redis keys are. A KeyedLimiter is safe for concurrent use.
// Its zero value is not usable: use [NewKeyedLimiter].
type KeyedLimiter struct {
	l      *gcra
	layout keyLayout
}

// NewKeyedLimiter returns a [KeyedLimiter] of r events per second and the
// given burst for each key. Its arguments are [NewLimiter]'s, with the same
// panics; the local fallback remembers at most [WithFallbackKeys] keys.
func NewKeyedLimiter(client goredis.UniversalClient, name string, r float64, burst int, opts ...Option) *KeyedLimiter {
	const where = "NewKeyedLimiter"
	c := newConfig(opts)
	kl := newKeyLayout(where, c, name)
	return &KeyedLimiter{l: newGCRA(where, client, kl.what(), r, burst, c, true), layout: kl}
}

// Key returns the Redis key that holds key's limit.
func (k *KeyedLimiter) Key(key string) string { return k.layout.key(key) }

// Allow reports whether one event for key may happen now; see
// [Limiter.Allow].
func (k *KeyedLimiter) Allow(ctx context.Context, key string) bool {
	r, err := k.l.allow(ctx, k.layout.key(key), 1)
	return err == nil && r.Allowed
}

// AllowN reports whether n events for key may happen now; see
// [Limiter.AllowN].
func (k *KeyedLimiter) AllowN(ctx context.Context, key string, n int) (Result, error) {
	return k.l.allow(ctx, k.layout.key(key), n)
}

// AllowBatch decides, in one round trip, whether one event may happen now
// for each of keys, and takes it for those where it may. With keys spread
// over a Cluster ([WithSpreadKeys]) it is one script call per master, in one
// round trip to each master, to the masters at once. The i-th result
// belongs to keys[i]; a key that appears twice is decided twice, in order.
// The error is as for [Limiter.AllowN], and then applies to every key. The
// decisions are independent: one refused key does not affect the others.
func (k *KeyedLimiter) AllowBatch(ctx context.Context, keys []string) ([]Result, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	full := make([]string, len(keys))
	for i, key := range keys {
		full[i] = k.layout.key(key)
	}
	ds := make([]decision, len(keys))
	if err := k.l.decide(ctx, full, 1, 0, ds); err != nil {
		return nil, err
	}
	out := make([]Result, len(ds))
	for i := range ds {
		out[i] = ds[i].Result
	}
	return out, nil
}

// Reserve is shorthand for ReserveN(ctx, key, 1); see [Limiter.Reserve].
func (k *KeyedLimiter) Reserve(ctx context.Context, key string) *Reservation {
	r, _ := k.l.reserve(ctx, k.layout.key(key), 1, -1)
	return r
}

// ReserveN takes n events for key; see [Limiter.ReserveN].
func (k *KeyedLimiter) ReserveN(ctx context.Context, key string, n int) (*Reservation, error) {
	return k.l.reserve(ctx, k.layout.key(key), n, -1)
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (k *KeyedLimiter) Wait(ctx context.Context, key string) error {
	return k.l.wait(ctx, k.layout.key(key), 1)
}

// WaitN blocks until n events for key may happen; see [Limiter.WaitN].
func (k *KeyedLimiter) WaitN(ctx context.Context, key string, n int) error {
	return k.l.wait(ctx, k.layout.key(key), n)
}

// Limit returns the rate of the keys without their own, in events per
// second.
func (k *KeyedLimiter) Limit() float64 { return k.l.params.Load().rate }

// Burst returns the burst of the keys without their own.
func (k *KeyedLimiter) Burst() int { return k.l.params.Load().burst }

// SetKeyLimit gives key its own rate and burst, in place of the limiter's,
// from the next decision on, as the library's KeyedLimiter.SetKeyLimit does.
// Like the rate and burst given to [NewKeyedLimiter], a key's own are this
// process's: every process that shares the limit must set the same (from the
// same configuration), or each decides by its own. The bucket kept in Redis
// carries over: its debt is kept in time, not in tokens, so an empty bucket
// refills at the new rate from where it stands. An r that is NaN or not
// positive counts as one event per million seconds (a bucket that never
// refills could never expire from Redis), and a negative burst as 0. While
// Redis is unavailable the fallback uses this process's share of them
// ([WithExpectedReplicas]). Own limits cost memory in this process until
// [KeyedLimiter.ClearKeyLimit]; setting one copies the table of own limits,
// so that decisions read it without a lock: meant for a few keys (tenants,
// plans), not for every key.
func (k *KeyedLimiter) SetKeyLimit(key string, r float64, burst int) {
	k.l.setOwn(k.layout.key(key), sanitizeParams(r, burst))
}

// ClearKeyLimit gives key the limiter's rate and burst again, from the next
// decision on.
func (k *KeyedLimiter) ClearKeyLimit(key string) { k.l.setOwn(k.layout.key(key), nil) }

// Tokens returns the events key could have admitted now (at most its burst,
// negative while reservations wait), read from Redis in one round trip that
// changes nothing. There is no shared value to read without Redis: when
// Redis is unavailable Tokens returns an error that wraps [ErrUnavailable],
// whether or not the limiter fails closed; when ctx ends, its cause.
func (k *KeyedLimiter) Tokens(ctx context.Context, key string) (float64, error) {
	return k.l.tokens(ctx, k.layout.key(key))
}

// Stats returns the limiter's counters of decisions and failures.
func (k *KeyedLimiter) Stats() Stats { return k.l.guard.stats() }
