package backoff

import (
	"github.com/retrykit/backoff/internal/idtable"
	"hash/maphash"
	"k8s.io/utils/clock"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Backoff remembers, per id, how long work for that id should hold off after
// it last failed: kubelet's CrashLoopBackOff, keyed by pod and container, is
// the classic use. It is the same model as client-go's
// k8s.io/client-go/util/flowcontrol.Backoff, and code that used client-go's
// keeps its calls (see [NewBackOff] for the constructors).
//
// Each id has at most one entry: a current delay (its backoff) and the time
// of its last update. [Backoff.Next] records a failure: the first one, or the
// first after the entry expired, sets the delay to the initial one; each
// further one doubles it, capped at the maximum. The gates
// [Backoff.IsInBackOffSince] and [Backoff.IsInBackOffSinceUpdate] then say
// whether work for the id must still wait.
//
// # Expiry and memory
//
// An entry whose last update lies more than twice the maximum delay before
// an event time has expired: for that event it counts as absent, and the
// next failure starts again from the initial delay. That is kubelet's "reset
// after 10 minutes of successful execution" for a 5-minute cap. [WithExpiry]
// replaces the rule.
//
// client-go keeps expired entries until the caller runs GC, so a caller that
// forgets it leaks one entry per id ever seen. Backoff reclaims them by
// itself, with no goroutine: while entries may have expired, each Next also
// deletes a few expired entries of other ids, at O(1) cost per call. Memory
// thus stays within about twice the number of ids live (not expired) in the
// recent past, and is given back as that number falls, which a Go map alone
// never does. Expired entries stay only while Next is not called; [Backoff.GC]
// reclaims everything at once.
//
// # Concurrency
//
// A Backoff is safe for concurrent use by multiple goroutines. Calls for
// different ids rarely contend: Next for an id that has an entry, and the
// read methods (Get, Attempts, the IsInBackOff gates), take no lock shared
// with other ids. The calls for one id are serialised. No lock is held while
// the clock is read, and the methods never call back into anything but the
// clock and the expiry rule.
//
// The zero value is not usable: its methods panic. Create a Backoff with
// [NewBackOff] or [NewBackOffWithJitter] and share it by pointer.
//
// # Differences from client-go
//
//   - Expired entries are reclaimed as the Backoff is used; client-go keeps
//     them until GC is called.
//   - [Backoff.Attempts] reports how many failures an entry has counted.
//   - The delay never exceeds the maximum: client-go's first jittered delay
//     can, by up to maxJitterFactor × initial.
//   - Nothing overflows. For a maximum above math.MaxInt64/2 (about 146
//     years), client-go's 2×max expiry threshold wraps negative, so every
//     entry counts as expired and the delay never leaves initial, and its
//     doubling can wrap to a negative delay; both saturate here.
//   - The clock and the expiry rule are options ([WithClock], [WithExpiry])
//     instead of the exported fields Clock and HasExpiredFunc, which a
//     caller could change while the Backoff is in use.
//   - Out-of-domain arguments panic at construction (see the package
//     documentation); client-go accepts any values.
type Backoff struct {
	shards []shard
	mask   uint64 // len(shards)-1; len(shards) is a power of two
	seed   maphash.Seed
	clock  clock.PassiveClock
	// epoch is the clock's time when the Backoff was made. Entries record
	// their last update as an offset from it, read with clock.Since, which
	// on the real clock reads only the monotonic clock: Next reads the clock
	// every time (BenchmarkBackoffNext).
	epoch time.Time

	initial time.Duration
	ceiling time.Duration // the maximum delay; ≥ initial > 0
	jitter  float64       // maxJitterFactor; 0 for none

	// expiry is the caller's rule from WithExpiry, or nil for the default:
	// expired once the event lies more than stale after the last update.
	expiry func(eventTime, lastUpdate time.Time, maxDelay time.Duration) bool
	stale  time.Duration // 2×ceiling, saturated so that it cannot wrap
}

// backoffConfig holds the options that Backoff reads. Its zero value is the
// default: entries expire 2×max after their last update.
type backoffConfig struct {
	expiry func(eventTime, lastUpdate time.Time, maxDelay time.Duration) bool
}

// WithExpiry replaces the rule by which a [Backoff] entry expires, which is
// client-go's Backoff.HasExpiredFunc. expired reports whether an entry last
// updated at lastUpdate has expired for an event at eventTime; maxDelay is
// the Backoff's maximum delay. The default rule is
//
//	eventTime.Sub(lastUpdate) > 2*maxDelay
//
// Next restarts an expired entry at the initial delay, the IsInBackOff gates
// report false for it, and GC and the automatic reclamation delete the
// entries that have expired at the clock's current time. Backoff calls
// expired with an internal lock held: it must be fast, and it must not call
// the Backoff's methods, which would deadlock. WithExpiry is read only by
// NewBackOff and NewBackOffWithJitter.
//
// WithExpiry panics if expired is nil.
func WithExpiry(expired func(eventTime, lastUpdate time.Time, maxDelay time.Duration) bool) Option {
	if expired == nil {
		badArgument("WithExpiry", "expired must not be nil", nil)
	}
	return valueOption(optionExpiry, expired)
}

// NewBackOff returns a [Backoff] whose delays start at initial and double at
// each failure up to maxDelay, without jitter. It is client-go's
// flowcontrol.NewBackOff; NewFakeBackOff(initial, maxDelay, clock) is
// NewBackOff(initial, maxDelay, WithClock(clock)). Options: [WithClock],
// [WithExpiry].
//
// NewBackOff panics unless 0 < initial ≤ maxDelay: a zero initial delay would
// never grow.
func NewBackOff(initial, maxDelay time.Duration, opts ...Option) *Backoff {
	return newBackoff("NewBackOff", initial, maxDelay, 0, opts)
}

// NewBackOffWithJitter is like [NewBackOff] but adds jitter to each delay, so
// that the ids that failed together do not all come back together: the first
// delay is drawn from [initial, initial + maxJitterFactor·initial), and each
// next one from [2d, 2d + maxJitterFactor·d) for the previous delay d, both
// capped at maxDelay. A maxJitterFactor of 0 means no jitter; a huge one is
// allowed and simply makes most delays maxDelay. It is client-go's
// flowcontrol.NewBackOffWithJitter, except that the first delay, too, is
// capped.
//
// NewBackOffWithJitter panics unless 0 < initial ≤ maxDelay and
// maxJitterFactor is a finite number ≥ 0.
func NewBackOffWithJitter(initial, maxDelay time.Duration, maxJitterFactor float64, opts ...Option) *Backoff {
	mustBeFactor("NewBackOffWithJitter", "maxJitterFactor", maxJitterFactor)
	return newBackoff("NewBackOffWithJitter", initial, maxDelay, maxJitterFactor, opts)
}

func newBackoff(where string, initial, maxDelay time.Duration, jitter float64, opts []Option) *Backoff {
	mustBePositive(where, "initial", initial)
	mustNotBeNegative(where, "maxDelay", maxDelay)
	if maxDelay < initial {
		badArgument(where, "maxDelay must be at least initial ("+initial.String()+")", maxDelay)
	}
	cfg := newConfig(opts)
	n := shardCount()
	return &Backoff{
		shards:  make([]shard, n),
		mask:    uint64(n - 1),
		seed:    maphash.MakeSeed(),
		clock:   cfg.clock,
		epoch:   cfg.clock.Now(),
		initial: initial,
		ceiling: maxDelay,
		jitter:  jitter,
		expiry:  cfg.backoff.expiry,
		stale:   shiftDuration(maxDelay, 1),
	}
}

// Next records a failure of id at eventTime and moves its delay on. If id has
// no entry, or its entry has expired for eventTime, the entry (re)starts at
// the initial delay (plus jitter); otherwise the delay doubles (plus jitter),
// capped at the maximum. Either way the entry's last update becomes the
// clock's current time, not eventTime, as in client-go.
//
// Next also reclaims a few expired entries of other ids, when some may have
// expired (see [Backoff]); its cost is O(1), amortised over the rare rebuild
// of a shrinking storage.
func (b *Backoff) Next(id string, eventTime time.Time) {
	hash := b.hash(id)
	s := b.shardOf(hash)
	now := b.now() // before locking: no lock is ever held across a clock call
	event := b.offset(eventTime)
	// The common case, an id that has an entry, takes no shard lock: it
	// finds the entry in the shard's table and updates it under the entry's
	// own lock. Only then does it read oldest and roundMin, and it takes the
	// shard lock after all if now is below either (the clock went back, or a
	// round of the sweep began after this entry was inspected) or the sweep
	// has work. Reading them after the write is what keeps them lower
	// bounds: a round that ends later inspects this entry again, and one
	// that inspected it before the write had already reset roundMin, which
	// this read then sees. With a WithExpiry rule every Next sweeps, so it
	// always locks.
	if b.expiry == nil {
		if e := s.find(hash, id); e != nil && b.advance(e, eventTime, event, now) {
			if s.settled(b, now) {
				return
			}
			s.mu.Lock()
			s.updatedLocked(now)
			s.sweepLocked(b, now, e)
			s.mu.Unlock()
			return
		}
	}
	s.mu.Lock()
	e := s.find(hash, id) // under the lock: never dead
	if e != nil {
		b.advance(e, eventTime, event, now)
	} else {
		// The entry's one allocation: 64 bytes, once per id (and again
		// after the id's entry was reclaimed).
		e = &entry{id: id, entryState: entryState{updated: now, backoff: b.first(), attempts: 1}}
		s.insertLocked(b, hash, e)
	}
	s.updatedLocked(now)
	s.sweepLocked(b, now, e)
	s.mu.Unlock()
}

// advance records a failure of e's id at eventTime (whose offset is event),
// at clock time now, and reports whether it could: false if e is dead.
func (b *Backoff) advance(e *entry, eventTime time.Time, event, now time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.dead:
		return false
	case b.expired(eventTime, event, e.updated):
		e.backoff, e.attempts = b.first(), 1
	default:
		e.backoff = b.grow(e.backoff)
		e.attempts++
	}
	e.updated = now
	return true
}

