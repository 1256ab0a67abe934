package backoff

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// KeyedLimiter is one token bucket per key (a client, a tenant, a remote
// address), each pacing its key as a [Limiter] would: r events per second on
// average, bursts of up to burst. It replaces the map of x/time/rate
// limiters, with its own eviction, that services write by hand.
//
// A key that has never been seen, and a key whose bucket has refilled to
// full, are the same thing: a full bucket. The limiter keeps state only for
// keys whose buckets are not full, and reclaims the others as it is used:
// every time it adds a key it looks at two keys it holds and drops those
// that are full again. No goroutine sweeps, and the number of keys held
// stays within about twice the number of keys that are not full. Memory
// is bounded further by [WithMaxKeys]; beyond that many keys, see there.
//
// Every key has the limiter's rate and burst unless [KeyedLimiter.SetKeyLimit]
// gives it its own. The delays are those of a [Limiter] with the key's rate
// and burst; for a key's reservation, Cancel follows [Reservation.Cancel]
// as if the key's latest reservation were the one made last.
//
// A KeyedLimiter is safe for concurrent use by multiple goroutines; a call
// holds its one lock for a map lookup and a few float operations. Allow, AllowN and Wait allocate nothing once
// a key's slot exists. A key held costs 40 to 85 bytes of table for string
// keys, depending on where the table is in its growth (the key's own bytes
// are the caller's). Its zero value is not
// usable: use [NewKeyedLimiter].
type KeyedLimiter[K comparable] struct {
	clock   clock.WithDelayedExecution
	epoch   time.Time
	limit   float64 // for keys without their own; ≥ 0, InfLimit for none
	burst   int
	maxKeys int          // 0: no bound
	keys    atomic.Int64 // keys held, over all shards
	table   keyedShard[K]
	// overflow is the one bucket that keys share while the table is at
	// maxKeys: admitting them as if they were one more key keeps the total
	// rate bounded however many keys arrive.
	overflow Limiter
	timers   timerPool
}

type keyedShard[K comparable] struct {
	mu sync.Mutex
	// buckets holds the keys whose buckets are not full (and, until they
	// are swept, some that have refilled since). A bucketState is 16 bytes,
	// held inline.
	buckets map[K]bucketState
	// own holds the keys given their own rate and burst; rarely non-empty.
	own map[K]keyLimit
}

type keyLimit struct {
	limit float64
	burst int
}

// sweepSample is how many held keys the limiter looks at, to drop those that
// are full, each time it adds a key; at the key bound, sweepSampleFull.
const (
	sweepSample     = 2
	sweepSampleFull = 8
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
		clock:   c.clock,
		epoch:   c.clock.Now(),
		limit:   sanitizeLimit(r),
		burst:   burst,
		maxKeys: c.limiter.maxKeys,
	}
	k.overflow.clock, k.overflow.epoch = k.clock, k.epoch
	k.overflow.init(r, burst)
	k.timers.clock = k.clock
	return k
}

// WithMaxKeys bounds the number of keys a [KeyedLimiter] holds state for to
// n. When a new key arrives and n keys are held, the limiter first drops
// keys whose buckets have refilled; if none has, the new key shares one
// bucket, with the limiter's rate and burst, with every other key that
// arrives while the table is full, until room is made. So a flood of new keys
// is admitted, together, at the rate of a single key: never more, never a
// panic, and keys already held are not disturbed. n ≤ 0 means no bound (the
// default). Other constructors ignore it.
func WithMaxKeys(n int) Option {
	return func(c *config) { c.limiter.maxKeys = max(n, 0) }
}

func (k *KeyedLimiter[K]) now() time.Duration {
	return max(k.clock.Since(k.epoch), 0)
}

// shard returns the table that holds key. There is one: spreading keys over
// several locked tables needs a hash of K, which Go 1.22's standard library
// offers only for strings and byte slices (maphash.Comparable is 1.24).
func (k *KeyedLimiter[K]) shard(K) *keyedShard[K] {
	return &k.table
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
	now := k.now()
	s := k.shard(key)
	s.mu.Lock()
	r, _ := k.reserveLocked(s, key, now, n, 0)
	s.mu.Unlock()
	return r.ok
}

