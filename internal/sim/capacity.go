package sim

import (
	"math"
	"math/rand/v2"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// CapacityDrop is the capacity-drop scenario: a server with Workers workers
// and lognormal service times, whose workers fall to half at DropAt and
// come back at RestoreAt (never, if 0), with Poisson arrivals at Overload
// times the reduced capacity. An [Admitter] admits each arrival or sheds
// it; an admitted request queues at the server until a worker is free.
type CapacityDrop struct {
	Seed              uint64
	Workers           int
	Median            time.Duration // of the service time
	Sigma             float64       // of the service time's logarithm
	Overload          float64
	DropAt, RestoreAt time.Duration
	End               time.Duration
}

// DefaultCapacityDrop is the scenario whose targets the tests check: 12
// workers, a median service time of 100 ms, capacity halved from 60 s to
// 180 s, arrivals at 1.5 times the reduced capacity.
var DefaultCapacityDrop = CapacityDrop{
	Seed: 1, Workers: 12, Median: 100 * time.Millisecond, Sigma: 0.5, Overload: 1.5,
	DropAt: 60 * time.Second, RestoreAt: 180 * time.Second, End: 240 * time.Second,
}

// Sustained returns s with the capacity never restored, for 10 minutes of
// overload.
func (s CapacityDrop) Sustained() CapacityDrop {
	s.RestoreAt, s.End = 0, s.DropAt+10*time.Minute+time.Second
	return s
}

// MeanService is the mean of the lognormal service time.
func (s CapacityDrop) MeanService() time.Duration {
	return time.Duration(float64(s.Median) * math.Exp(s.Sigma*s.Sigma/2))
}

// Capacity returns the requests per second that workers serve.
func (s CapacityDrop) Capacity(workers int) float64 {
	return float64(workers) / s.MeanService().Seconds()
}

// NoLoadP99 is the p99 latency of a request that does not queue: the p99 of
// the service time.
func (s CapacityDrop) NoLoadP99() time.Duration {
	return time.Duration(float64(s.Median) * math.Exp(s.Sigma*2.3263))
}

// An Admitter stands in front of the server: Admit takes a permit for
// request id or refuses it (the request is shed), Complete ends the permit
// of request id, served with the given latency, and Limit is sampled every
// [LimitEvery].
type Admitter interface {
	Admit(id int) bool
	Complete(id int, latency time.Duration)
	Limit() int
}

// LimitEvery is how often a run samples the Admitter's limit.
const LimitEvery = 100 * time.Millisecond

// CapacityRun is what a run of the scenario observed.
type CapacityRun struct {
	// Completions[s], Offered[s] and Shed[s] count the requests served,
	// arrived and shed in second s; Limits[i] is the limit at i·LimitEvery.
	Completions, Offered, Shed []int
	Limits                     []int
	Admitted                   []Admission // in order of completion
}

// Admission is a served request: when it was admitted, and its latency
// from then to its completion.
type Admission struct{ At, Latency time.Duration }

// The events of the capacity-drop scenario.
const (
	evArrival    = iota
	evCompletion // id: the request
	evCapacity   // id: the number of workers from now on
	evSample
)

// Run simulates s with a in front of the server, setting clk to each
// event's instant in turn (its time at the call is the simulation's
// start), so that an Admitter that reads clk sees the simulated time.
func (s CapacityDrop) Run(clk *testingclock.FakeClock, a Admitter) CapacityRun {
	start := clk.Now()
	rng := rand.New(rand.NewPCG(s.Seed, 0x5ca1ab1e))
	mu := math.Log(float64(s.Median))
	service := func() time.Duration { return time.Duration(math.Exp(mu + s.Sigma*rng.NormFloat64())) }
	interArrival := time.Duration(float64(time.Second) / (s.Overload * s.Capacity(s.Workers/2)))

	seconds := int(s.End/time.Second) + 1
	out := CapacityRun{Completions: make([]int, seconds), Offered: make([]int, seconds), Shed: make([]int, seconds)}
	var arrived []time.Duration // of each admitted request, by id
	var waiting []int           // requests queued at the server, first come first
	workers, busy := s.Workers, 0
	var q Agenda
	serveWaiting := func(now time.Duration) {
		for busy < workers && len(waiting) > 0 {
			busy++
			q.Schedule(now+service(), evCompletion, waiting[0])
			waiting = waiting[1:]
		}
	}
	q.Schedule(Exponential(rng, interArrival), evArrival, 0)
	q.Schedule(s.DropAt, evCapacity, s.Workers/2)
	if s.RestoreAt > 0 {
		q.Schedule(s.RestoreAt, evCapacity, s.Workers)
	}
	q.Schedule(0, evSample, 0)
	for q.Len() > 0 {
		e := q.Next()
		if e.At > s.End {
			break
		}
		clk.SetTime(start.Add(e.At))
		sec := e.At / time.Second
		switch e.Kind {
		case evArrival:
			out.Offered[sec]++
			q.Schedule(e.At+Exponential(rng, interArrival), evArrival, 0)
			if !a.Admit(len(arrived)) {
				out.Shed[sec]++
				continue
			}
			waiting = append(waiting, len(arrived))
			arrived = append(arrived, e.At)
			serveWaiting(e.At)
		case evCompletion:
			busy--
			latency := e.At - arrived[e.ID]
			a.Complete(e.ID, latency)
			out.Completions[sec]++
			out.Admitted = append(out.Admitted, Admission{arrived[e.ID], latency})
			serveWaiting(e.At)
		case evCapacity:
			workers = e.ID
			serveWaiting(e.At)
		case evSample:
			out.Limits = append(out.Limits, a.Limit())
			q.Schedule(e.At+LimitEvery, evSample, 0)
		}
	}
	return out
}

// Goodput returns the requests served per second in [from, to).
func (r CapacityRun) Goodput(from, to time.Duration) float64 {
	return PerSecond(r.Completions, from, to)
}

// Latency returns the p-th percentile latency of the requests admitted in
// [from, to).
func (r CapacityRun) Latency(p float64, from, to time.Duration) time.Duration {
	var ds []time.Duration
	for _, a := range r.Admitted {
		if a.At >= from && a.At < to {
			ds = append(ds, a.Latency)
		}
	}
	return Percentile(ds, p)
}

// MeanLimit returns the mean of the limit's samples in [from, to).
func (r CapacityRun) MeanLimit(from, to time.Duration) float64 {
	total, n := 0, 0
	for i := from / LimitEvery; i < to/LimitEvery && int(i) < len(r.Limits); i++ {
		total += r.Limits[i]
		n++
	}
	return float64(total) / float64(n)
}

// LimitAt returns the limit sampled at t.
func (r CapacityRun) LimitAt(t time.Duration) int { return r.Limits[t/LimitEvery] }
