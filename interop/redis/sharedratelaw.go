package redis

import (
	"math"
	"time"

	"github.com/retrykit/backoff"
)

// The shared estimate of a quota moves along a curve that every replica
// evaluates for itself, from a few numbers the record holds (see curve): so
// the estimate grows between round trips without any, and only a cut, which
// makes a new curve, has to travel. The constants are those of
// backoff.AdaptiveRate's law, whose doc explains them: a replica of a
// SharedRate moves, with the others, as one AdaptiveRate would alone.
const (
	sharedBeta       = 0.8   // a cut's factor
	sharedPlateau    = 0.95  // where the curve flattens, in multiples of the ceiling
	sharedCubicScale = 0.4   // the curve's scale, in multiples of the ceiling per second³
	sharedProbeScale = 0.002 // the share of the scale past the plateau
	sharedMinRate    = 0.1   // requests per second, as AdaptiveRate's floor
	// sharedDoubling is how long the slow start, before the first cut, takes
	// to double the estimate: the replicas find the quota together in a
	// second or two from any starting rate, and a cut reaches all of them
	// at once (see SharedRate), so overshooting costs a few throttled
	// requests, not one per replica.
	sharedDoubling = 250 * time.Millisecond
	// sharedHeadroom is the share a replica that wants less than an equal
	// share is given, in multiples of what it sends: room to grow before it
	// counts as wanting more.
	sharedHeadroom = 1.5
	// sharedUsedUp is the part of its rate that a replica sending as much
	// or more is taken to be held back by, whether or not its requests
	// waited: one given more than it wants sends at most 1/sharedHeadroom
	// (two thirds) of its rate, so the two cannot be confused.
	sharedUsedUp = 0.9
)

// sharedClimb is how long the curve takes from a cut back to its plateau,
// in seconds: (0.95 - 0.8) / 0.4 cubed-rooted, 0.72 s.
var sharedClimb = math.Cbrt((sharedPlateau - sharedBeta) / sharedCubicScale)

// curve is the shared estimate of the quota as a function of time: in the
// slow start, base doubling every sharedDoubling from t0; after a cut at t0
// that found the quota at base, AdaptiveRate's cubic curve around base.
type curve struct {
	gen  int64 // the cut generation: each cut makes the next
	slow bool
	t0   int64 // µs since sharedEpoch
	base float64
}

// at returns the estimate at now (µs since sharedEpoch), in requests per
// second, never below sharedMinRate and never infinite.
func (c curve) at(now int64) float64 {
	dt := max(float64(now-c.t0)/1e6, 0)
	var v float64
	if c.slow {
		v = c.base * math.Exp2(dt/sharedDoubling.Seconds())
	} else {
		t := dt - sharedClimb
		k := sharedCubicScale
		if t > 0 {
			k *= sharedProbeScale
		}
		v = c.base * (sharedPlateau + k*t*t*t)
	}
	if !(v >= sharedMinRate) {
		return sharedMinRate
	}
	return min(v, 1e9)
}

// wantsMore reports whether a replica wants more than it is given, from its
// AdaptiveRate's statistics now and at its last round trip. Its requests
// say so by waiting for their turn, or by being throttled (and then held
// for the Retry-After: what it sent says nothing of what it wants), or by
// using nearly its whole rate: a replica whose requests each take about as
// long as its turns are apart (a slow upstream, a loaded machine) calls just
// after its turn comes and never waits, yet sends all it is given; were it
// to report what it sends, a share freed by replicas leaving would reach it
// only by sharedHeadroom per round trip. Until its second round trip
// (starting) it is taken to want more: what it sent until then was measured
// from a standing start (the measured rate starts at zero, and its first
// requests open their connections), and would understate what it sends.
func wantsMore(st, last backoff.AdaptiveRateStats, starting bool) bool {
	answers := (st.Succeeded + st.Throttled) - (last.Succeeded + last.Throttled)
	return starting || st.Waiting > 0 || 2*(st.Waited-last.Waited) > answers ||
		st.Throttled > last.Throttled || st.Sent >= sharedUsedUp*st.Rate
}

// capped bounds an estimate by what the replicas want: when every one of
// them sends less than it may (no demand is infinite), the estimate never
// exceeds twice what they want together, or the curve's start (its base,
// or the plateau after a cut), so that a
// quota nobody uses does not build up an estimate nobody has tried.
func capped(est float64, c curve, demands []float64) float64 {
	total := 0.0
	for _, d := range demands {
		if math.IsInf(d, 1) {
			return est
		}
		total += d
	}
	floor := c.base // the slow start's
	if !c.slow {
		floor *= sharedPlateau // the curve's plateau: where a cut left it
	}
	return min(est, max(2*total, floor))
}

// shareOf divides est among replicas whose demands are given, max-min fair
// (water-filling): a replica that wants less than an equal share gets what
// it wants, with headroom, and the others divide the rest equally; when
// every replica wants less than its equal share, each gets what it wants
// and an equal part of what is left. It returns the share of a replica
// that wants mine. demands holds every replica's, mine included, in
// increasing order.
func shareOf(est, mine float64, demands []float64) float64 {
	if len(demands) == 0 {
		return est
	}
	left, n := est, len(demands)
	for _, d := range demands {
		if d > left/float64(n) {
			level := left / float64(n)
			if mine < level {
				return max(min(mine*sharedHeadroom, level), sharedMinRate)
			}
			return max(level, sharedMinRate)
		}
		left -= d
		n--
	}
	return max(mine+left/float64(len(demands)), sharedMinRate)
}
