package backoff

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/retrykit/backoff/internal/keytable"
)

// KeyedLimiter is one token bucket per key (a client, a tenant, a remote
// address), each pacing its key as a [Limiter] would: r events per second on
// average, bursts of up to burst. It replaces the map of x/time/rate
// limiters, with its own eviction, that services write by hand.
//
// A key that has never been seen, and a key whose bucket has refilled to
// full, are the same thing: a full bucket, so the limiter may forget a key
// whose bucket is full. It does so when memory asks, not as time passes:
// when its table would have to grow to add a key, it first drops every key
// whose bucket is full and that has not been used since the table last did
// this (a pass). Whether the table then grows depends on whether the keys
// it dropped come back: it remembers, in a bitmap of four bits per key,
// which keys passes dropped lately, and while half or more of the keys it
// adds are such keys it grows, 1.4 times per pass, until its passes come
// far enough apart that keys come back before they would be dropped. From
// then on a key that keeps coming back (a client under its limit, calling
// every few seconds) keeps its entry however often its bucket refills
// between calls, so its calls do not pay to be added again. Keys that do
// not come back (a stream of new clients, each calling once) go at the
// second pass after their last call, and the table does not grow for them:
// memory follows the keys whose buckets are not full or that come back, not
// the keys ever seen. The keys that come back are seen to if they are up to
// about nine times as many as the table holds when they start (at least the
// keys used within one token's time, 1/r): clients calling once a second
// against 10/s are held from within a few rounds of their calls. No
// goroutine sweeps, and a table that stops receiving new keys keeps what it
// holds until new keys arrive.
// Memory is bounded further by [WithMaxKeys]; beyond that many keys, see
// there.
//
// Every key has the limiter's rate and burst unless [KeyedLimiter.SetKeyLimit]
// gives it its own. The delays are those of a [Limiter] with the key's rate
// and burst; for a key's reservation, Cancel follows [Reservation.Cancel]
// as if the key's latest reservation were the one made last.
//
// A KeyedLimiter is safe for concurrent use by multiple goroutines; keys are
// spread by hash over 16 independently locked parts (one before Go 1.24,
// or with a [WithMaxKeys] below 4096), and a call holds one part's lock for
// a lookup and a few float operations. Allow, AllowN and Wait allocate
// nothing once a key is held; adding a key allocates only when the table
// grows or is rebuilt, or a new block of 1024 keys' storage is needed.
// Built with Go 1.24 or later, a key held costs one entry (the key and its
// bucket, stored inline), a 4-byte index slot and the index's free room; the
// key's own bytes are the caller's (bench/'s KeyedLimiterAllow rows report
// the bytes per key). A part holds at most 16,777,214 keys, so the limiter
// at most 268,435,424: beyond that, new keys are treated as beyond
// [WithMaxKeys]. Its zero value is not usable: use [NewKeyedLimiter].
type KeyedLimiter[K comparable] struct {
	clock  clock.WithDelayedExecution
	real   bool // clock is clock.RealClock: read time.Since directly
	epoch  time.Time
	limit  float64 // for keys without their own; ≥ 0, InfLimit for none
	burst  int
	shards []keyedShard[K] // len is a power of two; their tables share one seed
	mask   uint64          // len(shards)-1
	// overflow is the one bucket that keys share while their shard is at
	// its share of WithMaxKeys: admitting them as if they were one more key
	// keeps the total rate bounded however many keys arrive.
	overflow Limiter
	timers   timerPool
}

// keyedShard holds the keys whose hashes end in its index. Shards cut the
// contention on one lock; the key's hash picks its shard and its place in
// the shard's table, computed once per call.
type keyedShard[K comparable] struct {
	mu sync.Mutex
	// buckets holds the keys whose buckets are not full (and, until they
	// are swept, some that have refilled since), their 16-byte state inline
	// and updated in place.
	buckets keytable.Table[K, bucketState]
	// own holds the keys given their own rate and burst; rarely non-empty.
	own map[K]keyLimit
	// maxKeys is the most keys the shard holds: its share of WithMaxKeys,
	// and at most keytable.MaxLen.
	maxKeys int
	// now is the instant at which the table's Stale function judges whether
	// a bucket is full: set under mu before every call that may sweep.
	now time.Duration
	// A pass over the table (before it grows) drops a full bucket only if
	// its key has not been used since keepSince, the instant of the pass
	// before; passAt is the instant of the latest pass. A key that comes
	// back between two passes is thus kept, however often its bucket
	// refills in between: dropping it would cost an insert at its next call
	// and, with many such keys, a pass and a rebuild every few inserts (see
	// BenchmarkKeyedLimiterAllow's refill rows). A Sweep, which runs only at
	// WithMaxKeys' bound, drops any full bucket: keepSince is then
	// maxDuration.
	keepSince, passAt time.Duration
	_                 [64]byte // keeps the next shard's lock off this shard's cache line
}

