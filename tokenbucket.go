package backoff

import (
	"math"
	"time"
)

// The token arithmetic shared by [Limiter], [KeyedLimiter],
// [BucketRateLimiter] and the default controller limiter: one
// implementation, written to give golang.org/x/time/rate's answers to the
// nanosecond. Every float64 operation below is the one x/time/rate performs,
// in the same order, because its rounding is part of the answers it gives
// (at 3 per second the fourth token owed is 1.333333332 s away, not
// 1.333333333 s).
//
// Instants are durations since the owner's epoch (the clock's time at
// construction), never negative: an owner clamps a clock read before its
// epoch to 0. That keeps every difference of two instants within
// time.Duration.

// InfLimit is the rate that means "no limit": every request is allowed at
// once and takes no token, whatever the burst. It is x/time/rate's Inf
// (math.MaxFloat64); math.Inf(1) is accepted as a synonym and reported back
// as InfLimit.
const InfLimit = math.MaxFloat64

// bucketState is one token bucket's state: 16 bytes, so that a
// [KeyedLimiter] can hold a million of them inline in its table. Its limit
// and burst live with its owner. The zero value is an empty bucket at the
// epoch.
type bucketState struct {
	// tokens is negative while reservations wait for tokens already taken.
	tokens float64
	// last is the latest instant the bucket has earned up to. It never moves
	// back: a clock that steps back and forth earns each interval once
	// (x/time/rate moves it back with the clock and earns the interval again).
	last time.Duration
}

// tokensAt returns the tokens the bucket holds at now without changing it:
// x/time/rate's advance.
func (s *bucketState) tokensAt(now time.Duration, limit float64, burst int) float64 {
	tokens := s.tokens
	if now > s.last {
		tokens += tokensFromDuration(limit, now-s.last)
	}
	if b := float64(burst); tokens > b {
		tokens = b
	}
	return tokens
}

// take takes n tokens at now if the caller will not have to wait longer than
// maxWait for them, and returns how long it has to wait and whether it took
// them: x/time/rate's reserveN for a finite limit. A request for more than
// burst tokens is never granted.
func (s *bucketState) take(now time.Duration, n int, limit float64, burst int, maxWait time.Duration) (wait time.Duration, ok bool) {
	tokens := s.tokensAt(now, limit, burst) - float64(n)
	if tokens < 0 {
		wait = durationFromTokens(limit, -tokens)
	}
	if n > burst || wait > maxWait {
		return wait, false
	}
	s.tokens = tokens
	s.last = max(s.last, now)
	return wait, true
}

// settle brings the bucket up to now before its limit or burst changes, as
// x/time/rate's SetLimitAt and SetBurstAt do.
func (s *bucketState) settle(now time.Duration, limit float64, burst int) {
	s.tokens = s.tokensAt(now, limit, burst)
	s.last = max(s.last, now)
}

// giveBack returns the tokens of a reservation cancelled at now, by
// x/time/rate's rule: a reservation whose time has come gives nothing back,
// and one that others have queued behind gives back only what they do not
// depend on. lastEvent is the time-to-act of the latest reservation, updated
// when the cancelled reservation was the latest.
func (s *bucketState) giveBack(r *Reservation, now time.Duration, limit float64, burst int, lastEvent *time.Duration) {
	if r.tokens == 0 || r.timeToAct < now {
		return
	}
	restore := float64(r.tokens) - tokensFromDuration(r.limit, *lastEvent-r.timeToAct)
	if restore <= 0 {
		return
	}
	tokens := s.tokensAt(now, limit, burst) + restore
	if b := float64(burst); tokens > b {
		tokens = b
	}
	s.tokens = tokens
	s.last = max(s.last, now)
	if r.timeToAct == *lastEvent {
		prev := addInstant(r.timeToAct, durationFromTokens(r.limit, -float64(r.tokens)))
		if prev >= now {
			*lastEvent = prev
		}
	}
}

// tokensFromDuration is what limit earns in d (d may be negative).
func tokensFromDuration(limit float64, d time.Duration) float64 {
	if limit <= 0 {
		return 0
	}
	return d.Seconds() * limit
}

// durationFromTokens is how long limit takes to earn tokens (which may be
// negative), saturating at the extremes of time.Duration; a zero limit never
// earns, which is the largest duration.
func durationFromTokens(limit, tokens float64) time.Duration {
	if limit <= 0 {
		return maxDuration
	}
	d := (tokens / limit) * float64(time.Second)
	// float64(maxDuration) rounds up to 2^63, which does not fit: compare
	// with ≥ (x/time/rate compares with > and overflows at exactly 2^63).
	if d >= float64(maxDuration) {
		return maxDuration
	}
	if d <= math.MinInt64 {
		return math.MinInt64
	}
	return time.Duration(d)
}

// addInstant returns now+d for an instant now ≥ 0, saturating at the largest
// time.Duration.
func addInstant(now, d time.Duration) time.Duration {
	if d > 0 && now > maxDuration-d {
		return maxDuration
	}
	return now + d
}

// sanitizeLimit maps a rate given at call time into the limiter's domain:
// +Inf is InfLimit, and NaN and negative rates are 0 (no events beyond the
// burst already held), by the package's rule that values arriving at call
// time are clamped, never rejected.
func sanitizeLimit(r float64) float64 {
	switch {
	case math.IsInf(r, 1):
		return InfLimit
	case !(r > 0):
		return 0
	}
	return r
}

// checkLimiterArgs is the constructors' share of the bad-input policy: a
// negative or NaN rate and a negative burst panic. A zero rate and a zero
// burst are x/time/rate's documented values (no events beyond the initial
// burst; no events at all unless the rate is infinite), so they are allowed.
func checkLimiterArgs(where string, r float64, burst int) {
	if math.IsNaN(r) || r < 0 {
		badArgument(where, "r must not be negative or NaN", r)
	}
	if burst < 0 {
		badArgument(where, "burst must not be negative", burst)
	}
}

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

// refillAfter returns the shortest time d ≥ 1 ns after which a bucket left
// with burst−1 tokens at instant T by a grant (limiter.grantedAt's form) is
// full again: take(T+d, 1) then caps the tokens at the burst and leaves
// burst−1 tokens earned up to T+d, the same form. With take's own
// arithmetic, the condition is (burst−1) + tokensFromDuration(limit, d) ≥
// burst, non-decreasing in d (see firstGrantOfOne), so the answer is exact.
// It returns maxDuration when the form cannot be kept: a zero or infinite
// limit, a burst below 1 or above 2^52 (where burst−1 and the subtraction
// of the token are not exact), or no such d below maxDuration.
func refillAfter(limit float64, burst int) time.Duration {
	if !(limit > 0) || limit == InfLimit || burst < 1 || burst > 1<<52 {
		return maxDuration
	}
	b := float64(burst)
	full := func(d time.Duration) bool { return b-1+tokensFromDuration(limit, d) >= b }
	if !full(maxDuration - 1) {
		return maxDuration
	}
	lo, hi := time.Duration(0), maxDuration-1 // invariant: !full(lo) or lo = 0; full(hi)
	if est := float64(time.Second) / limit; est < float64(maxDuration-1) {
		guess := max(time.Duration(est), 1)
		if full(guess) {
			hi = guess
			for step := time.Duration(1); hi-step > lo; step *= 2 {
				if !full(hi - step) {
					lo = hi - step
					break
				}
				hi -= step
			}
		} else {
			lo = guess
			for step := time.Duration(1); step > 0 && step < hi-lo; step *= 2 {
				if full(lo + step) {
					hi = lo + step
					break
				}
				lo += step
			}
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if full(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
