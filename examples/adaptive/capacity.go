package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"github.com/retrykit/backoff"
	testingclock "k8s.io/utils/clock/testing"
)

// capacityDrop is the capacity-drop scenario: a server with workers workers
// and lognormal service times, whose workers fall to half at dropAt and come
// back at restoreAt (never, if 0), with Poisson arrivals at overload times
// the reduced capacity, admitted by an AdaptiveLimiter's TryAcquire. A
// refused request is shed; an admitted one queues at the server until a
// worker is free, and its permit is recorded when it completes.
type capacityDrop struct {
	seed              uint64
	workers           int
	median            time.Duration // of the service time
	sigma             float64       // of the service time's logarithm
	overload          float64
	dropAt, restoreAt time.Duration
	end               time.Duration
}

// defaultCapacityDrop is the scenario of the library's own scenario test,
// with its parameters.
var defaultCapacityDrop = capacityDrop{
	seed: 1, workers: 12, median: 100 * time.Millisecond, sigma: 0.5, overload: 1.5,
	dropAt: 60 * time.Second, restoreAt: 180 * time.Second, end: 240 * time.Second,
}

// sustained is s with the capacity never restored, for 10 minutes of
// overload.
func (s capacityDrop) sustained() capacityDrop {
	s.restoreAt, s.end = 0, s.dropAt+10*time.Minute+time.Second
	return s
}

// limitEvery is how often a run samples the limit.
const limitEvery = 100 * time.Millisecond

// capacityRun is what a run of the scenario observed.
type capacityRun struct {
	meanService time.Duration
	// completions[s], offered[s] and shed[s] count the requests served,
	// arrived and shed in second s; limits[i] is the limit at i·limitEvery.
	completions, offered, shed []int
	limits                     []int
	admitted                   []admission // in order of completion
}

// admission is a served request: when it was admitted, and its latency
// from then to its completion.
type admission struct{ at, latency time.Duration }

// The events of the capacity-drop scenario.
const (
	evArrival    = iota
	evCompletion // id: the request
	evCapacity   // id: the number of workers from now on
	evSample
)

// meanService is the mean of the lognormal service time.
func (s capacityDrop) meanService() time.Duration {
	return time.Duration(float64(s.median) * math.Exp(s.sigma*s.sigma/2))
}

// capacity returns the requests per second that workers serve.
func (s capacityDrop) capacity(workers int) float64 {
	return float64(workers) / s.meanService().Seconds()
}

// noLoadP99 is the p99 latency of a request that does not queue: the p99 of
// the service time.
func (s capacityDrop) noLoadP99() time.Duration {
	return time.Duration(float64(s.median) * math.Exp(s.sigma*2.3263))
}

// run simulates s: a FakeClock is set to each event's instant in turn, so
// the limiter reads the simulated time.
func (s capacityDrop) run() capacityRun {
	rng := rand.New(rand.NewPCG(s.seed, 0x5ca1ab1e))
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk))
	mu := math.Log(float64(s.median))
	service := func() time.Duration { return time.Duration(math.Exp(mu + s.sigma*rng.NormFloat64())) }
	interArrival := time.Duration(float64(time.Second) / (s.overload * s.capacity(s.workers/2)))

	seconds := int(s.end/time.Second) + 1
	out := capacityRun{
		meanService: s.meanService(),
		completions: make([]int, seconds), offered: make([]int, seconds), shed: make([]int, seconds),
	}
	type request struct {
		arrived time.Duration
		permit  backoff.Permit
	}
	var requests []request
	var waiting []int // requests queued at the server, first come first
	workers, busy := s.workers, 0
	var q agenda
	serveWaiting := func(now time.Duration) {
		for busy < workers && len(waiting) > 0 {
			busy++
			q.schedule(now+service(), evCompletion, waiting[0])
			waiting = waiting[1:]
		}
	}
	q.schedule(exponential(rng, interArrival), evArrival, 0)
	q.schedule(s.dropAt, evCapacity, s.workers/2)
	if s.restoreAt > 0 {
		q.schedule(s.restoreAt, evCapacity, s.workers)
	}
	q.schedule(0, evSample, 0)
	for q.Len() > 0 {
		e := q.next()
		if e.at > s.end {
			break
		}
		clk.SetTime(epoch.Add(e.at))
		sec := e.at / time.Second
		switch e.kind {
		case evArrival:
			out.offered[sec]++
			q.schedule(e.at+exponential(rng, interArrival), evArrival, 0)
			p, ok := l.TryAcquire()
			if !ok {
				out.shed[sec]++
				continue
			}
			requests = append(requests, request{arrived: e.at, permit: p})
			waiting = append(waiting, len(requests)-1)
			serveWaiting(e.at)
		case evCompletion:
			busy--
			r := &requests[e.id]
			r.permit.Record()
			out.completions[sec]++
			out.admitted = append(out.admitted, admission{r.arrived, e.at - r.arrived})
			serveWaiting(e.at)
		case evCapacity:
			workers = e.id
			serveWaiting(e.at)
		case evSample:
			out.limits = append(out.limits, l.Limit())
			q.schedule(e.at+limitEvery, evSample, 0)
		}
	}
	return out
}

