package backoff

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/retrykit/backoff/internal/idtable"
)

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
