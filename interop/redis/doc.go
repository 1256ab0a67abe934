// Package redis shares the limits and the requeue backoff of
// github.com/retrykit/backoff across processes, through a Redis that they all
// use (github.com/redis/go-redis/v9, any redis.UniversalClient: one server,
// Sentinel or Cluster; see "Redis Cluster" below).
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
//     [KeyedLimiter.AllowBatch] decides for many keys in one round trip (one
//     per master for keys spread over a Cluster), and
//     the decisions that goroutines of a process ask for while a round trip
//     of the same limiter is in flight travel together in the next one.
//   - [SharedRate]: a backoff.AdaptiveRate per replica whose quota, unknown
//     and shared by the replicas, they learn together through one small
//     record: a throttling answer met by any replica cuts the shared
//     estimate once, and each replica paces at its max-min fair share, with
//     one round trip per second and never one per request.
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
// [WithSpreadKeys] puts a KeyedLimiter's key (a requeue limiter's item) in
// the tag, so that a Cluster spreads them over its masters.
//
//	backoff:{api}               a Limiter named api: its theoretical arrival time, µs
//	backoff:{tenants}:acme      a KeyedLimiter named tenants, key acme
//	backoff:{pods}:ns/web-1     a requeue limiter named pods: item ns/web-1's failure count
//	backoff:{tenants:acme}      the KeyedLimiter's key acme, WithSpreadKeys
//
// A limiter's key expires when its bucket is full again, which is the state
// of an absent key, so Redis holds only the keys used within the last
// burst/rate seconds. A failure count expires [WithFailureTTL] after the
// item's latest failure, and Forget deletes it.
//
// # Redis Cluster
//
// Pass a *redis.ClusterClient (with ContextTimeoutEnabled, as any client).
// Every script call touches the keys of one slot, or, for a batch of spread
// keys, keys that one master serves, so a call never fails with CROSSSLOT:
//
//   - By default a limiter's keys share the tag {name}: one slot, on one
//     master. [KeyedLimiter.AllowBatch], and the decisions that concurrent
//     callers send together, are one script call; one busy KeyedLimiter
//     loads one master.
//   - [WithSpreadKeys] spreads a KeyedLimiter's keys over the masters. A
//     batch is then grouped by master, by the client's map of the slots, and
//     each master gets one script call for its keys, all in one pipeline: one
//     round trip per master, to the masters at once (the script declares
//     allow-cross-slot-keys, Redis 7 or later). A master that refuses its
//     call (an older Redis, or a slot that moved) has changed nothing, and
//     its keys go again one script call per key.
//
// While a slot moves between masters (resharding), go-redis follows MOVED and
// ASK replies, and a batch that a master refuses meanwhile (TRYAGAIN: some
// of its keys have moved, others not) goes again one call per key: every
// decision is made once, by the master that holds the key. Scripts are sent
// by digest, and again with their source on a master that lacks them (its
// first call, or after a failover or SCRIPT FLUSH).
//
// When a master fails, the keys of its slots have no master until the
// Cluster promotes its replica, cluster-node-timeout and an election later
// (configure cluster-require-full-coverage no, or every master refuses
// every key meanwhile). Decisions for those keys fall back as on a single
// server, each within its deadline. go-redis learns of the promotion only
// from its periodic reload of the slots (ClusterStateReloadInterval, a
// minute by default), so each failed call of a limiter asks the client to
// reload them: the first probe after the promotion finds the new master. A
// failover loses what the dead master had not replicated (the last few
// milliseconds' decisions); the shared bucket, untouched while the fallback
// decides, is full again afterwards. Over a run with one failover, the
// events admitted by every process together stay within burst + rate ×
// elapsed, plus burst and the fallbacks' bursts (replicas × burst/replicas):
// see TestClusterFailover. A limiter keeps one state for all its keys: with
// spread keys, while one master is down, decisions for keys on other
// masters succeed and make decisions shared again, and the next one for a
// key on the dead master costs a timeout; the default layout keeps a
// limiter on one master, and an outage at one timeout per probe interval.
//
// With a Sentinel failover client, a failover loses, likewise, what the old
// primary had not replicated. In both, the scripts read the server's TIME;
// Redis 5 or later replicates their effects, not the scripts.
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