// goodput returns the requests served per second in [from, to).
func (r capacityRun) goodput(from, to time.Duration) float64 {
	return perSecond(r.completions, from, to)
}

// latency returns the p-th percentile latency of the requests admitted in
// [from, to).
func (r capacityRun) latency(p float64, from, to time.Duration) time.Duration {
	var ds []time.Duration
	for _, a := range r.admitted {
		if a.at >= from && a.at < to {
			ds = append(ds, a.latency)
		}
	}
	return percentile(ds, p)
}

// meanLimit returns the mean of the limit's samples in [from, to).
func (r capacityRun) meanLimit(from, to time.Duration) float64 {
	total, n := 0, 0
	for i := from / limitEvery; i < to/limitEvery && int(i) < len(r.limits); i++ {
		total += r.limits[i]
		n++
	}
	return float64(total) / float64(n)
}

// limitAt returns the limit sampled at t.
func (r capacityRun) limitAt(t time.Duration) int { return r.limits[t/limitEvery] }

// capacityFigures are the figures the program prints for the scenario, and
// the verdicts on its targets.
type capacityFigures struct {
	capacity, reduced, offered float64 // requests per second
	shedShare                  float64 // of the arrivals, over the whole run
	// Goodput from 10 s after the drop to the restore.
	settled float64
	// p99 latency of the requests admitted from 10 s after the drop to the
	// restore, from the drop to the restore, and in the 10 s after the drop.
	noLoadP99, p99, p99FromDrop, p99First10 time.Duration
	// The limit: the mean of the 10 s before the drop, the sample 10 s
	// after it, the mean of the 10 s before the restore, the sample 15 s
	// after it.
	limitBefore, limitBeforeRestore   float64
	limitAfterDrop, limitAfterRestore int
	// Goodput and offered load from 15 s after the restore to the end.
	after, offeredAfter float64
	// The sustained run: the limit 10 s after the drop and after 10
	// minutes, as samples and as the means of the minute from 10 s after
	// the drop and of the tenth minute; its goodput and p99 from 10 s
	// after the drop.
	early, late             int
	earlyMinute, lateMinute float64
	sustainedGoodput        float64
	sustainedP99            time.Duration
	// The verdicts on the four targets.
	goodputOK, p99OK, driftOK, restoreOK bool
}