type keyLimit struct {
	limit float64
	burst int
}

const (
	// keyedShards is the number of shards of a KeyedLimiter: a few per
	// core of today's servers, few enough that an idle shard costs nothing.
	keyedShards = 16
	// minKeysPerShard: below keyedShards×minKeysPerShard keys, WithMaxKeys
	// keeps one shard, because a shard's share of the bound is enforced on
	// its own and small shares would make the bound uneven.
	minKeysPerShard = 256
	// sweepGroups is how many groups of 7 held keys a shard at its share of
	// WithMaxKeys looks at, to drop those that are full, before it sends a
	// new key to the overflow bucket. Successive looks go round the table.
	sweepGroups = 2
)

// NewKeyedLimiter returns a [KeyedLimiter] that gives every key r events per
// second and bursts of up to burst, read as by [NewLimiter] (a negative or
// NaN r and a negative burst panic; [InfLimit] means no limit). It reads
// the time, and waits, through the clock given with [WithClock], and bounds
// its keys with [WithMaxKeys]; it ignores the other options.
func NewKeyedLimiter[K comparable](r float64, burst int, opts ...Option) *KeyedLimiter[K] {
	checkLimiterArgs("NewKeyedLimiter", r, burst)
	c := newConfig(opts)
	k := &KeyedLimiter[K]{
		clock: c.clock,
		epoch: c.clock.Now(),
		limit: sanitizeLimit(r),
		burst: burst,
	}
	_, k.real = c.clock.(clock.RealClock)
	seed := keytable.NewSeed()
	maxKeys := c.limiter.maxKeys
	shards := 1
	if keytable.Hashed && (maxKeys == 0 || maxKeys >= keyedShards*minKeysPerShard) {
		shards = keyedShards
	}
	k.shards = make([]keyedShard[K], shards)
	k.mask = uint64(shards - 1)
	for i := range k.shards {
		s := &k.shards[i]
		s.maxKeys = maxKeys / shards
		if i < maxKeys%shards {
			s.maxKeys++
		}
		if s.maxKeys == 0 || s.maxKeys > keytable.MaxLen {
			// The table's own bound, reached as WithMaxKeys would be.
			s.maxKeys = keytable.MaxLen
		}
		s.buckets.Init(seed, func(key K, st *bucketState) bool {
			if st.last > s.keepSince {
				return false // used since the pass before: it comes back
			}
			limit, burst := k.limitOfLocked(s, key)
			return st.tokensAt(s.now, limit, burst) >= float64(burst)
		})
	}
	k.overflow.clock, k.overflow.epoch = k.clock, k.epoch
	k.overflow.init(r, burst)
	k.timers.clock = k.clock
	return k
}

// WithMaxKeys bounds the number of keys a [KeyedLimiter] holds state for to
// n. When a new key arrives and the bound is reached, the limiter first
// looks at a few held keys and drops those whose buckets have refilled; if
// it finds none, the new key shares one bucket, with the limiter's rate and
// burst, with every other key that arrives while the table is full, until
// room is made. So a flood of new keys is admitted, together, at the rate
// of a single key: never more, never a panic, and keys already held are not
// disturbed. Successive looks go round the held keys, so refilled keys are
// found as new keys keep arriving.
//
// From n = 4096 up, the bound is split evenly over the limiter's 16 parts
// (see [KeyedLimiter]), each enforcing its share: new keys of a part that
// has reached its share go to the shared bucket even if another part has
// room, so that can begin slightly before n keys are held in all. n = 0
// means no bound of the caller's (the default); the table's own bound (see
// [KeyedLimiter]) holds in any case, with the same behaviour. A negative n
// panics. Other constructors ignore it.
func WithMaxKeys(n int) Option {
	if n < 0 {
		badArgument("WithMaxKeys", "n must not be negative", n)
	}
	return countOption(optionMaxKeys, n)
}

