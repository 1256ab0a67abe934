package backoff

import (
	"testing"
	"time"

	"github.com/retrykit/backoff/internal/sim"
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
// The capacity-drop simulator is internal/sim's, which examples/adaptive
// runs and draws too; the tests here are those that reach inside the
// limiter. The shared-quota and outage scenarios, which need nothing
// unexported, are tested with the simulator of examples/adaptive.

var scenarioEpoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// scenarioAdmitter admits the capacity-drop scenario's requests with an
// AdaptiveLimiter's TryAcquire and records each permit at completion.
type scenarioAdmitter struct {
	l       *AdaptiveLimiter
	clk     *testingclock.FakeClock
	permits []Permit // by request id
	// sampled, if set, is called with each recorded latency: a test can
	// replace the limiter's baseline with one of its own.
	sampled func(l *AdaptiveLimiter, now, latency time.Duration)
}

func (a *scenarioAdmitter) Admit(int) bool {
	p, ok := a.l.TryAcquire()
	if ok {
		a.permits = append(a.permits, p)
	}
	return ok
}

func (a *scenarioAdmitter) Complete(id int, latency time.Duration) {
	a.permits[id].Record()
	if a.sampled != nil {
		a.sampled(a.l, a.clk.Since(scenarioEpoch), latency)
	}
}

func (a *scenarioAdmitter) Limit() int { return a.l.Limit() }

// runCapacityDrop runs s with a fresh AdaptiveLimiter, calling sampled (if
// not nil) with each recorded latency.
func runCapacityDrop(s sim.CapacityDrop, sampled func(l *AdaptiveLimiter, now, latency time.Duration)) sim.CapacityRun {
	clk := testingclock.NewFakeClock(scenarioEpoch)
	return s.Run(clk, &scenarioAdmitter{l: NewAdaptiveLimiter(WithClock(clk)), clk: clk, sampled: sampled})
}

func TestScenarioAdaptiveLimiterCapacityDrop(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	seeds := uint64(2)
	if longTests() {
		seeds = 3
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		s := sim.DefaultCapacityDrop
		s.Seed = seed
		r := runCapacityDrop(s, nil)
		full := float64(s.Workers) / s.MeanService().Seconds()
		reduced := full / 2
		drop, restore := s.DropAt, s.RestoreAt
		settled := r.Goodput(drop+10*time.Second, restore)
		p99 := r.Latency(0.99, drop+10*time.Second, restore)
		p99All := r.Latency(0.99, drop, restore)
		offeredAfter := sim.PerSecond(r.Offered, restore+15*time.Second, s.End)
		after := r.Goodput(restore+15*time.Second, s.End)
		t.Logf("seed %d: capacity %.1f/s, reduced %.1f/s, offered %.1f/s; limit before drop %.1f, 10 s after %d, before restore %.1f, 15 s after restore %d",
			seed, full, reduced, s.Overload*reduced, r.MeanLimit(drop-10*time.Second, drop),
			r.LimitAt(drop+10*time.Second), r.MeanLimit(restore-10*time.Second, restore), r.LimitAt(restore+15*time.Second))
		t.Logf("seed %d: goodput from drop+10 s to restore %.1f/s = %.1f%% of capacity (target ≥ 95%%)", seed, settled, 100*settled/reduced)
		t.Logf("seed %d: p99 latency of admitted, drop+10 s to restore %v (from the drop %v) = %.2f× no-load p99 %v (target ≤ 2×)",
			seed, p99.Round(time.Millisecond), p99All.Round(time.Millisecond), float64(p99)/float64(s.NoLoadP99()), s.NoLoadP99().Round(time.Millisecond))
		t.Logf("seed %d: goodput from restore+15 s %.1f/s = %.1f%% of capacity, %.1f%% of the offered load (target ≥ 90%% of what can be served)",
			seed, after, 100*after/full, 100*after/min(full, offeredAfter))
		if settled < 0.95*reduced {
			t.Errorf("seed %d: goodput after the drop %.1f/s, want ≥ 95%% of %.1f/s", seed, settled, reduced)
		}
		if p99 > 2*s.NoLoadP99() {
			t.Errorf("seed %d: p99 latency while overloaded %v, want ≤ 2× %v", seed, p99, s.NoLoadP99())
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
	t.Parallel() // CPU-bound and self-contained: see TestMain
	seeds := uint64(1)
	if longTests() {
		seeds = 3 // seconds under the race detector each: the long mode runs them
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		s := sim.DefaultCapacityDrop.Sustained()
		s.Seed = seed
		r := runCapacityDrop(s, nil)
		end := s.DropAt + 10*time.Minute
		early10 := r.MeanLimit(s.DropAt+5*time.Second, s.DropAt+15*time.Second)
		late10 := r.MeanLimit(end-10*time.Second, end)
		early := r.MeanLimit(s.DropAt+10*time.Second, s.DropAt+70*time.Second)
		late := r.MeanLimit(end-time.Minute, end)
		reduced := float64(s.Workers/2) / s.MeanService().Seconds()
		g := r.Goodput(s.DropAt+10*time.Second, end)
		t.Logf("seed %d: limit 10 s after the drop %d (10-s mean %.2f, next minute's %.2f), after 10 min %d (10-s mean %.2f, last minute's %.2f): %.2f× (10-s means %.2f×; target ≤ 1.1×); goodput %.1f%% of capacity; p99 %v",
			seed, r.LimitAt(s.DropAt+10*time.Second), early10, early, r.LimitAt(end), late10, late, late/early, late10/early10, 100*g/reduced,
			r.Latency(0.99, s.DropAt+10*time.Second, end).Round(time.Millisecond))
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
	if !longTests() {
		t.Skip("a counterfactual of the test above, seconds under the race detector: the long mode (BACKOFF_LONG=1) runs it")
	}
	t.Parallel() // CPU-bound and self-contained: see TestMain
	s := sim.DefaultCapacityDrop.Sustained()
	type window struct{ at, mean time.Duration }
	var windows []window
	var sum time.Duration
	var n int
	baselineFromSamples := func(l *AdaptiveLimiter, now, latency time.Duration) {
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
	r := runCapacityDrop(s, baselineFromSamples)
	early := r.MeanLimit(s.DropAt+5*time.Second, s.DropAt+15*time.Second)
	late := r.MeanLimit(s.DropAt+10*time.Minute-10*time.Second, s.DropAt+10*time.Minute)
	p99 := r.Latency(0.99, s.DropAt+9*time.Minute, s.DropAt+10*time.Minute)
	t.Logf("baseline from recent samples: limit 10 s after the drop %.2f, after 10 min %.2f: %.2f×; p99 in the last minute %v = %.2f× no-load",
		early, late, late/early, p99.Round(time.Millisecond), float64(p99)/float64(s.NoLoadP99()))
	if late <= 1.1*early {
		t.Errorf("with its baseline from recent samples the limit went from %.2f to %.2f: no drift, so the test above proves nothing about the measured baseline", early, late)
	}
}