// Reserve takes a token from key's bucket now, however long the bucket needs
// to earn it, and returns a [Reservation] that says how long to wait, as
// [Limiter.Reserve] does. A reservation that can be cancelled holds the
// key: it allocates once.
func (k *KeyedLimiter[K]) Reserve(key K) Reservation {
	now := k.now()
	s := k.shard(key)
	s.mu.Lock()
	r, _ := k.reserveLocked(s, key, now, 1, maxDuration)
	s.mu.Unlock()
	if r.ok && r.owner == nil {
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
	s := k.shard(key)
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
	r, wait := k.reserveLocked(s, key, now, 1, maxWait)
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
// bucket. A negative or NaN r counts as 0 and a negative burst as 0. Keys
// given their own limit are kept until [KeyedLimiter.ClearKeyLimit], and do
// not count towards [WithMaxKeys] while their buckets are full.
func (k *KeyedLimiter[K]) SetKeyLimit(key K, r float64, burst int) {
	k.setOwn(key, keyLimit{limit: sanitizeLimit(r), burst: max(burst, 0)}, true)
}

// ClearKeyLimit gives key the limiter's rate and burst again, from now on.
func (k *KeyedLimiter[K]) ClearKeyLimit(key K) {
	k.setOwn(key, keyLimit{}, false)
}

func (k *KeyedLimiter[K]) setOwn(key K, own keyLimit, set bool) {
	now := k.now()
	s := k.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	limit, burst := k.limitOfLocked(s, key)
	if st, ok := s.buckets[key]; ok {
		st.settle(now, limit, burst)
		s.buckets[key] = st
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
func (k *KeyedLimiter[K]) Len() int { return int(k.keys.Load()) }

// reserveLocked is [Limiter.reserveLocked] for key's bucket. Its reservation
// has no owner unless it came from the overflow bucket.
func (k *KeyedLimiter[K]) reserveLocked(s *keyedShard[K], key K, now time.Duration, n int, maxWait time.Duration) (Reservation, time.Duration) {
	n = max(n, 0)
	limit, burst := k.limitOfLocked(s, key)
	if limit == InfLimit {
		return Reservation{ok: true, tokens: n, timeToAct: now}, 0
	}
	st, held := s.buckets[key]
	if !held {
		if n == 0 || n > burst {
			// A full bucket that stays full, or a request it can never
			// grant: nothing to hold.
			return Reservation{ok: n == 0, limit: limit, timeToAct: now}, 0
		}
		if !k.makeRoomLocked(s, now) {
			k.overflow.mu.Lock()
			defer k.overflow.mu.Unlock()
			return k.overflow.reserveLocked(now, n, maxWait)
		}
		st = bucketState{tokens: float64(burst), last: now}
	}
	wait, ok := st.take(now, n, limit, burst, maxWait)
	if !ok {
		if !held {
			k.keys.Add(-1)
		}
		return Reservation{limit: limit}, wait
	}
	if s.buckets == nil {
		s.buckets = make(map[K]bucketState)
	}
	s.buckets[key] = st
	return Reservation{ok: true, tokens: n, limit: limit, timeToAct: addInstant(now, wait)}, wait
}

// makeRoomLocked sweeps a few held keys of s and reserves a place for one
// more key, reporting whether there was room.
func (k *KeyedLimiter[K]) makeRoomLocked(s *keyedShard[K], now time.Duration) bool {
	k.sweepLocked(s, now, sweepSample)
	if k.maxKeys == 0 {
		k.keys.Add(1)
		return true
	}
	if k.keys.Add(1) <= int64(k.maxKeys) {
		return true
	}
	k.keys.Add(-1)
	if k.sweepLocked(s, now, sweepSampleFull) == 0 {
		return false
	}
	if k.keys.Add(1) <= int64(k.maxKeys) {
		return true
	}
	k.keys.Add(-1)
	return false
}

// sweepLocked looks at up to budget keys of s, from a random place (Go's
// map iteration starts at one), drops those whose buckets are full at now,
// and returns how many it dropped.
func (k *KeyedLimiter[K]) sweepLocked(s *keyedShard[K], now time.Duration, budget int) int {
	seen, dropped := 0, 0
	for key, st := range s.buckets {
		if seen == budget {
			break
		}
		seen++
		limit, burst := k.limitOfLocked(s, key)
		if st.tokensAt(now, limit, burst) >= float64(burst) {
			delete(s.buckets, key)
			dropped++
		}
	}
	k.keys.Add(int64(-dropped))
	return dropped
}

// cancel gives back the tokens of r, a reservation of key's bucket, at now.
func (k *KeyedLimiter[K]) cancel(key K, r *Reservation, now time.Duration) {
	s := k.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	limit, burst := k.limitOfLocked(s, key)
	st, held := s.buckets[key]
	if limit == InfLimit || !held {
		return // a full bucket has nothing to get back
	}
	// The key's latest reservation is taken to be its last one: its
	// time-to-act is when the bucket is out of debt.
	lastEvent := st.last
	if st.tokens < 0 {
		lastEvent = addInstant(st.last, durationFromTokens(limit, -st.tokens))
	}
	st.giveBack(r, now, limit, burst, &lastEvent)
	s.buckets[key] = st
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