// first returns the delay of a new or restarted entry.
func (b *Backoff) first() time.Duration {
	return clampDuration(Jitter(b.initial, b.jitter), b.ceiling)
}

// grow returns the delay that follows d: 2d plus up to jitter×d, capped.
func (b *Backoff) grow(d time.Duration) time.Duration {
	return clampDuration(addDuration(d, Jitter(d, b.jitter)), b.ceiling)
}

// now returns the clock's time as an offset from b.epoch.
func (b *Backoff) now() time.Duration { return b.clock.Since(b.epoch) }

// offset returns t as an offset from b.epoch (saturated, as time.Time.Sub
// saturates). Like Sub, it compares monotonic readings when both times
// carry one, as times from time.Now and RealClock do.
func (b *Backoff) offset(t time.Time) time.Duration { return t.Sub(b.epoch) }

// expired reports whether an entry last updated at offset updated has
// expired for an event at eventTime, whose offset is event. It runs with or
// without a shard lock held, so it must not take one.
func (b *Backoff) expired(eventTime time.Time, event, updated time.Duration) bool {
	if b.expiry != nil {
		return b.expiry(eventTime, b.epoch.Add(updated), b.ceiling)
	}
	return elapsed(event, updated) > b.stale
}

// elapsed returns to-from, saturating instead of overflowing: offsets are
// saturated times, so their difference may not fit.
func elapsed(to, from time.Duration) time.Duration {
	d := to - from
	if (from < 0 && d < to) || (from > 0 && d > to) {
		if from < 0 {
			return maxDuration
		}
		return -maxDuration - 1
	}
	return d
}