func (k *KeyedLimiter[K]) now() time.Duration {
	if k.real {
		return max(time.Since(k.epoch), 0)
	}
	return max(k.clock.Since(k.epoch), 0)
}

// shardOf returns key's hash and the shard that holds key. The shard is
// picked by the hash's low bits, which the table leaves alone.
func (k *KeyedLimiter[K]) shardOf(key K) (uint64, *keyedShard[K]) {
	h := k.shards[0].buckets.Hash(key)
	return h, &k.shards[h&k.mask]
}

// limitOfLocked returns key's rate and burst.
func (k *KeyedLimiter[K]) limitOfLocked(s *keyedShard[K], key K) (float64, int) {
	if len(s.own) != 0 {
		if o, ok := s.own[key]; ok {
			return o.limit, o.burst
		}
	}
	return k.limit, k.burst
}

// Allow is shorthand for AllowN(key, 1).
func (k *KeyedLimiter[K]) Allow(key K) bool { return k.AllowN(key, 1) }

// AllowN reports whether n events of key may happen now, and if so takes
// their tokens from key's bucket, as [Limiter.AllowN] does. It never blocks.
func (k *KeyedLimiter[K]) AllowN(key K, n int) bool {
	h, s := k.shardOf(key)
	// Start loading key's index slot, then read the clock and take the lock
	// while it comes (see keytable.Table.Prefetch).
	s.buckets.Prefetch(h)
	now := k.now()
	s.mu.Lock()
	if len(s.own) == 0 && k.limit != InfLimit {
		// The common case, a held key with the limiter's rate and burst:
		// reserveLocked's path for it, without building a Reservation.
		if st := s.buckets.Find(h, key); st != nil {
			_, ok := st.take(now, max(n, 0), k.limit, k.burst, 0)
			s.mu.Unlock()
			return ok
		}
	}
	r, _ := k.reserveLocked(s, h, key, now, n, 0)
	s.mu.Unlock()
	return r.ok
}

// Reserve takes a token from key's bucket now, however long the bucket needs
// to earn it, and returns a [Reservation] that says how long to wait, as
// [Limiter.Reserve] does. A reservation that can be cancelled holds the
// key: it allocates once.
func (k *KeyedLimiter[K]) Reserve(key K) Reservation {
	now := k.now()
	h, s := k.shardOf(key)
	s.mu.Lock()
	r, _ := k.reserveLocked(s, h, key, now, 1, maxDuration)
	s.mu.Unlock()
	if r.ok && r.owner == nil {
		// Cancel needs the key, and Reservation is not generic: a K held in
		// an interface is allocated whichever way it is wrapped.
		r.owner = &keyedOwner[K]{k: k, key: key}
	}
	return r
}

// Wait blocks until an event of key may happen, taking its token, as
// [Limiter.Wait] does, with the same errors and the same guarantees: it
// returns when a FakeClock is stepped to the instant, at once if ctx's
// deadline comes sooner, and gives the token back if ctx ends first.
func (k *KeyedLimiter[K]) Wait(ctx context.Context, key K) error {
	now := k.now()
	h, s := k.shardOf(key)
	s.mu.Lock()
	limit, burst := k.limitOfLocked(s, key)
	s.mu.Unlock()
	if 1 > burst && limit != InfLimit {
		return ErrExceedsBurst
	}
	if ctx.Err() != nil {
		return contextError(ctx)
	}
	maxWait := waitLimit(ctx, k.epoch, now)
	s.mu.Lock()
	r, wait := k.reserveLocked(s, h, key, now, 1, maxWait)
	s.mu.Unlock()
	if !r.ok {
		return ErrWaitExceedsDeadline
	}
	if !k.timers.sleep(ctx, wait) {
		if r.owner != nil {
			r.Cancel()
		} else {
			k.cancel(key, &r, k.now())
		}
		return contextError(ctx)
	}
	return nil
}

// SetKeyLimit gives key its own rate and burst, in place of the limiter's,
// from now on, as [Limiter.SetLimit] and [Limiter.SetBurst] would for its
// bucket, except that a key whose bucket is full (as every key not seen
// lately is) starts full under its new burst. A negative or NaN r counts as 0 and a negative burst as 0. Keys
// given their own limit are kept until [KeyedLimiter.ClearKeyLimit], and do
// not count towards [WithMaxKeys] while their buckets are full.
func (k *KeyedLimiter[K]) SetKeyLimit(key K, r float64, burst int) {
	k.setOwn(key, keyLimit{limit: sanitizeLimit(r), burst: max(burst, 0)}, true)
}

