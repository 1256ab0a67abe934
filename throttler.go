package backoff

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// ErrThrottled is the error for a call that a [Throttler] rejected locally:
// it was not sent, because the downstream has been refusing most of what it
// was sent.
var ErrThrottled = errors.New("backoff: throttled locally")

// Throttler is client-side throttling as the Google SRE book describes it
// (chapter "Handling Overload"): a client that sees its downstream refuse
// most requests stops sending most of them, instead of spending both sides'
// work on requests bound to be refused.
//
// Ask [Throttler.Allow] before each request, and for every request sent,
// report with [Throttler.Record] whether the downstream accepted it. Allow
// rejects with probability
//
//	max(0, (requests − k·accepts) / (requests + 1))
//
// where, over the last window, requests counts the earlier calls of Allow
// (rejected ones included) and accepts the calls of Record(true). While the
// downstream accepts more than 1/k of what it is sent, nothing is rejected;
// when it accepts less, the requests that reach it settle near k times the
// accepts, plus about one per window, and a downstream that recovers gets
// all the traffic back within a few windows/k. k = 2 is the book's advice:
// a larger k lets more requests through in an outage, and rejects later.
//
// The window is kept as 10 buckets of window/10, so that a count leaves it
// up to a tenth of the window late; its memory is constant. Random draws
// come from a generator of the throttler's own, seeded from the clock's time
// at construction, so that a FakeClock makes its decisions repeatable.
//
// A Throttler is safe for concurrent use by multiple goroutines; Allow and
// Record take no lock and allocate nothing (see the fields for how). Its
// zero value is not usable (its methods panic): use [NewThrottler].
type Throttler struct {
	k     float64
	clock clock.PassiveClock
	epoch time.Time
	width time.Duration // of a bucket

	// The counts of the bucket being filled live in two atomics, and the
	// sums of the window's other buckets in two more, so that a decision is
	// a clock read, one atomic add and a few loads, and a Record one atomic
	// add. Only the move to a new bucket takes mu: it folds the current
	// counts into the ring and publishes the new sums, then head. A call
	// racing with the move may count in the new bucket or read the sums a
	// bucket late: the window's precision is a bucket anyway.
	head        atomic.Int64 // the current bucket's number, counted from epoch
	nextAt      atomic.Int64 // the instant the next bucket starts: (head+1)·width
	curRequests atomic.Uint64
	curAccepts  atomic.Uint64
	oldRequests atomic.Uint64 // over the window's other buckets
	oldAccepts  atomic.Uint64
	rand        atomic.Uint64 // splitmix64's counter
	rejected    atomic.Uint64 // calls of Allow that returned false, ever

	mu   sync.Mutex
	ring [throttlerBuckets]throttlerBucket // guarded by mu; the current bucket's slot is unused
}

type throttlerBucket struct{ requests, accepts uint64 }

// throttlerBuckets is how many buckets a window is cut into.
const throttlerBuckets = 10

// NewThrottler returns a [Throttler] with multiplier k over a sliding window
// of the given length. It reads the time through the clock of [WithClock]
// (the real clock by default) and ignores the other options. A k below 1 or
// NaN or infinite, and a window shorter than 10 ns, panic, by the package's
// bad-input rule.
func NewThrottler(k float64, window time.Duration, opts ...Option) *Throttler {
	if math.IsNaN(k) || math.IsInf(k, 0) || k < 1 {
		badArgument("NewThrottler", "k must be a finite number ≥ 1", k)
	}
	mustBePositive("NewThrottler", "window", window)
	if window < throttlerBuckets {
		badArgument("NewThrottler", "window must be at least 10ns", window)
	}
	c := newConfig(opts)
	t := &Throttler{k: k, clock: c.clock, epoch: c.clock.Now(), width: window / throttlerBuckets}
	t.rand.Store(uint64(t.epoch.UnixNano()))
	t.nextAt.Store(int64(t.width))
	return t
}

// Allow reports whether a request may be sent now, rejecting it with the
// probability above; a rejected caller should fail with [ErrThrottled].
// Either way the call counts as a request. It never blocks.
func (t *Throttler) Allow() bool {
	if now := max(t.clock.Since(t.epoch), 0); int64(now) >= t.nextAt.Load() {
		t.advance(int64(now / t.width))
	}
	requests := float64(t.oldRequests.Load() + t.curRequests.Add(1) - 1)
	accepts := float64(t.oldAccepts.Load() + t.curAccepts.Load())
	// Rejected with probability excess/(requests+1): no division unless a
	// draw is needed.
	if excess := requests - t.k*accepts; excess <= 0 || t.draw()*(requests+1) >= excess {
		return true
	}
	t.rejected.Add(1)
	return false
}

// Rejected returns the number of calls of Allow that returned false since
// the Throttler was created: the requests rejected locally, for metrics.
func (t *Throttler) Rejected() uint64 { return t.rejected.Load() }

// Record reports whether the downstream accepted a request that Allow let
// through. Only acceptances are counted: a refusal is already a request.
// Record does not read the clock: an acceptance is counted in the bucket of
// the latest Allow, which is where its request was counted (the window's
// precision is a bucket anyway), and it halves the cost of a decision.
func (t *Throttler) Record(accepted bool) {
	if accepted {
		t.curAccepts.Add(1)
	}
}

// advance moves the window to bucket head, dropping the buckets that leave
// it. A clock that steps back leaves the window where it is.
func (t *Throttler) advance(head int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := t.head.Load()
	if head <= from {
		return // moved by a concurrent call
	}
	t.ring[from%throttlerBuckets] = throttlerBucket{t.curRequests.Swap(0), t.curAccepts.Swap(0)}
	if head-from >= throttlerBuckets {
		t.ring = [throttlerBuckets]throttlerBucket{}
	} else {
		for b := from + 1; b <= head; b++ {
			t.ring[b%throttlerBuckets] = throttlerBucket{}
		}
	}
	var old throttlerBucket
	for _, b := range t.ring {
		old.requests += b.requests
		old.accepts += b.accepts
	}
	t.oldRequests.Store(old.requests)
	t.oldAccepts.Store(old.accepts)
	t.head.Store(head)
	t.nextAt.Store((head + 1) * int64(t.width))
}

// draw returns a uniform number in [0, 1) (splitmix64).
func (t *Throttler) draw() float64 {
	z := t.rand.Add(0x9e3779b97f4a7c15)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}
