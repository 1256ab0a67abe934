package backoff

import (
	"errors"
	"k8s.io/utils/clock"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// ErrRetryBudgetExhausted is the [RetryError.Reason] when [Retry] stopped
// because its [RetryBudget] refused the next attempt.
var ErrRetryBudgetExhausted = errors.New("backoff: retry budget exhausted")

// RetryBudget bounds retries by the traffic that causes them, so that
// retrying cannot multiply the load on a dependency when it is weakest: it
// allows a retry only while the retries made in the last window stay within
// ratio times the requests made in it, plus a floor of minPerSecond retries
// per second of the window. A 10% budget (ratio 0.1) turns a complete outage
// into at most 1.1 times the normal load, plus the floor, where 5 attempts per
// call without a budget make it 5 times. It is the retry budget of Finagle and
// Envoy, and the SRE book's "retry only while retries are under 10% of
// requests".
//
// Record each first attempt with [RetryBudget.RecordRequest] and ask before
// each further one with [RetryBudget.TryRetry]; or pass the budget with
// [WithRetryBudget] to [Retry], [RetryValue], [OnError] and
// [NewRateLimitingQueue], which do it for you. One budget may be shared by any
// number of them: the budget of a dependency, say, shared by every call to it.
//
// # What it guarantees
//
// Let t be the time of a decision (the latest time the budget has read from
// its clock) and b the budget's precision, a tenth of the window (at least 1
// ns). For every retry the budget allows at t:
//
//	retries allowed in (t-window, t], this one included
//	    ≤ ratio × requests recorded in (t-window, t] + minPerSecond × window-seconds
//
// and it refuses a retry at t only if that bound would fail with the requests
// of (t-window+2b, t] and the retries of (t-window-2b, t]: requests earn
// retries up to two tenths of the window later than an exact count would.
// Decisions made at the same time by several goroutines are ordered, each
// counting the ones before it.
//
// The bound holds for the window that ends at each allowed retry, not for
// every window: requests may leave a window before the retries they paid
// for. With ratio 0.5, no floor and a 10 s window, 10 requests at 0 s pay for
// 5 retries at 9 s, each within the bound, yet the window (5 s, 15 s] holds
// those 5 retries and no request. No budget can bound every window and still
// let requests pay for retries: a retry at t after the last request at r < t
// lies in the window (r, r+window], which holds no request up to t, so only
// the floor could pay for it. What does hold for every window follows from
// the bound at the last retry in it: its retries are at most ratio × the
// requests of that window and of the window before it, plus the floor.
//
// The budget keeps its window as 10 buckets of window/10, so its memory (a
// few kilobytes) is constant whatever the request rate. Counts saturate at
// 16,777,215 requests and as many retries per bucket; requests beyond that
// are not counted, which only refuses more.
//
// Time is read from the clock of [WithClock]. A clock that steps backwards
// freezes the window at the latest time the budget has seen until the clock
// passes it again: nothing is counted twice, and no request earns retries
// again.
//
// # Concurrency
//
// A RetryBudget is safe for concurrent use by multiple goroutines. While the
// window has room to spare, it sets a few retries aside for the goroutines
// that are retrying, so that goroutines retrying at once do not write the
// same memory; the guarantee above counts the retries allowed, not the ones
// set aside, and a refusal takes back what is set aside first. Its methods
// wait for each other only for a moment: once per bucket, when the window
// moves on; when a goroutine sets retries aside, once every few dozen
// retries; when a refusal takes them back; and in [RetryBudget.Snapshot]
// and when a queue computes when a refused item may come back. Its zero
// value is not usable: create it with [NewRetryBudget].
type RetryBudget struct {
	ratio float64
	floor float64 // minPerSecond·window-seconds: retries allowed with no request
	clk   clock.PassiveClock
	// realClock is set when clk is clock.RealClock: the budget then calls
	// time.Since itself, which is what RealClock.Since does, without the
	// call through the interface.
	realClock bool
	// origin is the clock's time at construction; bucket k spans
	// [origin+k·width, origin+(k+1)·width).
	origin time.Time
	width  time.Duration
	// A decision at bucket k counts requests in buckets (k-requestBuckets, k]
	// and retries in [k-retryBuckets, k]: the first lie within the window,
	// the second cover it.
	requestBuckets, retryBuckets int64
	metrics                      RetryBudgetMetrics // nil: none

	// The hot path reads the fields below without a lock. The current
	// bucket's counts live in one word, cur, so that a decision and its
	// retry are one compare-and-swap; the sums of the older buckets change
	// only when the window moves on, under mu, inside a sequence lock (seq
	// odd while it moves), and cur carries the low bits of the generation
	// (seq/2) it belongs to, so that a compare-and-swap prepared against
	// one generation fails in the next.
	seq           atomic.Uint64
	head          atomic.Int64 // the current bucket: the latest the clock has shown
	headEnd       atomic.Int64 // when the head bucket ends, in nanoseconds since origin
	olderRequests atomic.Int64 // requests in buckets (head-requestBuckets, head)
	olderRetries  atomic.Int64 // retries in buckets [head-retryBuckets, head)
	// stripes hold the leases of the current bucket (see leaseSize):
	// allowed retries are counted in cur a lease at a time, and granted one by
	// one from the caller's stripe, so that goroutines that retry at once
	// write different cache lines. Its length is a power of two.
	stripes []budgetStripe
	_       [64]byte // keeps cur, written on every request, off the read-mostly line above
	cur     atomic.Uint64
	_       [56]byte

	// mu is held to move the window, and to take out or take back leases.
	mu      sync.Mutex
	history [2*retryBudgetBuckets + 1]budgetBucket // the older buckets, by index modulo its length
}

// retryBudgetBuckets is how many buckets a window is cut into: the budget's
// precision (a tenth of the window) against the cost of moving the window.
const retryBudgetBuckets = 10

// The layout of RetryBudget.cur: a flag set while stripes may hold leases,
// the generation tag, requests, retries. The retries include the leases
// handed out to stripes and not yet used.
const (
	budgetCountBits = 24
	budgetCountMax  = 1<<budgetCountBits - 1
	budgetTagShift  = 2 * budgetCountBits
	budgetTagMask   = 1<<(63-budgetTagShift) - 1
	budgetRequest   = 1 << budgetCountBits // one request, added to cur
	budgetLeased    = 1 << 63              // some stripe may hold a lease of this bucket
)

// budgetConfig holds the options about retry budgets: the budget that Retry
// and RateLimitingQueue spend from (nil: none), and the metrics a new budget
// reports to (nil: none).
type budgetConfig struct {
	budget  *RetryBudget
	metrics RetryBudgetMetrics
}

// budgetBucket is the count of one past bucket.
type budgetBucket struct {
	index             int64 // the bucket these counts are for
	requests, retries int64
}

// RetryBudgetSnapshot is the state of a [RetryBudget] at one moment, as its
// next decision would count it.
type RetryBudgetSnapshot struct {
	// Requests and Retries are the requests and retries counted in the
	// window.
	Requests, Retries int64
	// Refused is the number of retries refused since the budget was created.
	Refused int64
	// Balance is how many more retries the window allows:
	// ratio·Requests + minPerSecond·window-seconds - Retries. It can be
	// negative when requests leave the window before the retries they paid
	// for; the budget then refuses until it is positive again.
	Balance float64
}

// RetryBudgetMetrics receives the decisions of a [RetryBudget] as they happen,
// for counters in a metrics library; pass it with [WithRetryBudgetMetrics].
// The gauges (what is in the window, the balance) are read with
// [RetryBudget.Snapshot] when they are scraped. The methods are called on the
// caller's goroutine, possibly with a queue's lock held: they must be fast,
// must not block and must not call back into the budget or the queue.
type RetryBudgetMetrics interface {
	// IncRequests counts a request.
	IncRequests()
	// IncRetries counts a retry the budget allowed.
	IncRetries()
	// IncRefused counts a retry the budget refused.
	IncRefused()
}

// WithRetryBudgetMetrics makes [NewRetryBudget] report the budget's decisions
// to m. The default is no reporting. WithRetryBudgetMetrics panics if m is
// nil, a typed nil included.
func WithRetryBudgetMetrics(m RetryBudgetMetrics) Option {
	mustNotBeNil("WithRetryBudgetMetrics", "m", isNilValue(m))
	return valueOption(optionRetryBudgetMetrics, m)
}

// NewRetryBudget returns a budget that allows, over the window that ends at
// each retry, at most ratio·requests + minPerSecond·window-seconds retries:
// ratio 0.1 allows one retry per ten requests, and minPerSecond keeps a few
// retries possible when there is little traffic. Finagle's default is
// NewRetryBudget(0.2, 10, 10*time.Second). It reads [WithClock] and
// [WithRetryBudgetMetrics].
//
// A ratio of 0 with a minPerSecond of 0 allows no retry at all. NewRetryBudget
// panics if ratio or minPerSecond is negative, NaN or infinite, or if window
// is not positive.
func NewRetryBudget(ratio float64, minPerSecond float64, window time.Duration, opts ...Option) *RetryBudget {
	const where = "NewRetryBudget"
	mustBeFactor(where, "ratio", ratio)
	mustBeFactor(where, "minPerSecond", minPerSecond)
	mustBePositive(where, "window", window)
	cfg := newConfig(opts)
	width := max(window/retryBudgetBuckets, 1)
	b := &RetryBudget{
		ratio:          ratio,
		floor:          minPerSecond * window.Seconds(),
		clk:            cfg.clock,
		origin:         cfg.clock.Now(),
		width:          width,
		requestBuckets: int64(window / width),
		retryBuckets:   int64(window / width),
		metrics:        cfg.budget.metrics,
	}
	b.stripes = make([]budgetStripe, budgetStripeCount())
	_, b.realClock = cfg.clock.(clock.RealClock)
	if window%width != 0 {
		b.retryBuckets++
	}
	b.headEnd.Store(int64(width))
	return b
}

// WithRetryBudget makes [Retry], [RetryValue], [OnError] and
// [NewRateLimitingQueue] spend retries from b; any number of them may share
// it. Retry records its first attempt as a request and asks b before each
// further attempt: when b refuses, Retry returns at once, without waiting, a
// [*RetryError] whose Reason is [ErrRetryBudgetExhausted] and whose Last is
// the error of the last attempt. OnError returns the same error. For the
// queue, see [RateLimitingQueue.AddRateLimited]. WithRetryBudget panics if b
// is nil.
func WithRetryBudget(b *RetryBudget) Option {
	mustNotBeNil("WithRetryBudget", "b", b == nil)
	return valueOption(optionRetryBudget, b)
}

// RecordRequest counts a request: a first attempt, which earns ratio retries
// for the window that follows. It never blocks and does not allocate.
func (b *RetryBudget) RecordRequest() {
	b.recordRequestAt(b.sinceOrigin())
}

// recordRequestAt is RecordRequest at d after the budget's origin on its
// clock, for a caller that has just read that clock (see budgetGate).
func (b *RetryBudget) recordRequestAt(d time.Duration) {
	k := b.bucketAt(d)
	for {
		w, _, _ := b.view(k)
		if w>>budgetCountBits&budgetCountMax == budgetCountMax ||
			b.cur.CompareAndSwap(w, w+budgetRequest) {
			break
		}
	}
	if b.metrics != nil {
		b.metrics.IncRequests()
	}
}

// TryRetry reports whether a retry fits in the budget now and, if it does,
// counts it. A refusal changes nothing but the count of refusals: ask again
// later, or give up. It never blocks and does not allocate.
func (b *RetryBudget) TryRetry() bool {
	return b.tryRetryAt(b.sinceOrigin())
}

// after returns offset+elapsed: a time after the budget's origin that a
// caller has just read on the budget's clock, as the offset of its start
// (see newBudgetGate) and the time elapsed since. A sum that overflows reads
// the clock instead.
func (b *RetryBudget) after(offset, elapsed time.Duration) time.Duration {
	d := offset + elapsed
	if (elapsed > 0 && d < offset) || (elapsed < 0 && d > offset) {
		return b.sinceOrigin()
	}
	return d
}

// tryRetryAt is TryRetry at d after the budget's origin on its clock. The
// common case, a time within the head bucket and a lease in the caller's
// stripe, writes only that stripe.
func (b *RetryBudget) tryRetryAt(d time.Duration) bool {
	st := b.stripe()
	if int64(d) < b.headEnd.Load() && st.grant() {
		if b.metrics != nil {
			b.metrics.IncRetries()
		}
		return true
	}
	return b.tryRetrySlow(d, st)
}

// tryRetrySlow is tryRetryAt when the caller's stripe has no lease, or the
// window must move first. A retry that fits with room to spare takes a
// lease; one that fits tightly is counted in cur directly, as are refusals
// while no stripe holds a lease, all without a lock. A refusal while leases
// are out takes them back first (see decideLocked).
func (b *RetryBudget) tryRetrySlow(d time.Duration, st *budgetStripe) bool {
	k := b.bucketAt(d)
	for {
		w, olderRequests, olderRetries := b.view(k)
		requests := olderRequests + int64(w>>budgetCountBits&budgetCountMax)
		retries := olderRetries + int64(w&budgetCountMax)
		fits := w&budgetCountMax != budgetCountMax && b.fits(requests, retries+1)
		switch {
		case !fits && w&budgetLeased == 0:
			b.refuse(st)
			return false
		case fits && b.leaseSize(w, requests, retries) < budgetLeaseMin:
			if !b.cur.CompareAndSwap(w, w+1) {
				continue
			}
			if b.metrics != nil {
				b.metrics.IncRetries()
			}
			return true
		}
		b.mu.Lock()
		allowed := b.decideLocked(st)
		b.mu.Unlock()
		if !allowed {
			b.refuse(st)
			return false
		}
		if b.metrics != nil {
			b.metrics.IncRetries()
		}
		return true
	}
}

// refuse counts a refusal.
func (b *RetryBudget) refuse(st *budgetStripe) {
	st.refused.Add(1)
	if b.metrics != nil {
		b.metrics.IncRefused()
	}
}

// Snapshot returns the budget's counts as its next decision would see them.
func (b *RetryBudget) Snapshot() RetryBudgetSnapshot {
	b.view(b.bucketAt(b.sinceOrigin())) // moves the window to now
	b.mu.Lock()
	b.takeBackLeasesLocked()
	w := b.cur.Load()
	s := RetryBudgetSnapshot{
		Requests: b.olderRequests.Load() + int64(w>>budgetCountBits&budgetCountMax),
		Retries:  b.olderRetries.Load() + int64(w&budgetCountMax),
	}
	b.mu.Unlock()
	for i := range b.stripes {
		s.Refused += b.stripes[i].refused.Load()
	}
	s.Balance = b.ratio*float64(s.Requests) + b.floor - float64(s.Retries)
	return s
}

// fits reports whether retries are within the allowance of requests.
func (b *RetryBudget) fits(requests, retries int64) bool {
	return float64(retries) <= b.ratio*float64(requests)+b.floor
}

// sinceOrigin reads the clock: the time since the budget's origin. With an
// origin that has a monotonic reading, as the real clock's times do,
// time.Since reads only the monotonic clock, which is cheaper than time.Now's
// two readings (see BenchmarkFloor in bench/, op=since and op=now).
func (b *RetryBudget) sinceOrigin() time.Duration {
	if b.realClock {
		return time.Since(b.origin)
	}
	return b.clk.Since(b.origin)
}

// bucketAt returns the index of the bucket that d after the origin is in, or
// 0 if that is not after the head; the callers count a bucket before the
// head as the head, so that a clock that went backwards is still at the head.
// The common case, a time within the head, costs no division.
func (b *RetryBudget) bucketAt(d time.Duration) int64 {
	if int64(d) < b.headEnd.Load() {
		return 0
	}
	return int64(d / b.width)
}

// view returns, for bucket k or the head if it is later, the current bucket's
// word and the sums of the older buckets, all of one generation: a
// compare-and-swap of the word succeeds only if the window has not moved
// since. It moves the window to k first if k is past the head.
func (b *RetryBudget) view(k int64) (w uint64, olderRequests, olderRetries int64) {
	for {
		s := b.seq.Load()
		if s&1 != 0 { // the window is moving: wait for it
			b.mu.Lock()
			b.mu.Unlock() //lint:ignore SA2001 waiting for the mover is the point
			continue
		}
		if k > b.head.Load() {
			b.advance(k)
			continue
		}
		olderRequests, olderRetries = b.olderRequests.Load(), b.olderRetries.Load()
		if b.seq.Load() != s {
			continue
		}
		w = b.cur.Load()
		if w>>budgetTagShift&budgetTagMask != (s>>1)&budgetTagMask {
			continue
		}
		return w, olderRequests, olderRetries
	}
}

// advance moves the window so that bucket k is the current one.
func (b *RetryBudget) advance(k int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.head.Load()
	if k <= h {
		return
	}
	gen := b.seq.Add(1)/2 + 1
	unused := b.endLeases(gen)
	old := b.cur.Swap(gen & budgetTagMask << budgetTagShift)
	b.history[b.slot(h)] = budgetBucket{
		index:    h,
		requests: int64(old >> budgetCountBits & budgetCountMax),
		retries:  int64(old&budgetCountMax) - unused,
	}
	var requests, retries int64
	for j := k - b.retryBuckets; j < k; j++ {
		if e := b.history[b.slot(j)]; e.index == j {
			retries += e.retries
			if j > k-b.requestBuckets {
				requests += e.requests
			}
		}
	}
	b.olderRequests.Store(requests)
	b.olderRetries.Store(retries)
	b.head.Store(k)
	end := int64(math.MaxInt64)
	if k < math.MaxInt64/int64(b.width)-1 {
		end = (k + 1) * int64(b.width)
	}
	b.headEnd.Store(end)
	b.seq.Add(1)
}

// slot returns the position of bucket j in history.
func (b *RetryBudget) slot(j int64) int {
	n := int64(len(b.history))
	return int(((j % n) + n) % n)
}

// retryAllowedIn returns how long from now until the budget would allow a
// retry if nothing else happened in between (0 if it allows one now), and
// false if it never would without new requests.
func (b *RetryBudget) retryAllowedIn() (time.Duration, bool) {
	d := b.sinceOrigin()
	b.view(b.bucketAt(d)) // moves the window to now
	b.mu.Lock()
	defer b.mu.Unlock()
	b.takeBackLeasesLocked()
	// The window cannot move while mu is held, so cur is the head's.
	h := b.head.Load()
	w := b.cur.Load()
	count := func(j int64) (requests, retries int64) {
		if j == h {
			return int64(w >> budgetCountBits & budgetCountMax), int64(w & budgetCountMax)
		}
		if e := b.history[b.slot(j)]; e.index == j && j < h {
			return e.requests, e.retries
		}
		return 0, 0
	}
	for next := h; next <= h+b.retryBuckets+1; next++ {
		var requests, retries int64
		for j := next - b.retryBuckets; j <= next; j++ {
			rq, rt := count(j)
			retries += rt
			if j > next-b.requestBuckets {
				requests += rq
			}
		}
		if b.fits(requests, retries+1) {
			if next == h {
				return 0, true
			}
			start := time.Duration(next) * b.width
			if start < 0 || start/b.width != time.Duration(next) {
				return math.MaxInt64, true // saturates: the window is near the end of time
			}
			return max(start-d, 0), true
		}
	}
	return 0, false
}

// Leases: how a RetryBudget allows retries from parallel goroutines without
// all of them writing one word.
//
// Counting every allowed retry in cur, the one word that holds the current
// bucket's counts, makes goroutines that retry at once take turns at its
// cache line. Instead, when the bucket has room to spare, a decision takes a
// lease: it counts a few retries in cur at once (under mu, with the flag
// budgetLeased) and leaves the ones it did not use in its stripe, from which
// the next decisions of the goroutines that share the stripe take them, one
// compare-and-swap on the stripe each. cur's retries are then the retries
// allowed plus the leases not yet used, never fewer, so that a decision that
// fits against cur fits against the retries really allowed: the bound of
// "What it guarantees" holds for every retry granted from a lease, since the
// lease was taken in the same bucket, against the same older buckets and
// fewer requests.
//
// Two rules keep the rest of the guarantee:
//   - A lease belongs to the bucket it was taken in. Moving the window ends
//     every lease (endLeases) and counts only the retries used from them in
//     the bucket that closes; a stripe's word carries the generation of its
//     lease, so a compare-and-swap prepared before the move fails after it.
//   - A refusal counts only retries really allowed: while budgetLeased is
//     set, a decision that does not fit takes back every unused lease first
//     (takeBackLeasesLocked) and decides again, under mu. budgetLeased is set
//     in the same compare-and-swap that counts a lease, and cleared only
//     under mu once every stripe is empty, so a decision that reads cur with
//     the flag clear reads the exact count, and may refuse without the lock.
//
// Leases are taken under mu, so that taking one never overlaps a move of the
// window or a take-back; granting from a lease takes no lock.

// budgetStripe is one stripe of a budget's leases, padded so that the words
// of neighbouring stripes never share a cache line.
type budgetStripe struct {
	// lease holds the generation of the bucket its lease belongs to (high
	// 32 bits) and how many retries of it are left (low 32 bits). Only
	// decrements happen without mu.
	lease atomic.Uint64
	// refused counts the refusals of the goroutines that use the stripe.
	refused atomic.Int64
	_       [128 - 16]byte
}

const (
	budgetLeaseCountMask = 1<<32 - 1
	// budgetLeaseMax is the most retries a lease holds: a lease costs a
	// lock and a write of cur, shared by that many decisions.
	budgetLeaseMax = 32
	// budgetLeaseMin is the smallest lease worth the lock: with less room,
	// decisions count in cur directly.
	budgetLeaseMin = 2
	// budgetStripesMin and budgetStripesMax bound the number of stripes.
	budgetStripesMin = 16
	budgetStripesMax = 64
)

// budgetStripeCount returns the number of stripes of a new budget: a power
// of two ≥ 4·GOMAXPROCS within [budgetStripesMin, budgetStripesMax], so
// that goroutines running at once seldom share one.
func budgetStripeCount() int {
	n := budgetStripesMin
	for n < 4*runtime.GOMAXPROCS(0) && n < budgetStripesMax {
		n <<= 1
	}
	return n
}

// stripe returns the stripe of the calling goroutine: a hash of the address
// of a variable on its stack, which is the same from call to call as long as
// the goroutine calls from the same depth, and differs between goroutines,
// whose stacks lie apart. Which stripe a goroutine uses matters only for
// speed.
func (b *RetryBudget) stripe() *budgetStripe {
	var onStack byte
	p := uint64(uintptr(unsafe.Pointer(&onStack)))
	// Fibonacci hashing of the address in units of the smallest stack
	// (2 KiB) spreads neighbouring stacks over distant stripes.
	i := (p >> 11) * 0x9e3779b97f4a7c15 >> 32
	return &b.stripes[i&uint64(len(b.stripes)-1)]
}

// grant takes one retry from the stripe's lease, and reports whether there
// was one.
func (st *budgetStripe) grant() bool {
	for {
		l := st.lease.Load()
		if l&budgetLeaseCountMask == 0 {
			return false
		}
		if st.lease.CompareAndSwap(l, l-1) {
			return true
		}
	}
}

// leaseSize returns how many retries a lease taken now would hold: half the
// room left in the bucket, so that other stripes find some too, at most
// budgetLeaseMax, and no more than cur's retry count can hold. w is cur,
// requests and retries the counts of the window with it.
func (b *RetryBudget) leaseSize(w uint64, requests, retries int64) int64 {
	room := b.ratio*float64(requests) + b.floor - float64(retries)
	if !(room >= 2*budgetLeaseMin) {
		return 0
	}
	n := int64(budgetLeaseMax)
	if room < 2*budgetLeaseMax {
		n = int64(room / 2)
	}
	n = min(n, int64(budgetCountMax-w&budgetCountMax))
	// room is rounded; fits decides.
	for n > 0 && !b.fits(requests, retries+n) {
		n--
	}
	return n
}

// decideLocked decides a retry for a goroutine of stripe st, with mu held
// and the window at or after the decision's bucket: from st's lease if
// another goroutine of st has just taken one, else from cur, taking a new
// lease when there is room for one; when the retry does not fit and leases
// are out, it takes them back and decides again. It reports whether the
// retry is allowed.
func (b *RetryBudget) decideLocked(st *budgetStripe) bool {
	if st.grant() {
		return true
	}
	// The window cannot move while mu is held.
	gen := b.seq.Load() >> 1
	olderRequests, olderRetries := b.olderRequests.Load(), b.olderRetries.Load()
	for {
		w := b.cur.Load()
		requests := olderRequests + int64(w>>budgetCountBits&budgetCountMax)
		retries := olderRetries + int64(w&budgetCountMax)
		if w&budgetCountMax == budgetCountMax || !b.fits(requests, retries+1) {
			if w&budgetLeased == 0 {
				return false
			}
			b.takeBackLeasesLocked()
			continue
		}
		n := b.leaseSize(w, requests, retries)
		if n < budgetLeaseMin {
			if b.cur.CompareAndSwap(w, w+1) {
				return true
			}
			continue
		}
		if b.cur.CompareAndSwap(w, (w+uint64(n))|budgetLeased) {
			// st's lease is empty, and only goroutines holding mu fill it.
			st.lease.Store(gen<<32 | uint64(n-1))
			return true
		}
	}
}

// takeBackLeasesLocked empties every stripe's lease and removes what was left
// of them from cur's retries, so that cur counts the retries allowed and no
// more. mu must be held.
func (b *RetryBudget) takeBackLeasesLocked() {
	if b.cur.Load()&budgetLeased == 0 {
		return
	}
	var unused uint64
	for i := range b.stripes {
		st := &b.stripes[i]
		for {
			l := st.lease.Load()
			if l&budgetLeaseCountMask == 0 {
				break
			}
			if st.lease.CompareAndSwap(l, l&^budgetLeaseCountMask) {
				unused += l & budgetLeaseCountMask
				break
			}
		}
	}
	// No lease can be taken while mu is held: every stripe stays empty.
	for {
		w := b.cur.Load()
		if b.cur.CompareAndSwap(w, (w-unused)&^budgetLeased) {
			return
		}
	}
}

// endLeases ends every lease when the window moves to generation gen, with
// mu held and seq odd, and returns how many retries were left in them: the
// closing bucket's retries are cur's minus those.
func (b *RetryBudget) endLeases(gen uint64) int64 {
	var unused int64
	for i := range b.stripes {
		unused += int64(b.stripes[i].lease.Swap(gen<<32) & budgetLeaseCountMask)
	}
	return unused
}

// window returns the budget's window, as its buckets cover it.
func (b *RetryBudget) window() time.Duration {
	return time.Duration(b.requestBuckets) * b.width
}

// budgetGate is how Retry, OnError and the queues spend from a RetryBudget:
// a first attempt counts as a request, and each later one is a retry that
// the budget must allow. The zero gate has no budget and admits everything.
//
// A caller that reads the budget's own clock anyway (Retry, with
// WithMaxElapsedTime) passes the time elapsed since its start, and the
// budget decides at that reading instead of reading its clock again; the
// other callers pass 0, which the gate then ignores.
type budgetGate struct {
	budget *RetryBudget  // nil: none
	shared bool          // the caller reads the budget's clock
	offset time.Duration // when shared: the caller's start, on the budget's clock
}

// newBudgetGate returns the gate of b (nil: none) for a caller that reads
// clk, if read, and read start there when it started.
func newBudgetGate(b *RetryBudget, clk clock.PassiveClock, start time.Time, read bool) budgetGate {
	g := budgetGate{budget: b}
	if b != nil && read && sameClock(b.clk, clk) {
		g.shared, g.offset = true, start.Sub(b.origin)
	}
	return g
}

// at returns the time of a decision, after the budget's origin: the
// caller's reading when it is on the budget's clock, or a new reading.
func (g *budgetGate) at(elapsed time.Duration) time.Duration {
	if g.shared {
		return g.budget.after(g.offset, elapsed)
	}
	return g.budget.sinceOrigin()
}

// request counts a first attempt.
func (g *budgetGate) request(elapsed time.Duration) {
	if g.budget != nil {
		g.budget.recordRequestAt(g.at(elapsed))
	}
}

// retry reports whether a retry may go ahead, and counts it if so.
func (g *budgetGate) retry(elapsed time.Duration) bool {
	return g.budget == nil || g.budget.tryRetryAt(g.at(elapsed))
}

// refused is the error of a retry loop that the budget stopped after the
// given number of attempts, the last of which failed with last.
func refused(attempts int, last error) *RetryError {
	return &RetryError{Attempts: attempts, Last: last, Reason: ErrRetryBudgetExhausted}
}

// requeueDelay returns how long a queue's retry that limiter delayed by
// limiterDelay waits, and whether the budget refused it: limiterDelay if the
// budget allows the retry now;
// otherwise the time until it would allow one, plus a random spread of up to
// one window so that items refused together come back apart, and at least
// limiterDelay, but no more than the limiter's cap when it states one (see
// [RateLimitingQueue.AddRateLimited] and packageLimiter).
func (g *budgetGate) requeueDelay(limiter any, limiterDelay time.Duration) (time.Duration, bool) {
	if g.retry(0) {
		return limiterDelay, false
	}
	b := g.budget
	wait, ok := b.retryAllowedIn()
	if !ok {
		// Only new requests can make room: try again a window later.
		wait = b.window()
	}
	wait = addDuration(wait, randDuration(b.window()))
	if l, ok := limiter.(packageLimiter); ok {
		if ceiling, ok := l.requeueCap(); ok {
			wait = min(wait, ceiling)
		}
	}
	return max(wait, limiterDelay), true
}