// ClearKeyLimit gives key the limiter's rate and burst again, from now on,
// as SetKeyLimit does.
func (k *KeyedLimiter[K]) ClearKeyLimit(key K) {
	k.setOwn(key, keyLimit{}, false)
}

func (k *KeyedLimiter[K]) setOwn(key K, own keyLimit, set bool) {
	now := k.now()
	h, s := k.shardOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	limit, burst := k.limitOfLocked(s, key)
	newBurst := k.burst
	if set {
		newBurst = own.burst
	}
	if st := s.buckets.Find(h, key); st != nil {
		st.settle(now, limit, burst)
		if st.tokens >= float64(burst) {
			// Full, so the same as no state, which means full under the
			// new burst too: whether it was dropped yet must not matter.
			st.tokens = float64(newBurst)
		}
	}
	if !set {
		delete(s.own, key)
		return
	}
	if s.own == nil {
		s.own = make(map[K]keyLimit)
	}
	s.own[key] = own
}

// Len returns the number of keys the limiter holds state for: keys whose
// buckets are not full, and some that have refilled and are not swept yet.
// It takes every shard's lock in turn, so it is not a hot-path call.
func (k *KeyedLimiter[K]) Len() int {
	n := 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		n += s.buckets.Len()
		s.mu.Unlock()
	}
	return n
}

// reserveLocked is [Limiter.reserveLocked] for key's bucket; h is key's
// hash. Its reservation has no owner unless it came from the overflow
// bucket.
func (k *KeyedLimiter[K]) reserveLocked(s *keyedShard[K], h uint64, key K, now time.Duration, n int, maxWait time.Duration) (Reservation, time.Duration) {
	n = max(n, 0)
	limit, burst := k.limitOfLocked(s, key)
	if limit == InfLimit {
		return Reservation{ok: true, tokens: n, timeToAct: now}, 0
	}
	st := s.buckets.Find(h, key)
	if st == nil {
		if n == 0 || n > burst {
			// A full bucket that stays full, or a request it can never
			// grant: nothing to hold.
			return Reservation{ok: n == 0, limit: limit, timeToAct: now}, 0
		}
		if maxWait < 0 {
			// A deadline already past refuses even what needs no wait,
			// as take would.
			return Reservation{limit: limit}, 0
		}
		// A full bucket grants any n ≤ burst at once: the key's state is
		// what is left of it.
		s.now = now
		if s.buckets.Len() >= s.maxKeys {
			s.keepSince = maxDuration
			if s.buckets.Sweep(sweepGroups) == 0 {
				k.overflow.mu.Lock()
				defer k.overflow.mu.Unlock()
				return k.overflow.reserveLocked(now, n, maxWait)
			}
		}
		if s.buckets.Passes() {
			s.keepSince, s.passAt = s.passAt, now
		}
		s.buckets.Insert(h, key, bucketState{tokens: float64(burst - n), last: now})
		return Reservation{ok: true, tokens: n, limit: limit, timeToAct: now}, 0
	}
	wait, ok := st.take(now, n, limit, burst, maxWait)
	if !ok {
		return Reservation{limit: limit}, wait
	}
	return Reservation{ok: true, tokens: n, limit: limit, timeToAct: addInstant(now, wait)}, wait
}

// cancel gives back the tokens of r, a reservation of key's bucket, at now.
func (k *KeyedLimiter[K]) cancel(key K, r *Reservation, now time.Duration) {
	h, s := k.shardOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	limit, burst := k.limitOfLocked(s, key)
	st := s.buckets.Find(h, key)
	if limit == InfLimit || st == nil {
		return // a full bucket has nothing to get back
	}
	// The key's latest reservation is taken to be its last one: its
	// time-to-act is when the bucket is out of debt.
	lastEvent := st.last
	if st.tokens < 0 {
		lastEvent = addInstant(st.last, durationFromTokens(limit, -st.tokens))
	}
	st.giveBack(r, now, limit, burst, &lastEvent)
}

// keyedOwner lets a Reservation of a KeyedLimiter find its key's bucket.
type keyedOwner[K comparable] struct {
	k   *KeyedLimiter[K]
	key K
}

func (o *keyedOwner[K]) instant() time.Duration { return o.k.now() }

func (o *keyedOwner[K]) cancelReservation(r *Reservation, now time.Duration) {
	o.k.cancel(o.key, r, now)
}
