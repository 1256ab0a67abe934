package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// The four scenarios of a circuit breaker, hedging and a retry budget,
// which examples/breaker runs: each a Traffic and the backend it meets.

// Lognormal returns a latency of the given median whose logarithm has
// standard deviation sigma.
func Lognormal(rng *rand.Rand, median time.Duration, sigma float64) time.Duration {
	return time.Duration(float64(median) * math.Exp(sigma*rng.NormFloat64()))
}

// Stragglers is a backend that answers every attempt after a lognormal
// latency, except Share of them, which take Factor times the median:
// the stragglers of The Tail at Scale (Dean and Barroso, 2013).
type Stragglers struct {
	Seed          uint64
	Rate          float64
	Median        time.Duration
	Sigma         float64
	Share, Factor float64
	End           time.Duration
}

// DefaultStragglers: 500 calls per second for a minute, a median of
// 10 ms, 1% of attempts 20 times slower.
var DefaultStragglers = Stragglers{Seed: 1, Rate: 500, Median: 10 * time.Millisecond, Sigma: 0.25,
	Share: 0.01, Factor: 20, End: time.Minute}

// Traffic returns the calls of s.
func (s Stragglers) Traffic() Traffic {
	return Traffic{Seed: s.Seed, Rate: s.Rate, End: s.End, Backend: func(rng *rand.Rand, _ time.Duration) (time.Duration, bool) {
		d := Lognormal(rng, s.Median, s.Sigma)
		if rng.Float64() < s.Share {
			d = time.Duration(s.Factor * float64(s.Median))
		}
		return d, true
	}}
}

// Outage is a backend that fails every attempt from Down to Up, after a
// lognormal latency, and answers every attempt otherwise.
type Outage struct {
	Seed     uint64
	Rate     float64
	Median   time.Duration
	Sigma    float64
	Down, Up time.Duration
	End      time.Duration
}

// DefaultOutage: 500 calls per second, a median of 20 ms, an outage of
// 60 s from 20 s.
var DefaultOutage = Outage{Seed: 1, Rate: 500, Median: 20 * time.Millisecond, Sigma: 0.3,
	Down: 20 * time.Second, Up: 80 * time.Second, End: 100 * time.Second}

// Traffic returns the calls of s.
func (s Outage) Traffic() Traffic {
	return Traffic{Seed: s.Seed, Rate: s.Rate, End: s.End, Backend: func(rng *rand.Rand, at time.Duration) (time.Duration, bool) {
		return Lognormal(rng, s.Median, s.Sigma), at < s.Down || at >= s.Up
	}}
}

// Blip is a backend that, from From to To, lets Share of the attempts
// hang for Hang (beyond any attempt timeout), and answers every other
// attempt after a lognormal latency.
type Blip struct {
	Seed     uint64
	Rate     float64
	Median   time.Duration
	Sigma    float64
	Share    float64
	Hang     time.Duration
	From, To time.Duration
	End      time.Duration
}

// DefaultBlip: 840 calls per second, a median of 20 ms; for 10 s from
// 10 s, 0.14% of the attempts hang for 5 s.
var DefaultBlip = Blip{Seed: 1, Rate: 840, Median: 20 * time.Millisecond, Sigma: 0.3,
	Share: 0.0014, Hang: 5 * time.Second, From: 10 * time.Second, To: 20 * time.Second, End: 40 * time.Second}

// Traffic returns the calls of s.
func (s Blip) Traffic() Traffic {
	return Traffic{Seed: s.Seed, Rate: s.Rate, End: s.End, Backend: func(rng *rand.Rand, at time.Duration) (time.Duration, bool) {
		d := Lognormal(rng, s.Median, s.Sigma)
		if at >= s.From && at < s.To && rng.Float64() < s.Share {
			return s.Hang, false
		}
		return d, true
	}}
}

// Sparse is a backend that is down, failing each of the calls that come
// one every Every, after Latency.
type Sparse struct {
	Seed    uint64
	Every   time.Duration
	Latency time.Duration
	End     time.Duration
}

// DefaultSparse: a call every 19 s for 10 minutes.
var DefaultSparse = Sparse{Seed: 1, Every: 19 * time.Second, Latency: 50 * time.Millisecond, End: 10 * time.Minute}

// Traffic returns the calls of s.
func (s Sparse) Traffic() Traffic {
	return Traffic{Seed: s.Seed, Every: s.Every, End: s.End, Backend: func(*rand.Rand, time.Duration) (time.Duration, bool) {
		return s.Latency, false
	}}
}
