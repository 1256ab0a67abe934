package backoff

import (
	"errors"
	"math"
	"sync"
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
// Record allocate nothing. Its zero value is not usable (its methods
// panic): use [NewThrottler].
type Throttler struct {
	k     float64
	clock clock.PassiveClock
	epoch time.Time
	width time.Duration // of a bucket

	mu       sync.Mutex
	head     int64 // the current bucket's number, counted from epoch
	requests float64
	accepts  float64 // sums over the buckets of the window
	buckets  [throttlerBuckets]throttlerBucket
	rand     uint64 // splitmix64 state
	rejected uint64 // calls of Allow that returned false, ever
}

type throttlerBucket struct{ requests, accepts float64 }

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
	t.rand = uint64(t.epoch.UnixNano())
	return t
}

// Allow reports whether a request may be sent now, rejecting it with the
// probability above; a rejected caller should fail with [ErrThrottled].
// Either way the call counts as a request. It never blocks.
func (t *Throttler) Allow() bool {
	now := max(t.clock.Since(t.epoch), 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advanceLocked(now)
	p := (t.requests - t.k*t.accepts) / (t.requests + 1)
	t.requests++
	t.buckets[t.head%throttlerBuckets].requests++
	if p <= 0 || t.draw() >= p {
		return true
	}
	t.rejected++
	return false
}

// Rejected returns the number of calls of Allow that returned false since
// the Throttler was created: the requests rejected locally, for metrics.
func (t *Throttler) Rejected() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rejected
}

// Record reports whether the downstream accepted a request that Allow let
// through. Only acceptances are counted: a refusal is already a request.
// Record does not read the clock: an acceptance is counted in the bucket of
// the latest Allow, which is where its request was counted (the window's
// precision is a bucket anyway), and it halves the cost of a decision.
func (t *Throttler) Record(accepted bool) {
	if !accepted {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.accepts++
	t.buckets[t.head%throttlerBuckets].accepts++
}

// advanceLocked moves the window to the bucket of now, dropping the buckets
// that leave it. A clock that steps back leaves the window where it is.
func (t *Throttler) advanceLocked(now time.Duration) {
	head := int64(now / t.width)
	if head <= t.head {
		return
	}
	if head-t.head >= throttlerBuckets {
		t.buckets = [throttlerBuckets]throttlerBucket{}
		t.requests, t.accepts = 0, 0
	} else {
		for b := t.head + 1; b <= head; b++ {
			old := &t.buckets[b%throttlerBuckets]
			t.requests -= old.requests
			t.accepts -= old.accepts
			*old = throttlerBucket{}
		}
		// Sums of small integers are exact, but guard the invariant anyway.
		t.requests, t.accepts = max(t.requests, 0), max(t.accepts, 0)
	}
	t.head = head
}

// draw returns a uniform number in [0, 1) (splitmix64).
func (t *Throttler) draw() float64 {
	t.rand += 0x9e3779b97f4a7c15
	z := t.rand
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}
