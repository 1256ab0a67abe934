package main

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// epoch is the instant every simulation starts at. The Throttler seeds its
// random draws from its clock's time at construction, so a fixed epoch is
// what makes its decisions repeatable.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// event is something that happens at an instant of a simulation: kind says
// what, id to whom.
type event struct {
	at   time.Duration // since epoch
	seq  int           // scheduling order, to run the events of one instant in that order
	kind int
	id   int
}

// agenda is a simulation's future: its events by instant. Push and next are
// O(log n).
type agenda struct {
	events []event
	seq    int
}

func (q *agenda) Len() int { return len(q.events) }
func (q *agenda) Less(i, j int) bool {
	a, b := q.events[i], q.events[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}
func (q *agenda) Swap(i, j int) { q.events[i], q.events[j] = q.events[j], q.events[i] }
func (q *agenda) Push(x any)    { q.events = append(q.events, x.(event)) }
func (q *agenda) Pop() any {
	e := q.events[len(q.events)-1]
	q.events = q.events[:len(q.events)-1]
	return e
}

// schedule adds an event of kind for id at instant at.
func (q *agenda) schedule(at time.Duration, kind, id int) {
	q.seq++
	heap.Push(q, event{at: at, seq: q.seq, kind: kind, id: id})
}

// next removes and returns the earliest event.
func (q *agenda) next() event { return heap.Pop(q).(event) }

// exponential returns an exponentially distributed duration of the given
// mean: the gap between two arrivals of a Poisson process.
func exponential(rng *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(rng.ExpFloat64() * float64(mean))
}

// percentile returns the p-th percentile (0 < p < 1) of ds, which it sorts,
// and 0 for no ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(math.Ceil(p*float64(len(ds))))-1, len(ds)-1)]
}

// perSecond returns the sum of counts[s] for the seconds s in [from, to),
// divided by the length of that span in seconds.
func perSecond(counts []int, from, to time.Duration) float64 {
	n := 0
	for s := from / time.Second; s < to/time.Second && int(s) < len(counts); s++ {
		n += counts[s]
	}
	return float64(n) / (to - from).Seconds()
}

// sum returns the sum of counts[s] for the seconds s in [from, to).
func sum(counts []int, from, to time.Duration) int {
	n := 0
	for s := from / time.Second; s < to/time.Second && int(s) < len(counts); s++ {
		n += counts[s]
	}
	return n
}