// Get returns the current delay of id, or 0 if id has no entry. Like
// client-go's, it does not check expiry: an expired entry reports its last
// delay until it is reclaimed (by GC, by the sweep of a Next call, or
// restarted by Next), after which Get returns 0.
func (b *Backoff) Get(id string) time.Duration {
	e, _ := b.lookup(id)
	return e.backoff
}

// Attempts returns how many times Next has been called for id since its entry
// was created or last restarted: 1 after the first failure, 2 after the
// second, and so on; 0 if id has no entry. For a crash-looping container it
// is the number of restarts in the current loop. Like [Backoff.Get], it does
// not check expiry. client-go has no counterpart (it was proposed as
// GetWithRetryNumber in kubernetes/kubernetes#51626, not merged).
func (b *Backoff) Attempts(id string) int {
	e, _ := b.lookup(id)
	return e.attempts
}

// IsInBackOffSince reports whether work for id that last ran (or last
// failed) at eventTime must still wait: whether less than the current delay
// of id has passed between eventTime and the clock's current time. It
// reports false if id has no entry or its entry has expired for eventTime.
// An eventTime in the future counts as no time passed.
func (b *Backoff) IsInBackOffSince(id string, eventTime time.Time) bool {
	e, ok := b.lookup(id)
	if !ok || b.expired(eventTime, b.offset(eventTime), e.updated) {
		return false
	}
	return b.clock.Since(eventTime) < e.backoff
}

