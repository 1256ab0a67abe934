package backoff

import (
	"container/heap"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// The scenarios below are discrete-event simulations on virtual time: a
// FakeClock is set to each event's instant in turn, and the types under test
// are called directly, so that minutes of traffic take milliseconds and
// every run with a seed gives the same figures. Run them with -v to print
// the figures:
//
//	go test -run 'Scenario' -v .
//
// and add -scenario-csv=DIR to write the capacity drop's time series (per
// second: capacity, offered load, goodput, limit, p99 latency) for a plot.
// The shared-quota and outage scenarios, which need nothing unexported, are
// tested with the simulator of examples/adaptive.

var scenarioCSV = flag.String("scenario-csv", "", "write the capacity-drop scenario's time series to this directory")

var scenarioEpoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// simEvent is something that happens at an instant of the simulation.
type simEvent struct {
	at   time.Duration
	seq  int // breaks ties in the order of scheduling
	kind int
	id   int
}

// simQueue is the simulation's agenda: a heap of events by instant.
type simQueue struct {
	events []simEvent
	seq    int
}

func (q *simQueue) Len() int { return len(q.events) }
func (q *simQueue) Less(i, j int) bool {
	a, b := q.events[i], q.events[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}
func (q *simQueue) Swap(i, j int) { q.events[i], q.events[j] = q.events[j], q.events[i] }
func (q *simQueue) Push(x any)    { q.events = append(q.events, x.(simEvent)) }
func (q *simQueue) Pop() any {
	e := q.events[len(q.events)-1]
	q.events = q.events[:len(q.events)-1]
	return e
}

func (q *simQueue) schedule(at time.Duration, kind, id int) {
	q.seq++
	heap.Push(q, simEvent{at: at, seq: q.seq, kind: kind, id: id})
}

func (q *simQueue) next() simEvent { return heap.Pop(q).(simEvent) }

// exponential returns an exponentially distributed duration of the given
// mean.
func exponential(rng *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(rng.ExpFloat64() * float64(mean))
}

// percentile returns the p-th percentile (0 < p < 1) of ds, which it sorts.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(math.Ceil(p*float64(len(ds))))-1, len(ds)-1)]
}

// capacityDrop describes the capacity-drop scenario: a server with workers
// workers and lognormal service times, whose workers fall to half at dropAt
// and come back at restoreAt (never, if 0), with Poisson arrivals at
// overload times the reduced capacity, admitted by an AdaptiveLimiter's
// TryAcquire (a refused request is shed).
type capacityDrop struct {
	seed              uint64
	workers           int
	median            time.Duration // of the service time
	sigma             float64       // of the service time's logarithm
	overload          float64
	dropAt, restoreAt time.Duration
	end               time.Duration
	// sampled, if set, is called with each recorded latency: a test can
	// replace the limiter's baseline with one of its own.
	sampled func(l *AdaptiveLimiter, now, latency time.Duration)
}

// capacityDropRun is what a run of the scenario observed.
type capacityDropRun struct {
	meanService time.Duration
	// completions[s] and offered[s] count the requests served and arrived in
	// second s; limit[i] is the limit at i·100 ms.
	completions, offered []int
	limits               []int
	// admitted holds each served request's admission instant and latency.
	admitted []struct{ at, latency time.Duration }
	shed     int
}

const (
	simArrival = iota
	simCompletion
	simCapacity
	simSample
)

func (s capacityDrop) run() capacityDropRun {
	rng := rand.New(rand.NewPCG(s.seed, 0x5ca1ab1e))
	clk := testingclock.NewFakeClock(scenarioEpoch)
	l := NewAdaptiveLimiter(WithClock(clk))
	mu := math.Log(float64(s.median))
	service := func() time.Duration { return time.Duration(math.Exp(mu + s.sigma*rng.NormFloat64())) }
	mean := time.Duration(float64(s.median) * math.Exp(s.sigma*s.sigma/2))
	reduced := float64(s.workers/2) / mean.Seconds() // requests per second
	interArrival := time.Duration(float64(time.Second) / (s.overload * reduced))

	out := capacityDropRun{meanService: mean}
	seconds := int(s.end/time.Second) + 1
	out.completions, out.offered = make([]int, seconds), make([]int, seconds)
	type request struct {
		arrived time.Duration
		permit  Permit
	}
	var requests []request
	var waiting []int // requests queued at the server
	workers, busy := s.workers, 0
	var q simQueue
	start := func(id int, now time.Duration) {
		busy++
		q.schedule(now+service(), simCompletion, id)
	}
	q.schedule(exponential(rng, interArrival), simArrival, 0)
	q.schedule(s.dropAt, simCapacity, s.workers/2)
	if s.restoreAt > 0 {
		q.schedule(s.restoreAt, simCapacity, s.workers)
	}
	q.schedule(0, simSample, 0)
	for q.Len() > 0 {
		e := q.next()
		if e.at > s.end {
			break
		}
		clk.SetTime(scenarioEpoch.Add(e.at))
		switch e.kind {
		case simArrival:
			out.offered[e.at/time.Second]++
			q.schedule(e.at+exponential(rng, interArrival), simArrival, 0)
			p, ok := l.TryAcquire()
			if !ok {
				out.shed++
				continue
			}
			requests = append(requests, request{arrived: e.at, permit: p})
			id := len(requests) - 1
			if busy < workers {
				start(id, e.at)
			} else {
				waiting = append(waiting, id)
			}
		case simCompletion:
			busy--
			r := &requests[e.id]
			r.permit.Record()
			if s.sampled != nil {
				s.sampled(l, e.at, e.at-r.arrived)
			}
			out.completions[e.at/time.Second]++
			out.admitted = append(out.admitted, struct{ at, latency time.Duration }{r.arrived, e.at - r.arrived})
			for busy < workers && len(waiting) > 0 {
				start(waiting[0], e.at)
				waiting = waiting[1:]
			}
		case simCapacity:
			workers = e.id
			for busy < workers && len(waiting) > 0 {
				start(waiting[0], e.at)
				waiting = waiting[1:]
			}
		case simSample:
			out.limits = append(out.limits, l.Limit())
			q.schedule(e.at+100*time.Millisecond, simSample, 0)
		}
	}
	return out
}

// goodput returns the requests served per second in [from, to).
func (r capacityDropRun) goodput(from, to time.Duration) float64 {
	n := 0
	for s := from / time.Second; s < to/time.Second; s++ {
		n += r.completions[s]
	}
	return float64(n) / (to - from).Seconds()
}

// offeredRate returns the requests arrived per second in [from, to).
func (r capacityDropRun) offeredRate(from, to time.Duration) float64 {
	n := 0
	for s := from / time.Second; s < to/time.Second; s++ {
		n += r.offered[s]
	}
	return float64(n) / (to - from).Seconds()
}

// latency returns the p-th percentile latency of the requests admitted in
// [from, to).
func (r capacityDropRun) latency(p float64, from, to time.Duration) time.Duration {
	var ds []time.Duration
	for _, a := range r.admitted {
		if a.at >= from && a.at < to {
			ds = append(ds, a.latency)
		}
	}
	return percentile(ds, p)
}

// meanLimit returns the mean limit over [from, to).
func (r capacityDropRun) meanLimit(from, to time.Duration) float64 {
	sum, n := 0, 0
	for i := from / (100 * time.Millisecond); i < to/(100*time.Millisecond) && int(i) < len(r.limits); i++ {
		sum += r.limits[i]
		n++
	}
	return float64(sum) / float64(n)
}

func (r capacityDropRun) limitAt(t time.Duration) int { return r.limits[t/(100*time.Millisecond)] }

var defaultCapacityDrop = capacityDrop{
	seed: 1, workers: 12, median: 100 * time.Millisecond, sigma: 0.5, overload: 1.5,
	dropAt: 60 * time.Second, restoreAt: 180 * time.Second, end: 240 * time.Second,
}

// noLoadP99 is the p99 latency of a request that does not queue: the p99 of
// the service time.
func (s capacityDrop) noLoadP99() time.Duration {
	return time.Duration(float64(s.median) * math.Exp(s.sigma*2.3263))
}

// writeCSV writes the run's time series, one row per second.
func (r capacityDropRun) writeCSV(t *testing.T, s capacityDrop, name string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("second,capacity_per_s,offered_per_s,goodput_per_s,limit,p99_latency_ms\n")
	for sec := range len(r.completions) - 1 {
		from, to := time.Duration(sec)*time.Second, time.Duration(sec+1)*time.Second
		workers := s.workers
		if from >= s.dropAt && (s.restoreAt == 0 || from < s.restoreAt) {
			workers /= 2
		}
		fmt.Fprintf(&b, "%d,%.1f,%d,%d,%.1f,%.1f\n", sec, float64(workers)/r.meanService.Seconds(), r.offered[sec],
			r.completions[sec], r.meanLimit(from, to), float64(r.latency(0.99, from, to))/float64(time.Millisecond))
	}
	if err := os.WriteFile(*scenarioCSV+"/"+name, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestScenarioAdaptiveLimiterCapacityDrop(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		s := defaultCapacityDrop
		s.seed = seed
		r := s.run()
		if *scenarioCSV != "" && seed == 1 {
			r.writeCSV(t, s, "capacity-drop.csv")
		}
		full := float64(s.workers) / r.meanService.Seconds()
		reduced := full / 2
		drop, restore := s.dropAt, s.restoreAt
		settled := r.goodput(drop+10*time.Second, restore)
		p99 := r.latency(0.99, drop+10*time.Second, restore)
		p99All := r.latency(0.99, drop, restore)
		offeredAfter := r.offeredRate(restore+15*time.Second, s.end)
		after := r.goodput(restore+15*time.Second, s.end)
		t.Logf("seed %d: capacity %.1f/s, reduced %.1f/s, offered %.1f/s; limit before drop %.1f, 10 s after %d, before restore %.1f, 15 s after restore %d",
			seed, full, reduced, s.overload*reduced, r.meanLimit(drop-10*time.Second, drop),
			r.limitAt(drop+10*time.Second), r.meanLimit(restore-10*time.Second, restore), r.limitAt(restore+15*time.Second))
		t.Logf("seed %d: goodput from drop+10 s to restore %.1f/s = %.1f%% of capacity (target ≥ 95%%)", seed, settled, 100*settled/reduced)
		t.Logf("seed %d: p99 latency of admitted, drop+10 s to restore %v (from the drop %v) = %.2f× no-load p99 %v (target ≤ 2×)",
			seed, p99.Round(time.Millisecond), p99All.Round(time.Millisecond), float64(p99)/float64(s.noLoadP99()), s.noLoadP99().Round(time.Millisecond))
		t.Logf("seed %d: goodput from restore+15 s %.1f/s = %.1f%% of capacity, %.1f%% of the offered load (target ≥ 90%% of what can be served)",
			seed, after, 100*after/full, 100*after/min(full, offeredAfter))
		if settled < 0.95*reduced {
			t.Errorf("seed %d: goodput after the drop %.1f/s, want ≥ 95%% of %.1f/s", seed, settled, reduced)
		}
		if p99 > 2*s.noLoadP99() {
			t.Errorf("seed %d: p99 latency while overloaded %v, want ≤ 2× %v", seed, p99, s.noLoadP99())
		}
		if after < 0.9*min(full, offeredAfter) {
			t.Errorf("seed %d: goodput after the restore %.1f/s, want ≥ 90%% of %.1f/s", seed, after, min(full, offeredAfter))
		}
	}
}

// TestScenarioAdaptiveLimiterDoesNotDriftUnderSustainedOverload compares
// the limit 10 s after the drop with the limit after 10 minutes of
// overload. The limit is an integer that moves with every window, so the
// target (≤ 1.1×) is asserted on the means of the minute that starts 10 s
// after the drop and of the tenth minute; the 10-second means around the
// two instants are logged too.
func TestScenarioAdaptiveLimiterDoesNotDriftUnderSustainedOverload(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		s := defaultCapacityDrop
		s.seed, s.restoreAt, s.end = seed, 0, s.dropAt+10*time.Minute+time.Second
		r := s.run()
		end := s.dropAt + 10*time.Minute
		early10 := r.meanLimit(s.dropAt+5*time.Second, s.dropAt+15*time.Second)
		late10 := r.meanLimit(end-10*time.Second, end)
		early := r.meanLimit(s.dropAt+10*time.Second, s.dropAt+70*time.Second)
		late := r.meanLimit(end-time.Minute, end)
		reduced := float64(s.workers/2) / r.meanService.Seconds()
		g := r.goodput(s.dropAt+10*time.Second, end)
		t.Logf("seed %d: limit 10 s after the drop %d (10-s mean %.2f, next minute's %.2f), after 10 min %d (10-s mean %.2f, last minute's %.2f): %.2f× (10-s means %.2f×; target ≤ 1.1×); goodput %.1f%% of capacity; p99 %v",
			seed, r.limitAt(s.dropAt+10*time.Second), early10, early, r.limitAt(end), late10, late, late/early, late10/early10, 100*g/reduced,
			r.latency(0.99, s.dropAt+10*time.Second, end).Round(time.Millisecond))
		if late > 1.1*early {
			t.Errorf("seed %d: the limit drifted from %.2f to %.2f", seed, early, late)
		}
	}
}

// TestScenarioAMinimumLatencyBaselineDrifts is the counterfactual of the
// test above: the same control law, with the no-load latency taken, as
// latency-based limiters commonly take it, from recent samples (here the
// least mean latency of a window of 16 in the last 30 s) instead of being
// measured at a reduced limit. Under sustained overload every sample
// includes queueing, so the baseline, and with it the limit, creeps up.
func TestScenarioAMinimumLatencyBaselineDrifts(t *testing.T) {
	s := defaultCapacityDrop
	s.restoreAt, s.end = 0, s.dropAt+10*time.Minute+time.Second
	type window struct{ at, mean time.Duration }
	var windows []window
	var sum time.Duration
	var n int
	s.sampled = func(l *AdaptiveLimiter, now, latency time.Duration) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.probe.active, l.probe.measuring, l.probe.next = false, false, maxDuration // no measurement at a reduced limit
		l.probeNext.Store(int64(maxDuration))
		l.syncStateLocked()
		sum += latency
		if n++; n < adaptiveWindowSamples {
			return
		}
		windows = append(windows, window{now, sum / time.Duration(n)})
		sum, n = 0, 0
		for len(windows) > 0 && windows[0].at < now-30*time.Second {
			windows = windows[1:]
		}
		least := windows[0].mean
		for _, w := range windows {
			least = min(least, w.mean)
		}
		l.noLoad = least
	}
	r := s.run()
	early := r.meanLimit(s.dropAt+5*time.Second, s.dropAt+15*time.Second)
	late := r.meanLimit(s.dropAt+10*time.Minute-10*time.Second, s.dropAt+10*time.Minute)
	p99 := r.latency(0.99, s.dropAt+9*time.Minute, s.dropAt+10*time.Minute)
	t.Logf("baseline from recent samples: limit 10 s after the drop %.2f, after 10 min %.2f: %.2f×; p99 in the last minute %v = %.2f× no-load",
		early, late, late/early, p99.Round(time.Millisecond), float64(p99)/float64(s.noLoadP99()))
}