// figures computes the figures of r, a run of s, and of long, a run of
// s.sustained().
func (s capacityDrop) figures(r, long capacityRun) capacityFigures {
	drop, restore := s.dropAt, s.restoreAt
	f := capacityFigures{
		capacity: s.capacity(s.workers), reduced: s.capacity(s.workers / 2),
		offered:            s.overload * s.capacity(s.workers/2),
		settled:            r.goodput(drop+10*time.Second, restore),
		noLoadP99:          s.noLoadP99(),
		p99:                r.latency(0.99, drop+10*time.Second, restore),
		p99FromDrop:        r.latency(0.99, drop, restore),
		p99First10:         r.latency(0.99, drop, drop+10*time.Second),
		limitBefore:        r.meanLimit(drop-10*time.Second, drop),
		limitAfterDrop:     r.limitAt(drop + 10*time.Second),
		limitBeforeRestore: r.meanLimit(restore-10*time.Second, restore),
		limitAfterRestore:  r.limitAt(restore + 15*time.Second),
		after:              r.goodput(restore+15*time.Second, s.end),
		offeredAfter:       perSecond(r.offered, restore+15*time.Second, s.end),
	}
	f.shedShare = float64(sum(r.shed, 0, s.end)) / float64(sum(r.offered, 0, s.end))
	end := drop + 10*time.Minute
	f.early, f.late = long.limitAt(drop+10*time.Second), long.limitAt(end)
	// The limit is an integer that moves with every window of samples, so
	// the target is judged on the means of a minute, as the library's
	// scenario test judges it.
	f.earlyMinute = long.meanLimit(drop+10*time.Second, drop+70*time.Second)
	f.lateMinute = long.meanLimit(end-time.Minute, end)
	f.sustainedGoodput = long.goodput(drop+10*time.Second, end)
	f.sustainedP99 = long.latency(0.99, drop+10*time.Second, end)

	f.goodputOK = f.settled >= 0.95*f.reduced
	f.p99OK = f.p99 <= 2*f.noLoadP99
	f.driftOK = f.lateMinute <= 1.1*f.earlyMinute
	// The offered load is 1.5 times the reduced capacity, which is 75% of
	// the full one: after the restore, what can be served is the offered
	// load, and the target is judged against it, as the library's scenario
	// test judges it.
	f.restoreOK = f.after >= 0.9*min(f.capacity, f.offeredAfter)
	return f
}

// report prints f as a table, with the targets.
func (s capacityDrop) report(w io.Writer, f capacityFigures) {
	fmt.Fprintf(w, "== capacity-drop: an AdaptiveLimiter's TryAcquire in front of a server whose capacity halves for 2 minutes\n")
	fmt.Fprintf(w, "%d workers, lognormal service times (median %v, σ %.1f, mean %v): capacity %.1f/s; %d workers from %s to %s: %.1f/s.\n",
		s.workers, s.median, s.sigma, s.meanService().Round(time.Millisecond), f.capacity, s.workers/2, secs(s.dropAt), secs(s.restoreAt), f.reduced)
	fmt.Fprintf(w, "Poisson arrivals at %.1f/s (%.1f× the reduced capacity); a request the limiter refuses is shed (%.1f%% of all arrivals).\n",
		f.offered, s.overload, 100*f.shedShare)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "  goodput from drop+10s to the restore\t%.1f/s = %.1f%% of the reduced capacity\t≥ 95%%\t%s\n",
		f.settled, 100*f.settled/f.reduced, verdict(f.goodputOK))
	fmt.Fprintf(tw, "  p99 latency of admitted, same span\t%v = %.2f× no-load p99 (%v)\t≤ 2×\t%s\n",
		f.p99.Round(time.Millisecond), float64(f.p99)/float64(f.noLoadP99), f.noLoadP99.Round(time.Millisecond), verdict(f.p99OK))
	fmt.Fprintf(tw, "  limit after 10 min of overload\t%.2f = %.2f× the limit from drop+10s (%.2f), minute means\t≤ 1.1×\t%s\n",
		f.lateMinute, f.lateMinute/f.earlyMinute, f.earlyMinute, verdict(f.driftOK))
	fmt.Fprintf(tw, "  goodput from restore+15s\t%.1f/s = %.1f%% of capacity, %.1f%% of what can be served\t≥ 90%%\t%s\n",
		f.after, 100*f.after/f.capacity, 100*f.after/min(f.capacity, f.offeredAfter), verdict(f.restoreOK))
	tw.Flush()
	fmt.Fprintf(w, "  p99 latency of admitted in the 10 s after the drop: %v (%.2f×); from the drop to the restore: %v (%.2f×).\n",
		f.p99First10.Round(time.Millisecond), float64(f.p99First10)/float64(f.noLoadP99),
		f.p99FromDrop.Round(time.Millisecond), float64(f.p99FromDrop)/float64(f.noLoadP99))
	fmt.Fprintf(w, "  Limit: %.1f before the drop (mean of 10 s), %d at drop+10s, %.1f before the restore (mean of 10 s), %d at restore+15s.\n",
		f.limitBefore, f.limitAfterDrop, f.limitBeforeRestore, f.limitAfterRestore)
	fmt.Fprintf(w, "  10 min of overload (a second run, capacity never restored): limit means %.2f in the minute from drop+10s, %.2f in the tenth minute (samples %d and %d); goodput %.1f%% of the reduced capacity, p99 %v.\n",
		f.earlyMinute, f.lateMinute, f.early, f.late, 100*f.sustainedGoodput/f.reduced, f.sustainedP99.Round(time.Millisecond))
	if f.offeredAfter < 0.9*f.capacity {
		fmt.Fprintf(w, "  From restore+15s the offered load is %.1f/s, %.0f%% of capacity: 90%% of capacity itself is out of reach, so the target is judged against what can be served.\n",
			f.offeredAfter, 100*f.offeredAfter/f.capacity)
	}
}

