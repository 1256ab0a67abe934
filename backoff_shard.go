package backoff

import (
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// The storage of a Backoff: its entries, spread over shards by a hash of the
// id, each shard with its own lock and its own incremental sweep.

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

// An entry is the state of one id.
type entry struct {
	id       string
	updated  time.Duration // clock time of the last Next, as an offset from the Backoff's epoch
	backoff  time.Duration // current delay, in [initial, ceiling]
	attempts int           // Next calls since the entry (re)started
}

// shardState is one shard's share of the entries.
//
// The entries live in a dense slice, which the index map points into, so that
// the sweep can walk them in a fixed order; a Go map has no resumable
// iteration. The cursor splits the slice: entries[:cursor] have been
// inspected in the current round of the sweep, entries[cursor:] not yet.
// Removals keep that split (see removeLocked), so a round never skips an
// entry, however many entries are removed or added meanwhile; new entries are
// appended to the uninspected part.
type shardState struct {
	mu      sync.Mutex
	index   map[string]int // id → position in entries; nil until first use
	entries []entry
	cursor  int // in [0, len(entries)]
	// oldest is at or before the last update of every entry (while there
	// are entries): the least update the last complete round of the sweep
	// saw, lowered by any update since. Under the default expiry rule
	// nothing can expire before oldest + 2×max, and until then the sweep
	// stands still. roundMin is the least update seen so far in the current
	// round, which becomes oldest when the round ends.
	oldest, roundMin time.Duration
	// peak is the most entries the shard held since index was built. Go maps
	// never give memory back, so peak measures index's footprint.
	peak int
}

// A shard is a shardState padded to a multiple of 128 bytes, so that the
// fields of neighbouring shards are at least 64 bytes apart and never share a
// cache line: otherwise goroutines that work on different shards would still
// slow each other down, each write invalidating the other's cached lock.
type shard struct {
	shardState
	_ [128 - unsafe.Sizeof(shardState{})%128]byte
}

// insertLocked appends e, whose id must not be in the shard, and returns its
// position.
func (s *shardState) insertLocked(e entry) int {
	if s.index == nil {
		s.index = make(map[string]int)
	}
	if len(s.entries) == 0 {
		s.oldest, s.roundMin = e.updated, e.updated
	}
	i := len(s.entries)
	s.entries = append(s.entries, e)
	s.index[e.id] = i
	s.peak = max(s.peak, len(s.entries))
	return i
}

// removeLocked removes the entry at position i. Entries move to fill the gap;
// keep is the position of an entry the caller still needs, and the result is
// its position after the moves.
func (s *shardState) removeLocked(i, keep int) int {
	last := len(s.entries) - 1
	delete(s.index, s.entries[i].id)
	if i < s.cursor {
		// The gap is in the inspected part. Filling it from the end of the
		// slice would move an uninspected entry there, and this round would
		// skip it. Fill it with the last inspected entry instead, shrink the
		// inspected part by one, and fill that slot from the end.
		s.cursor--
		keep = s.moveLocked(s.cursor, i, keep)
		i = s.cursor
	}
	keep = s.moveLocked(last, i, keep)
	s.entries[last] = entry{} // drop the references for the garbage collector
	s.entries = s.entries[:last]
	return keep
}

// moveLocked moves the entry at from to position to, and returns keep
// updated for the move.
func (s *shardState) moveLocked(from, to, keep int) int {
	if from == to {
		return keep
	}
	s.entries[to] = s.entries[from]
	s.index[s.entries[to].id] = to
	if keep == from {
		return to
	}
	return keep
}

// updatedLocked records that an entry was written with last update now,
// keeping oldest and roundMin lower bounds even if the clock went back.
func (s *shardState) updatedLocked(now time.Duration) {
	s.oldest = min(s.oldest, now)
	s.roundMin = min(s.roundMin, now)
}

// sweepLocked inspects the next sweepSteps entries in round-robin order and
// removes those that have expired at now. The entry at keep, which the
// calling Next has just updated, is never removed: with a custom expiry rule
// it might count as expired at once, and client-go would still report it
// until the next GC.
//
// Under the default expiry rule the sweep stands still while no entry can
// have expired (now is within 2×max of oldest): every entry is live then,
// and Next touches no memory but its own entry's. That is the common state of
// a Backoff whose ids fail more often than every 2×max; measured, inspecting
// two entries on every call cost 10–40% of Next at 100,000 ids, most of it
// cache lines that the other core had just written.
func (s *shardState) sweepLocked(b *Backoff, now time.Duration, keep int) {
	if b.expiry == nil && elapsed(now, s.oldest) <= b.stale {
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
			s.oldest, s.roundMin = s.roundMin, maxDuration
		}
		c := s.cursor
		if c != keep && b.expired(nowTime, now, s.entries[c].updated) {
			keep = s.removeLocked(c, keep)
		} else {
			s.roundMin = min(s.roundMin, s.entries[c].updated)
			s.cursor++
		}
	}
	s.shrinkLocked()
}

// collectLocked removes every entry that has expired at now. It walks
// backwards because removeLocked only moves entries from positions above the
// gap, which the walk has already inspected.
func (s *shardState) collectLocked(b *Backoff, now time.Duration) {
	nowTime := b.epoch.Add(now)
	for i := len(s.entries) - 1; i >= 0; i-- {
		if b.expired(nowTime, now, s.entries[i].updated) {
			s.removeLocked(i, -1)
		}
	}
	s.shrinkLocked()
}

// shrinkLocked rebuilds the shard's storage once it holds a quarter or less
// of its peak: the slice would otherwise keep its capacity, and the map its
// buckets, forever. The rebuild costs O(n) for the n entries left, which the
// ≥ 3n removals since the peak pay for, so it is amortised O(1) per removal.
func (s *shardState) shrinkLocked() {
	n := len(s.entries)
	if s.peak < shrinkMin || n > s.peak/4 {
		return
	}
	if n == 0 {
		s.entries, s.index, s.cursor, s.peak = nil, nil, 0, 0
		return
	}
	entries := make([]entry, n, 2*n)
	copy(entries, s.entries)
	index := make(map[string]int, n)
	for i := range entries {
		index[entries[i].id] = i
	}
	s.entries, s.index, s.peak = entries, index, n
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
