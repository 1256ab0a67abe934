// Package redis shares the limits and the requeue backoff of
// github.com/retrykit/backoff across processes, through a Redis that they all
// use (github.com/redis/go-redis/v9, any redis.UniversalClient: one server,
// Sentinel or Cluster).
//
// Use it when several replicas of a service, or the shards of a controller,
// share one external quota (a cloud API's 100 requests/s), where a limiter per
// process either overshoots by the replica count or wastes capacity; and when
// a controller's new leader must continue the backoff of failing items where
// the old leader left it. Within one process, the library's own limiters are
// faster and need nothing else.
//
//   - [Limiter] and [KeyedLimiter]: a token bucket (one, or one per key),
//     decided by the generic cell rate algorithm in a Lua script, one round
//     trip per decision at most, on the Redis server's clock, so that
//     processes with skewed clocks agree. For the same rate and burst they
//     admit the events that github.com/go-redis/redis_rate admits.
//     [KeyedLimiter.AllowBatch] decides for many keys in one round trip, and
//     the decisions that goroutines of a process ask for while a round trip
//     of the same limiter is in flight travel together in the next one.
//   - [ItemExponentialFailureRateLimiter]: the library's item-exponential
//     requeue limiter with its failure counts in Redis; it implements
//     backoff.RateLimiter, so it plugs into backoff.NewRateLimitingQueue and
//     backoff.NewMaxOfRateLimiter.
//
// # Signatures
//
// The methods keep the names of golang.org/x/time/rate and of the library's
// in-process limiters (Allow, AllowN, Reserve, ReserveN, Wait, WaitN, Limit,
// Burst, SetLimit, SetBurst, Tokens; SetKeyLimit and ClearKeyLimit for a
// key's own limit), with two changes that a network call requires: every
// method that may call Redis takes a context first, and the forms that
// return detail also return an error. Allow(ctx) bool answers the common question in one
// value and never fails: it reads false where AllowN would return an error.
// AllowN(ctx, n) (Result, error) returns the detail (remaining events,
// retry-after, whether Redis or the fallback decided) and an error only when
// no decision was made: the caller's context ended, or Redis was unavailable
// and the limiter fails closed. A refusal is not an error. The requeue
// limiter keeps backoff.RateLimiter's method set exactly (no context, no
// error), since queues call it; it bounds each call with the timeout instead.
//
// The rate and burst, including a key's own and those set later with
// SetLimit, SetBurst and SetKeyLimit, belong to each process, as
// golang.org/x/time/rate's do: Redis holds a bucket's state, not its limit,
// so every process that shares a limit must be given the same (from the same
// configuration). A change carries the bucket over in time rather than in
// tokens. Left out: SetLimit and SetBurst on a KeyedLimiter (as on the
// library's: give a key its own limit instead, or build a new limiter), the
// *At forms taking a time.Time (the server's clock is the time), and
// KeyedLimiter.Len (keys live in Redis, and counting them would scan).
//
// # When Redis is unavailable
//
// Every call to Redis has a deadline: the sooner of the caller's context's
// and [WithTimeout]'s (default 50 ms) from the call's start. (A caller's
// context whose deadline comes first is used as it is, which saves deriving
// a context per call.) A call that carries other goroutines' decisions to
// Redis with its own finishes that round trip even if its context is
// cancelled, but not past its deadline; a call waiting for a round trip in
// flight leaves at its deadline. A call that fails or times out marks Redis
// unavailable: the decision, and the following ones, are made by a local
// fallback — the library's own backoff.Limiter or backoff.KeyedLimiter in the
// process, with the rate and burst divided by [WithExpectedReplicas] — or
// refused if the limiter was built [WithFailClosed]. While Redis is unavailable, one call
// per [WithProbeInterval] tries Redis again, on the caller's goroutine, and
// the others do not wait for it; the first probe that succeeds makes
// decisions shared again. Each change of state is logged once ([WithLogger])
// and reported to [WithOnStateChange]; [Limiter.Stats] counts shared,
// fallback and refused decisions, errors and outages. No goroutine is
// started, and nothing panics on a Redis failure.
//
// go-redis honours a context's deadline only when the client's options say
// ContextTimeoutEnabled: true; otherwise a stalled server blocks a call for
// the client's ReadTimeout (3 s by default). Construct the client with it
// (or with a ReadTimeout no longer than the limiter's timeout); the
// constructors log a warning when neither holds.
//
// # Keys
//
// Every key starts with the prefix ([WithPrefix], default "backoff:") and the
// limiter's name in braces, which is the key's Cluster hash tag: all keys of
// one limiter live in one slot, so that one script can read them.
//
//	backoff:{api}               a Limiter named api: its theoretical arrival time, µs
//	backoff:{tenants}:acme      a KeyedLimiter named tenants, key acme
//	backoff:{pods}:ns/web-1     a requeue limiter named pods: item ns/web-1's failure count
//
// A limiter's key expires when its bucket is full again, which is the state
// of an absent key, so Redis holds only the keys used within the last
// burst/rate seconds. A failure count expires [WithFailureTTL] after the
// item's latest failure, and Forget deletes it.
//
// # Cluster and Sentinel
//
// With a Sentinel failover client, a failover loses what the old primary had
// not replicated: a limit may admit again the events it admitted during the
// replication lag before the failover, and an item that failed then may wait
// one step less. With a Cluster,
// a limiter's keys share a slot, so one busy KeyedLimiter loads one shard;
// split a very large one into several names. In both, the scripts read the
// server's TIME; Redis 5 or later replicates their effects, not the scripts.
//
// # Retry budgets
//
// The library's RetryBudget is not shared here: its decision could be one
// round trip, but the budget is fed by every request, not only by retries,
// so sharing it would add a Redis write to every request a service makes,
// making Redis part of the hot path of all traffic rather than of retries.
// Each replica's own budget already holds retries to the ratio of its own
// requests; divide minPerSecond by the replica count to share the floor.
package redis
