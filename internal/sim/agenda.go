// Package sim holds what the adaptive pacers' discrete-event simulations
// share: an agenda of events on virtual time, the distributions and
// statistics they draw and report, and the capacity-drop scenario, which
// both the library's own scenario tests and examples/adaptive run. A
// simulation sets a FakeClock to each event's instant in turn and calls the
// types under test directly, so that minutes of traffic take milliseconds
// and a seed always gives the same figures.
package sim

import (
	"container/heap"
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
// instant in the order they were scheduled. Schedule and Next are O(log n).
// Its zero value is empty and ready to use.
type Agenda struct{ events eventHeap }

// Schedule adds an event of kind for id at instant at.
func (a *Agenda) Schedule(at time.Duration, kind, id int) {
	heap.Push(&a.events, Event{At: at, Kind: kind, ID: id, seq: a.events.seq})
	a.events.seq++
}

// Next removes and returns the earliest event. It panics if the agenda is
// empty.
func (a *Agenda) Next() Event { return heap.Pop(&a.events).(Event) }

// Len returns the number of events to come.
func (a *Agenda) Len() int { return len(a.events.list) }

// eventHeap implements heap.Interface for Agenda.
type eventHeap struct {
	list []Event
	seq  int
}

func (h *eventHeap) Len() int { return len(h.list) }
func (h *eventHeap) Less(i, j int) bool {
	a, b := h.list[i], h.list[j]
	return a.At < b.At || a.At == b.At && a.seq < b.seq
}
func (h *eventHeap) Swap(i, j int) { h.list[i], h.list[j] = h.list[j], h.list[i] }
func (h *eventHeap) Push(x any)    { h.list = append(h.list, x.(Event)) }
func (h *eventHeap) Pop() any {
	e := h.list[len(h.list)-1]
	h.list = h.list[:len(h.list)-1]
	return e
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