// IsInBackOffSinceUpdate reports whether eventTime lies within the current
// delay of id counted from its entry's last update, that is, whether less than
// the delay passed between the last Next and eventTime. It reports false if
// id has no entry or its entry has expired for eventTime. Unlike
// [Backoff.IsInBackOffSince] it does not read the clock.
func (b *Backoff) IsInBackOffSinceUpdate(id string, eventTime time.Time) bool {
	event := b.offset(eventTime)
	e, ok := b.lookup(id)
	if !ok || b.expired(eventTime, event, e.updated) {
		return false
	}
	return elapsed(event, e.updated) < e.backoff
}

// Reset forgets id: its next failure starts again at the initial delay. It
// does nothing if id has no entry.
func (b *Backoff) Reset(id string) {
	hash := b.hash(id)
	s := b.shardOf(hash)
	if s.find(hash, id) == nil {
		return // nothing to forget, and no lock taken
	}
	s.mu.Lock()
	if e := s.find(hash, id); e != nil {
		e.kill()
		s.removeLocked(b, e.pos)
		s.shrinkLocked(b)
	}
	s.mu.Unlock()
}

// DeleteEntry is the same as [Backoff.Reset]; client-go has both names.
func (b *Backoff) DeleteEntry(id string) {
	b.Reset(id)
}

// GC deletes every entry that has expired at the clock's current time (by
// default, whose last update lies more than 2×max in the past). It takes
// O(n) for n entries, holding one shard's lock at a time, so other calls go
// on meanwhile. Unlike client-go's, a Backoff needs no periodic GC to keep
// its memory bounded (see [Backoff]); GC frees everything reclaimable at
// once, before a quiet period, say.
func (b *Backoff) GC() {
	if b.shards == nil {
		panicZeroValue()
	}
	now := b.now()
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		s.collectLocked(b, now)
		s.mu.Unlock()
	}
}