// panels draws r: the load and goodput, the limit, and the p99 latency,
// each per second, over the span of reduced capacity.
func (s capacityDrop) panels(r capacityRun) []panel {
	n := int(s.end / time.Second)
	capacity, workers := make([]float64, n), make([]float64, n)
	latencies := make([][]time.Duration, n)
	for _, a := range r.admitted {
		if sec := int(a.at / time.Second); sec < n {
			latencies[sec] = append(latencies[sec], a.latency)
		}
	}
	p99 := make([]float64, n)
	for sec := range n {
		at := time.Duration(sec) * time.Second
		workers[sec] = float64(s.workers)
		if at >= s.dropAt && (s.restoreAt == 0 || at < s.restoreAt) {
			workers[sec] /= 2
		}
		capacity[sec] = workers[sec] / s.meanService().Seconds()
		p99[sec] = math.NaN()
		if len(latencies[sec]) > 0 {
			p99[sec] = float64(percentile(latencies[sec], 0.99)) / float64(time.Millisecond)
		}
	}
	limits := make([]float64, min(len(r.limits), int(s.end/limitEvery)))
	for i := range limits {
		limits[i] = float64(r.limits[i])
	}
	xmax, shade := s.end.Seconds(), [2]float64{s.dropAt.Seconds(), s.restoreAt.Seconds()}
	const label = "half the workers"
	return []panel{
		{title: "capacity drop: requests per second", xmax: xmax, shade: shade, shadeLabel: label, lines: []series{
			{name: "capacity", color: "#888", dash: "5,3", dt: 1, step: true, ys: capacity},
			{name: "offered", color: "#e67e22", dt: 1, ys: floats(r.offered[:n])},
			{name: "goodput (served)", color: "#2471a3", dt: 1, ys: floats(r.completions[:n])},
		}},
		{title: "capacity drop: AdaptiveLimiter's limit (calls in flight)", xmax: xmax, shade: shade, shadeLabel: label, lines: []series{
			{name: "workers", color: "#888", dash: "5,3", dt: 1, step: true, ys: workers},
			{name: "limit (every 100 ms)", color: "#8e44ad", dt: limitEvery.Seconds(), step: true, ys: limits},
		}},
		{title: "capacity drop: p99 latency of the requests admitted in each second (ms)", xmax: xmax, shade: shade, shadeLabel: label, lines: []series{
			{name: "no-load p99", color: "#27ae60", dash: "5,3", dt: 1, step: true, ys: constant(n, float64(s.noLoadP99())/float64(time.Millisecond))},
			{name: "2× no-load p99 (target)", color: "#c0392b", dash: "2,3", dt: 1, step: true, ys: constant(n, 2*float64(s.noLoadP99())/float64(time.Millisecond))},
			{name: "p99 latency", color: "#2471a3", dt: 1, ys: p99},
		}},
	}
}
