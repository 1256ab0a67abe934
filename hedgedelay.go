package backoff

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// HedgeDelay learns how long [Retry] waits for an attempt before it hedges:
// a quantile of the latencies of recent attempts, such as their 95th
// percentile, the delay of The Tail at Scale (Dean and Barroso, 2013). Pass
// it to Retry with [WithHedgeDelay]; Retry then reports the latency of each
// of its attempts to it. One HedgeDelay is meant to be shared by every call
// to one downstream, so that each call hedges after what the others saw.
//
// # How it is kept
//
// It keeps a histogram of latencies in fixed buckets, eight per doubling
// (each about 9% wide) from 1µs to about 137 s, with one bucket for
// anything shorter and one for anything longer. Every 1024 latencies it
// halves every bucket, so that the latest 1024 weigh fully and older ones
// half as much per 1024 since: after a change of the downstream, the
// quantile follows within a few thousand attempts. Every 16 latencies
// it recomputes the quantile, interpolated within its bucket, so that
// [HedgeDelay.Delay] is one atomic load. [HedgeDelay.Observe] is a few
// atomic additions, with no lock and no allocation; its memory is fixed,
// about 1 KiB.
//
// A HedgeDelay is safe for concurrent use. Its zero value is not usable:
// make one with [NewHedgeDelay].
type HedgeDelay struct {
	quantile       float64
	floor, ceiling time.Duration
	seen           atomic.Uint64 // latencies observed, ever
	learned        atomic.Int64  // the quantile last computed, in ns; 0 before hedgeDelayMinSamples
	counts         [hedgeBuckets]atomic.Uint32
}

const (
	// hedgeDelayMinSamples is how many latencies a HedgeDelay needs before
	// it offers a delay: fewer say little about a tail.
	hedgeDelayMinSamples = 20
	// hedgeDelayRecompute is how often, in latencies, the quantile is
	// recomputed from the histogram (a power of two).
	hedgeDelayRecompute = 16
	// hedgeDelayUnit is what one latency adds to its bucket: counts are
	// fixed-point, so that halving a bucket of one latency leaves half of
	// it rather than nothing, which would wear the tail away. A bucket holds
	// at most about 2·hedgeDelayHalving latencies, far below overflow.
	hedgeDelayUnit = 256
	// hedgeDelayHalving is how often, in latencies, every count is halved:
	// a multiple of hedgeDelayRecompute, so that the quantile is recomputed
	// right after each halving.
	hedgeDelayHalving = 1024

	hedgeMinExp  = 10                                          // the first octave starts at 2^10 ns (about 1µs)
	hedgeMaxExp  = 37                                          // the last ends at 2^37 ns (about 137 s)
	hedgeSubBits = 3                                           // 8 buckets per octave
	hedgeBuckets = (hedgeMaxExp-hedgeMinExp)<<hedgeSubBits + 2 // plus one below, one above
)

// NewHedgeDelay returns a HedgeDelay that learns the given quantile of
// attempt latencies (0.95 for the 95th percentile) and offers it clamped to
// [floor, ceiling]. The floor keeps a fast downstream from being hedged
// after a few microseconds, where the extra attempt would cost more than it
// saves; the ceiling bounds how long a call waits before it hedges, however
// slow the downstream has become. Until it has seen 20 latencies it offers
// no delay, and Retry hedges after [WithHedge]'s.
//
// It panics if quantile is not inside (0, 1) (NaN included), if floor is not
// positive, or if ceiling is below floor.
func NewHedgeDelay(quantile float64, floor, ceiling time.Duration) *HedgeDelay {
	if !(quantile > 0 && quantile < 1) {
		badArgument("NewHedgeDelay", "quantile must be inside (0, 1)", quantile)
	}
	mustBePositive("NewHedgeDelay", "floor", floor)
	if ceiling < floor {
		badArgument("NewHedgeDelay", "ceiling must be at least floor", ceiling)
	}
	return &HedgeDelay{quantile: quantile, floor: floor, ceiling: ceiling}
}

// Observe records the latency of one attempt. Retry calls it for every
// attempt when given [WithHedgeDelay]; call it yourself to feed latencies
// measured elsewhere. A negative latency counts as 0. It does not allocate
// and never blocks.
func (h *HedgeDelay) Observe(latency time.Duration) {
	h.counts[hedgeBucket(latency)].Add(hedgeDelayUnit)
	n := h.seen.Add(1)
	// Exactly one observer sees each multiple, so halving and recomputing
	// are never run twice for one step. A count added while the halving
	// runs is halved or not; either is within the estimate's precision.
	if n%hedgeDelayHalving == 0 {
		for i := range h.counts {
			c := &h.counts[i]
			for {
				v := c.Load()
				if v == 0 || c.CompareAndSwap(v, v/2) {
					break
				}
			}
		}
	}
	if n >= hedgeDelayMinSamples && (n%hedgeDelayRecompute == 0 || n == hedgeDelayMinSamples) {
		h.learned.Store(int64(max(h.compute(), 1)))
	}
}

// Delay returns the learned delay, clamped to the floor and ceiling given to
// [NewHedgeDelay], and true; or the ceiling and false while fewer than 20
// latencies have been observed.
func (h *HedgeDelay) Delay() (time.Duration, bool) {
	d := time.Duration(h.learned.Load())
	if d == 0 {
		return h.ceiling, false
	}
	return min(max(d, h.floor), h.ceiling), true
}

// compute returns the quantile of the histogram, interpolated linearly
// within the bucket where it falls. It is O(buckets).
func (h *HedgeDelay) compute() time.Duration {
	var counts [hedgeBuckets]uint32
	total := 0.0
	for i := range h.counts {
		counts[i] = h.counts[i].Load()
		total += float64(counts[i])
	}
	target := h.quantile * total
	cum := 0.0
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= target {
			lo, hi := hedgeBucketBounds(i)
			return lo + time.Duration(float64(hi-lo)*(target-cum)/float64(c))
		}
		cum += float64(c)
	}
	lo, _ := hedgeBucketBounds(hedgeBuckets - 1)
	return lo
}

// hedgeBucket returns the bucket of a latency: 0 below 2^hedgeMinExp ns,
// the last at or above 2^hedgeMaxExp ns, and in between 8 per octave,
// chosen by the three bits that follow the leading one.
func hedgeBucket(d time.Duration) int {
	if d < 1<<hedgeMinExp {
		return 0
	}
	if d >= 1<<hedgeMaxExp {
		return hedgeBuckets - 1
	}
	e := bits.Len64(uint64(d)) - 1
	sub := int(uint64(d)>>(e-hedgeSubBits)) & (1<<hedgeSubBits - 1)
	return 1 + (e-hedgeMinExp)<<hedgeSubBits + sub
}

// hedgeBucketBounds returns the latencies that bucket i holds: [lo, hi).
func hedgeBucketBounds(i int) (lo, hi time.Duration) {
	switch {
	case i == 0:
		return 0, 1 << hedgeMinExp
	case i == hedgeBuckets-1:
		return 1 << hedgeMaxExp, math.MaxInt64
	}
	e := (i-1)>>hedgeSubBits + hedgeMinExp
	sub := time.Duration((i - 1) & (1<<hedgeSubBits - 1))
	unit := time.Duration(1) << (e - hedgeSubBits)
	return (1<<hedgeSubBits + sub) * unit, (1<<hedgeSubBits + sub + 1) * unit
}
