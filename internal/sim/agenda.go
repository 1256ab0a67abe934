// Package sim holds what the adaptive pacers' discrete-event simulations
// share: an agenda of events on virtual time, the distributions and
// statistics they draw and report, and the capacity-drop scenario, which
// both the library's own scenario tests and examples/adaptive run; and the
// call model (retries, hedges, a retry budget and a circuit breaker, as
// Retry uses them) with the four scenarios that examples/breaker runs. A
// simulation sets a FakeClock to each event's instant in turn and calls the
// types under test directly, so that minutes of traffic take milliseconds
// and a seed always gives the same figures.
package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Event is something that happens at an instant of a simulation: Kind says
// what, ID to whom.
type Event struct {
	At   time.Duration // since the simulation's start
	Kind int
	ID   int
	seq  int // scheduling order, to run the events of one instant in that order
}

// Agenda is a simulation's future: its events by instant, and those of one
// instant in the order they were scheduled. Schedule and Next are O(log n)
// and allocate nothing once the agenda has grown: a binary heap of Events
// written for the type, since container/heap boxes every event pushed and
// popped, which dominates a long simulation under the race detector.
// Its zero value is empty and ready to use.
type Agenda struct {
	events []Event
	seq    int // the next event's place in scheduling order
}

// Schedule adds an event of kind for id at instant at.
func (a *Agenda) Schedule(at time.Duration, kind, id int) {
	a.events = append(a.events, Event{At: at, Kind: kind, ID: id, seq: a.seq})
	a.seq++
	// Sift up: move the new event above its parents while it comes first.
	i := len(a.events) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !a.before(i, parent) {
			break
		}
		a.events[i], a.events[parent] = a.events[parent], a.events[i]
		i = parent
	}
}

// Next removes and returns the earliest event. It panics if the agenda is
// empty.
func (a *Agenda) Next() Event {
	first := a.events[0]
	last := len(a.events) - 1
	a.events[0] = a.events[last]
	a.events = a.events[:last]
	// Sift down: move the event put at the top below its earlier child.
	i := 0
	for {
		child := 2*i + 1
		if child >= last {
			break
		}
		if right := child + 1; right < last && a.before(right, child) {
			child = right
		}
		if !a.before(child, i) {
			break
		}
		a.events[i], a.events[child] = a.events[child], a.events[i]
		i = child
	}
	return first
}

// Len returns the number of events to come.
func (a *Agenda) Len() int { return len(a.events) }

// before reports whether event i comes before event j.
func (a *Agenda) before(i, j int) bool {
	x, y := a.events[i], a.events[j]
	return x.At < y.At || x.At == y.At && x.seq < y.seq
}

// Exponential returns an exponentially distributed duration of the given
// mean: the gap between two arrivals of a Poisson process.
func Exponential(rng *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(rng.ExpFloat64() * float64(mean))
}

// Percentile returns the p-th percentile (0 < p < 1) of ds, which it sorts,
// and 0 for no ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(math.Ceil(p*float64(len(ds))))-1, len(ds)-1)]
}

// Sum returns the sum of counts[s] for the seconds s in [from, to).
func Sum(counts []int, from, to time.Duration) int {
	n := 0
	for s := from / time.Second; s < to/time.Second && int(s) < len(counts); s++ {
		n += counts[s]
	}
	return n
}

// PerSecond returns Sum(counts, from, to) divided by the length of [from,
// to) in seconds.
func PerSecond(counts []int, from, to time.Duration) float64 {
	return float64(Sum(counts, from, to)) / (to - from).Seconds()
}

// Count adds one to (*counts)[i], growing the slice as needed.
func Count(counts *[]int, i int) {
	for len(*counts) <= i {
		*counts = append(*counts, 0)
	}
	(*counts)[i]++
}
