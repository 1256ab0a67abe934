package backoff

import "time"

// grantsOne reports whether take(now, 1, limit, burst, 0) would take the
// token: the same operations as take, in the same order, without the write.
// The caller has checked 1 ≤ burst and limit < InfLimit.
func (s *bucketState) grantsOne(now time.Duration, limit float64, burst int) bool {
	tokens := s.tokensAt(now, limit, burst) - 1
	return !(tokens < 0) || durationFromTokens(limit, -tokens) <= 0
}

// firstGrantOfOne returns the earliest instant at which the bucket, as it
// is, would grant a request for one token that cannot wait (AllowN(1)): take
// refuses every such request at an instant before it. It returns 0 when the
// bucket grants at every instant, or has an infinite limit, and maxDuration
// when it grants at none before maxDuration.
//
// The answer is exact, not an estimate, because take's answer is monotonic
// in now for a fixed state: tokensAt earns d.Seconds()×limit with d = now −
// last, and Seconds (float64(d/1s) + float64(d%1s)/1e9), the product with
// a limit ≥ 0, the sum, the cap at burst, the subtraction of 1, the
// division by the limit and the conversion to a Duration are each
// non-decreasing (or, for the wait, non-increasing) under round-to-nearest;
// at a second boundary Seconds goes from k + 0.999999999 (rounded) to k + 1,
// never down. So the instants at which one token is granted are an interval
// [T, ∞); firstGrantOfOne finds T by evaluating take's own arithmetic
// (grantsOne) around an estimate, never by trusting the estimate.
func (s *bucketState) firstGrantOfOne(limit float64, burst int) time.Duration {
	switch {
	case limit == InfLimit:
		return 0
	case burst < 1:
		return maxDuration // take refuses n > burst whatever the tokens
	case s.grantsOne(s.last, limit, burst):
		// Granted at the latest instant already earned up to, so at every
		// later one; and an instant before it earns nothing more, so it
		// grants too.
		return 0
	case !(limit > 0):
		return maxDuration // a zero limit earns nothing: refused for good
	}
	// Not granted at last, nor (earning nothing there) at any instant
	// before it: T is after last. The estimate solves "the wait rounds down
	// to 0", i.e. tokens + earned − 1 > −limit×1ns, for the time earned in.
	lo, hi := s.last, maxDuration // invariant: lo refused; hi granted, or maxDuration
	short := 1 - min(s.tokens, float64(burst))
	if est := short/limit*float64(time.Second) - 1; est < float64(maxDuration-s.last) {
		guess := s.last + max(time.Duration(est), 1)
		if s.grantsOne(guess, limit, burst) {
			hi = guess
			// Gallop down towards lo: the estimate is usually off by a
			// nanosecond or two of rounding.
			for step := time.Duration(1); step > 0 && hi-step > lo; step *= 2 {
				if !s.grantsOne(hi-step, limit, burst) {
					lo = hi - step
					break
				}
				hi -= step
			}
		} else {
			lo = guess
			for step := time.Duration(1); step > 0 && step < maxDuration-lo; step *= 2 {
				if s.grantsOne(lo+step, limit, burst) {
					hi = lo + step
					break
				}
				lo += step
			}
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if s.grantsOne(mid, limit, burst) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