// lookup returns a copy of id's entry, found without the shard lock.
// Copying lets the callers run the expiry rule and read the clock after the
// entry's lock is released.
func (b *Backoff) lookup(id string) (entryState, bool) {
	hash := b.hash(id)
	s := b.shardOf(hash)
	e := s.find(hash, id)
	if e == nil {
		return entryState{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead {
		// Removed after find saw it: the id had no entry by the time
		// this lookup ended.
		return entryState{}, false
	}
	return e.entryState, true
}

// shardOf returns the shard that holds the entry of the id whose hash is
// hash.
func (b *Backoff) shardOf(hash uint64) *shard { return &b.shards[hash&b.mask] }

// hash returns the hash of id that picks its shard (low bits) and its place
// in the shard's table (the bits above).
func (b *Backoff) hash(id string) uint64 {
	if b.shards == nil {
		panicZeroValue()
	}
	return maphash.String(b.seed, id)
}

func panicZeroValue() {
	badUse("Backoff", "used without NewBackOff or NewBackOffWithJitter")
}

// The storage of a Backoff: its entries, spread over shards by a hash of the
// id, each shard with its own lock and its own incremental sweep.
//
// Each entry has a lock of its own. Next for an id that has an entry, and
// the read methods, find the entry in the shard's table without taking the
// shard's lock (see package idtable) and lock only the entry, so calls for
// different ids share no memory that either writes; the shard lock is taken
// to add or remove entries and to sweep.

const (
	// maxShards bounds the shard count: past a few hundred, another shard
	// buys no throughput and costs 128 bytes per Backoff.
	maxShards = 256

	// sweepSteps is how many entries each Next inspects. It must exceed 1,
	// the most one Next adds, so that a round of the sweep over a shard
	// finishes even while Next keeps adding entries to it.
	sweepSteps = 2

	// shrinkMin is the peak size below which a shard's storage is never
	// rebuilt: a few hundred entries are not worth a rebuild.
	shrinkMin = 256
)

// shardCount returns the number of shards for a new Backoff: the smallest
// power of two ≥ 4·GOMAXPROCS, at most maxShards. With P goroutines calling
// at once, each call then finds its shard's lock taken by another about P/(4P)
// = a quarter of the time at worst, and usually much less, since calls spend
// most of their time outside the lock. A power of two makes the shard index a
// mask of the hash. GOMAXPROCS is read once; changing it later leaves the
// Backoff correct, only more or less contended.
func shardCount() int {
	want := 4 * runtime.GOMAXPROCS(0)
	n := 1
	for n < want && n < maxShards {
		n <<= 1
	}
	return n
}

// An entry is the state of one id. Entries are allocated one by one and
// referred to by pointer, so that a Next for an id that has one can find it
// through the shard's table and update it under the entry's own lock, without
// the shard's (see entryTable). 64 bytes: one cache line, the one that Next
// writes anyway.
type entry struct {
	mu   sync.Mutex // guards dead and entryState
	dead bool       // removed from its shard: look again under the shard lock
	entryState
	id  string // never changes
	pos int    // position in the shard's entries; under the shard lock
}

// TableID returns e's id: the key of the shard's table.
func (e *entry) TableID() string { return e.id }

// entryTable is a shard's index from id to entry, which Next searches
// without the shard's lock (see package idtable).
type entryTable = idtable.Table[entry, *entry]

// entryState is what an entry records about its id.
type entryState struct {
	updated  time.Duration // clock time of the last Next, as an offset from the Backoff's epoch
	backoff  time.Duration // current delay, in [initial, ceiling]
	attempts int           // Next calls since the entry (re)started
}

// shardState is one shard's share of the entries.
//
// Two structures hold the same entries. The table finds an entry by id, and
// can be searched without the lock. The dense slice entries lets the sweep
// walk them in a fixed order and resume where it stopped. The cursor splits
// the slice: entries[:cursor] have been inspected in the current round of
// the sweep, entries[cursor:] not yet. Removals keep that split (see
// removeLocked), so a round never skips an entry, however many entries are
// removed or added meanwhile; new entries are appended to the uninspected
// part.
type shardState struct {
	// Read without the lock, written under it.
	table atomic.Pointer[entryTable] // nil while the shard is empty
	// oldest is at or before the last update of every entry (while there
	// are entries): the least update the last complete round of the sweep
	// saw, lowered by any update since. Under the default expiry rule
	// nothing can expire before oldest + 2×max, and until then the sweep
	// stands still. roundMin is the least update seen so far in the current
	// round, which becomes oldest when the round ends. Both hold a
	// time.Duration.
	oldest, roundMin atomic.Int64

	mu      sync.Mutex
	entries []*entry
	cursor  int // in [0, len(entries)]
	// peak is the most entries the shard held since its storage was last
	// rebuilt: the table and the slice never shrink by themselves, so peak
	// measures their footprint.
	peak int
}

// A shard is a shardState padded to a multiple of 128 bytes, so that the
// fields of neighbouring shards are at least 64 bytes apart and never share a
// cache line: otherwise goroutines that work on different shards would still
// slow each other down, each write invalidating the other's cached copy.
type shard struct {
	shardState
	_ [128 - unsafe.Sizeof(shardState{})%128]byte
}

// find returns the entry of id, whose hash is hash, or nil. Without the lock
// the entry may be dead; under it, never.
func (s *shardState) find(hash uint64, id string) *entry {
	return s.table.Load().Find(hash, id)
}

// insertLocked adds e, whose id has hash hash and must not be in the shard.
// Its fields must be final: readers may find it as soon as it is in the
// table.
func (s *shardState) insertLocked(b *Backoff, hash uint64, e *entry) {
	if len(s.entries) == 0 {
		s.oldest.Store(int64(e.updated))
		s.roundMin.Store(int64(e.updated))
	}
	e.pos = len(s.entries)
	s.entries = append(s.entries, e)
	s.peak = max(s.peak, len(s.entries))
	t := s.table.Load()
	if t.Full() {
		t = t.Rebuilt(len(s.entries), b.hash)
		s.table.Store(t)
	}
	t.Insert(hash, e)
}

// removeLocked removes the entry at position i, which the caller has marked
// dead. Entries move to fill the gap.
func (s *shardState) removeLocked(b *Backoff, i int) {
	e := s.entries[i]
	s.table.Load().Remove(b.hash(e.id), e)
	last := len(s.entries) - 1
	if i < s.cursor {
		// The gap is in the inspected part. Filling it from the end of the
		// slice would move an uninspected entry there, and this round would
		// skip it. Fill it with the last inspected entry instead, shrink the
		// inspected part by one, and fill that slot from the end.
		s.cursor--
		s.moveLocked(s.cursor, i)
		i = s.cursor
	}
	s.moveLocked(last, i)
	s.entries[last] = nil // drop the reference for the garbage collector
	s.entries = s.entries[:last]
}

// moveLocked moves the entry at from to position to.
func (s *shardState) moveLocked(from, to int) {
	if from != to {
		s.entries[to] = s.entries[from]
		s.entries[to].pos = to
	}
}

// updatedLocked records that an entry was written with last update now,
// keeping oldest and roundMin lower bounds even if the clock went back.
func (s *shardState) updatedLocked(now time.Duration) {
	if int64(now) < s.oldest.Load() {
		s.oldest.Store(int64(now))
	}
	if int64(now) < s.roundMin.Load() {
		s.roundMin.Store(int64(now))
	}
}

// settled reports whether an entry just written without the lock, with last
// update now, leaves the shard needing nothing under the lock: oldest and
// roundMin are still lower bounds, and under the default expiry rule the
// sweep would stand still. See Backoff.Next for why reading them after the
// write is enough.
func (s *shardState) settled(b *Backoff, now time.Duration) bool {
	return int64(now) >= s.oldest.Load() && int64(now) >= s.roundMin.Load() && s.nothingExpired(b, now)
}

// nothingExpired reports whether, under the default expiry rule, no entry of
// the shard can have expired at now: now is within 2×max of oldest.
func (s *shardState) nothingExpired(b *Backoff, now time.Duration) bool {
	return elapsed(now, time.Duration(s.oldest.Load())) <= b.stale
}

// expireLocked marks e dead if it has expired at now and is not keep, and
// otherwise returns its last update. Deciding and marking happen under e's
// lock, so that a Next that updates e without the shard lock either comes
// first, and e is not expired, or finds e dead and starts over.
func (e *entry) expireLocked(b *Backoff, nowTime time.Time, now time.Duration, keep *entry) (updated time.Duration, dead bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e != keep && b.expired(nowTime, now, e.updated) {
		e.dead = true
	}
	return e.updated, e.dead
}

// kill marks e dead, for a removal that does not depend on expiry.
func (e *entry) kill() {
	e.mu.Lock()
	e.dead = true
	e.mu.Unlock()
}

// sweepLocked inspects the next sweepSteps entries in round-robin order and
// removes those that have expired at now, as GC would. The entry keep, which
// the calling Next has just updated, is never removed: with a custom expiry
// rule it might count as expired at once, and client-go would still report
// it until the next GC.
//
// This is how a Backoff reclaims expired entries without a goroutine. It
// bounds the memory because only Next adds entries: a round over a shard
// takes at most as many Next calls as the shard held when the round began,
// and every entry the shard holds at the end of a round was live when the
// round inspected it, so a shard holds at most about twice the ids that were
// live during its last round. A shard that no Next reaches keeps its expired
// entries, but cannot grow either. Storage shrinks once a shard falls to a
// quarter of its peak (shrinkLocked).
//
// Under the default expiry rule the sweep stands still while no entry can
// have expired (now is within 2×max of oldest, the shard's lower bound of its
// entries' last updates): every entry is live then, and Next touches no
// memory but its own entry's, the common state of a Backoff whose ids fail
// more often than every 2×max (BenchmarkBackoffNext).
func (s *shardState) sweepLocked(b *Backoff, now time.Duration, keep *entry) {
	if b.expiry == nil && s.nothingExpired(b, now) {
		return
	}
	var nowTime time.Time // for a WithExpiry rule only
	if b.expiry != nil {
		nowTime = b.epoch.Add(now)
	}
	for range sweepSteps {
		if len(s.entries) == 0 {
			break
		}
		if s.cursor >= len(s.entries) {
			// A round ended: every entry now in the shard was inspected
			// in it, or written since, and roundMin is at or before all
			// of their updates.
			s.cursor = 0
			s.oldest.Store(s.roundMin.Load())
			s.roundMin.Store(int64(maxDuration))
		}
		c := s.cursor
		if updated, dead := s.entries[c].expireLocked(b, nowTime, now, keep); dead {
			s.removeLocked(b, c)
		} else {
			s.roundMin.Store(min(s.roundMin.Load(), int64(updated)))
			s.cursor++
		}
	}
	s.shrinkLocked(b)
}

// collectLocked removes every entry that has expired at now. It walks
// backwards because removeLocked only moves entries from positions above the
// gap, which the walk has already inspected.
func (s *shardState) collectLocked(b *Backoff, now time.Duration) {
	nowTime := b.epoch.Add(now)
	for i := len(s.entries) - 1; i >= 0; i-- {
		if _, dead := s.entries[i].expireLocked(b, nowTime, now, nil); dead {
			s.removeLocked(b, i)
		}
	}
	s.shrinkLocked(b)
}

// shrinkLocked rebuilds the shard's storage once it holds a quarter or less
// of its peak: the slice would otherwise keep its capacity, and the table its
// slots, forever. The rebuild costs O(n) for the n entries left, which the
// ≥ 3n removals since the peak pay for, so it is amortised O(1) per removal.
func (s *shardState) shrinkLocked(b *Backoff) {
	n := len(s.entries)
	if s.peak < shrinkMin || n > s.peak/4 {
		return
	}
	if n == 0 {
		s.entries, s.cursor, s.peak = nil, 0, 0
		s.table.Store(nil)
		return
	}
	entries := make([]*entry, n, 2*n)
	copy(entries, s.entries)
	s.entries, s.peak = entries, n
	s.table.Store(s.table.Load().Rebuilt(n, b.hash))
}

// size returns the number of entries, expired or not, that b holds.
func (b *Backoff) size() int {
	n := 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		n += len(s.entries)
		s.mu.Unlock()
	}
	return n
}
