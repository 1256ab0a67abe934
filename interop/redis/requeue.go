package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrykit/backoff"
)

// failureScript counts a failure of KEYS[1] and renews its expiry (ARGV[1]
// ms); it returns the count including this failure.
var failureScript = goredis.NewScript(`
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n
`)

// ItemExponentialFailureRateLimiter is the library's
// backoff.ItemExponentialFailureRateLimiter with its failure counts in Redis,
// so that the processes that share a Redis and a name share each item's
// backoff: when a controller's leader fails over, the new leader continues
// every failing item's backoff where the old one left it, instead of starting
// again at baseDelay and hammering the broken dependency when it is down.
//
// It implements backoff.RateLimiter[T], so it plugs into
// backoff.NewRateLimitingQueue and backoff.NewMaxOfRateLimiter (for example
// with a backoff.NewBucketRateLimiter, as backoff.DefaultControllerRateLimiter
// composes). When is one round trip (INCR and PEXPIRE in one script), Forget
// one DEL, NumRequeues one GET.
//
// An item's Redis key is <prefix>{name}:<item> (<prefix>{name:<item>}
// [WithSpreadKeys]), item printed as a string is
// (itself), by its String method if it has one, or with fmt's %v otherwise:
// items with the same printed form share a count. Counts expire
// [WithFailureTTL] after an item's latest failure.
//
// While Redis is unavailable, When, Forget and NumRequeues use an in-process
// backoff.ItemExponentialFailureRateLimiter with the same delays, whose counts
// start from zero (so an item's delays start again at baseDelay during an
// outage), or, [WithFailClosed], When returns maxDelay. When Redis is back,
// the counts in Redis are used again; a Forget made during the outage did
// not reach Redis, so that item's count there expires by its TTL.
//
// It is safe for concurrent use. Its zero value is not usable: use
// [NewItemExponentialFailureRateLimiter].
type ItemExponentialFailureRateLimiter[T comparable] struct {
	client    goredis.UniversalClient
	guard     *guard
	layout    keyLayout
	baseDelay time.Duration
	maxDelay  time.Duration
	ttlArg    int64 // ms
	local     *backoff.ItemExponentialFailureRateLimiter[string]
}

// NewItemExponentialFailureRateLimiter returns a shared
// [ItemExponentialFailureRateLimiter] whose delays start at baseDelay and
// double with each failure of an item, up to maxDelay, exactly as
// backoff.NewItemExponentialFailureRateLimiter's. It panics if client is nil,
// name is empty or contains '{' or '}', baseDelay is not positive, maxDelay is
// negative, or maxDelay is below baseDelay.
func NewItemExponentialFailureRateLimiter[T comparable](client goredis.UniversalClient, name string, baseDelay, maxDelay time.Duration, opts ...Option) *ItemExponentialFailureRateLimiter[T] {
	const where = "NewItemExponentialFailureRateLimiter"
	mustBeClient(where, client)
	c := newConfig(opts)
	kl := newKeyLayout(where, c, name)
	// The library's rule for the delays, checked here so that the message
	// names this constructor and this package.
	if baseDelay <= 0 {
		badArgument(where, "baseDelay must be positive", baseDelay)
	}
	if maxDelay < baseDelay {
		badArgument(where, "maxDelay must not be less than baseDelay "+baseDelay.String(), maxDelay)
	}
	checkClient(client, c, kl.what())
	local := backoff.NewItemExponentialFailureRateLimiter[string](baseDelay, maxDelay)
	ttl := c.failureTTL
	if ttl == 0 {
		ttl = max(time.Minute, 2*maxDelay)
	}
	return &ItemExponentialFailureRateLimiter[T]{
		client:    client,
		guard:     newGuard(kl.what(), client, c),
		layout:    kl,
		baseDelay: baseDelay,
		maxDelay:  maxDelay,
		ttlArg:    ttl.Milliseconds(),
		local:     local,
	}
}

// itemKey prints item as described on the type.
func itemKey[T comparable](item T) string {
	switch v := any(item).(type) {
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	default:
		return fmt.Sprint(item)
	}
}

// delay returns baseDelay·2^(n-1) capped at maxDelay, for the n-th failure,
// without overflow.
func (l *ItemExponentialFailureRateLimiter[T]) delay(n int64) time.Duration {
	d := l.baseDelay
	if d == 0 {
		return 0
	}
	for i := int64(1); i < n && d < l.maxDelay; i++ {
		if d > l.maxDelay/2 {
			return l.maxDelay
		}
		d *= 2
	}
	return min(d, l.maxDelay)
}

// When counts a failure of item in Redis and returns baseDelay·2^n capped at
// maxDelay, n being the failures counted before this one by any process. It
// blocks for at most the limiter's timeout; see the type for what happens
// when Redis is unavailable.
func (l *ItemExponentialFailureRateLimiter[T]) When(item T) time.Duration {
	key := itemKey(item)
	var cause error
	if l.guard.tryRedis() {
		var n int64
		err := l.guard.run(context.Background(), func(ctx context.Context) error {
			var err error
			n, err = failureScript.Run(ctx, l.client, []string{l.layout.key(key)}, l.ttlArg).Int64()
			return err
		})
		if err == nil {
			return l.delay(n)
		}
		cause = err
	}
	if l.guard.unavailable(cause) != nil {
		return l.maxDelay
	}
	return l.local.When(key)
}

// Forget deletes item's failure count in Redis (and in the fallback), so that
// its next When returns baseDelay.
func (l *ItemExponentialFailureRateLimiter[T]) Forget(item T) {
	key := itemKey(item)
	l.local.Forget(key)
	if l.guard.tryRedis() {
		_ = l.guard.run(context.Background(), func(ctx context.Context) error {
			return l.client.Del(ctx, l.layout.key(key)).Err()
		})
	}
}

// NumRequeues returns item's failure count in Redis, or in the fallback while
// Redis is unavailable.
func (l *ItemExponentialFailureRateLimiter[T]) NumRequeues(item T) int {
	key := itemKey(item)
	if l.guard.tryRedis() {
		var n int
		err := l.guard.run(context.Background(), func(ctx context.Context) error {
			var err error
			n, err = l.client.Get(ctx, l.layout.key(key)).Int()
			if err == goredis.Nil {
				n, err = 0, nil
			}
			return err
		})
		if err == nil {
			return n
		}
	}
	return l.local.NumRequeues(key)
}

// Key returns the Redis key that holds item's failure count.
func (l *ItemExponentialFailureRateLimiter[T]) Key(item T) string { return l.layout.key(itemKey(item)) }

// Stats returns the limiter's counters of decisions and failures.
func (l *ItemExponentialFailureRateLimiter[T]) Stats() Stats { return l.guard.stats() }

var _ backoff.RateLimiter[string] = (*ItemExponentialFailureRateLimiter[string])(nil)
