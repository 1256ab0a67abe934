package backoff

import (
	"sync"
	"sync/atomic"
	"time"
)

// breakerBuckets is how many past buckets a breaker's window keeps besides
// the one being filled: an outcome leaves the window between one and
// 1 + 1/breakerBuckets windows after it was counted.
const breakerBuckets = 10

// breakerWindow counts the successes and failures of a rolling window, as
// a ring of past buckets plus the bucket being filled, on a time measured
// from the breaker's epoch. A fixed window would forget every outcome at
// once at its end, so that a burst of failures across the boundary is never
// seen whole (sony/gobreaker#21); the ring forgets a tenth at a time.
//
// Counting is lock-free: the current bucket's two counts are atomics, and
// so are the sums of the past buckets, which change only when the window
// moves to a new bucket, under mu. An outcome that races with the move may
// be counted in the new bucket: the window's precision is a bucket anyway.
type breakerWindow struct {
	width time.Duration // of a bucket, > 0

	nextAt     atomic.Int64 // when the current bucket ends, in ns since the epoch
	head       atomic.Int64 // the current bucket's number
	pastOK     atomic.Uint64
	pastFailed atomic.Uint64
	_          [64]byte // keeps the counts, written by every outcome, off the line above
	curOK      atomic.Uint64
	_          [56]byte
	curFailed  atomic.Uint64
	_          [56]byte

	mu   sync.Mutex
	ring [breakerBuckets]breakerBucket // guarded by mu; bucket k at k % breakerBuckets
}

type breakerBucket struct{ ok, failed uint64 }

// newBreakerWindow returns a window of the given length, ≥ breakerBuckets ns.
func newBreakerWindow(window time.Duration) *breakerWindow {
	w := &breakerWindow{width: window / breakerBuckets}
	w.nextAt.Store(int64(w.width))
	return w
}

// succeeded counts a success at now.
func (w *breakerWindow) succeeded(now time.Duration) {
	w.moveTo(now)
	w.curOK.Add(1)
}

// failed counts a failure at now and returns the counts of the window,
// this failure included.
func (w *breakerWindow) failed(now time.Duration) (ok, failed uint64) {
	w.moveTo(now)
	failed = w.curFailed.Add(1) + w.pastFailed.Load()
	return w.curOK.Load() + w.pastOK.Load(), failed
}

// moveTo moves the window to the bucket of now if it has passed the
// current one. A clock that steps back leaves the window where it is.
func (w *breakerWindow) moveTo(now time.Duration) {
	if int64(now) < w.nextAt.Load() {
		return
	}
	head := int64(now / w.width)
	w.mu.Lock()
	defer w.mu.Unlock()
	from := w.head.Load()
	if head <= from {
		return // moved by a concurrent call
	}
	// The bucket being filled becomes a past one; the buckets that the jump
	// skipped, and those that fall out of the ring, are emptied.
	w.ring[from%breakerBuckets] = breakerBucket{w.curOK.Swap(0), w.curFailed.Swap(0)}
	if head-from > breakerBuckets {
		w.ring = [breakerBuckets]breakerBucket{}
	} else {
		for k := from + 1; k < head; k++ {
			w.ring[k%breakerBuckets] = breakerBucket{}
		}
	}
	var ok, failed uint64
	for _, b := range w.ring {
		ok += b.ok
		failed += b.failed
	}
	w.pastOK.Store(ok)
	w.pastFailed.Store(failed)
	w.head.Store(head)
	w.nextAt.Store((head + 1) * int64(w.width))
}

// reset forgets every outcome.
func (w *breakerWindow) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ring = [breakerBuckets]breakerBucket{}
	w.pastOK.Store(0)
	w.pastFailed.Store(0)
	w.curOK.Store(0)
	w.curFailed.Store(0)
}
