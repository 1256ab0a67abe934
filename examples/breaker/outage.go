package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/internal/sim"
	"github.com/retrykit/backoff/internal/svgplot"
	testingclock "k8s.io/utils/clock/testing"
)

// outage is the outage scenario: each call a Retry of up to 5 attempts
// (100 ms doubling), hedged after the learned p95, with a 10% RetryBudget;
// then the same with a Breaker of the default settings.
type outage struct{ sim.Outage }

// outageFigures are the figures the program prints: while the backend is
// down, the attempts sent over the first attempts without the breaker
// (target ≤ 1.10×), and the share of calls that reached the backend with
// it (target ≤ 5%); and how long after the recovery the first second came
// in which ≥ 95% of the calls' first attempts went out (target ≤ 5 s).
type outageFigures struct {
	calls, first, sent   int
	offered              float64
	reached, breakerSent int
	reachedShare         float64
	back                 time.Duration
	trips                int
	offeredOK, reachedOK bool
	backOK               bool
	plainRun, breakerRun sim.CallRun
	states               []float64
}

func (s outage) policy(clk *testingclock.FakeClock) sim.Policy {
	return sim.Policy{Attempts: 5, Backoff: 100 * time.Millisecond, Budget: budget(clk),
		Hedge: 50 * time.Millisecond, Learned: backoff.NewHedgeDelay(0.95, time.Millisecond, time.Second)}
}

func (s outage) figures() outageFigures {
	clk := testingclock.NewFakeClock(epoch)
	plain := s.Traffic().Run(clk, s.policy(clk))
	clk = testingclock.NewFakeClock(epoch)
	p := s.policy(clk)
	g := newGate(clk)
	p.Gate = g
	withBreaker := s.Traffic().Run(clk, p)

	f := outageFigures{plainRun: plain, breakerRun: withBreaker, back: -1, trips: len(g.trips()), states: g.states(s.End)}
	f.calls = sim.Sum(plain.Calls, s.Down, s.Up)
	f.first, f.sent = sim.Sum(plain.FirstSent, s.Down, s.Up), sim.Sum(plain.Sent, s.Down, s.Up)
	f.offered = float64(f.sent) / float64(f.first)
	f.reached = sim.Sum(withBreaker.Reached, s.Down, s.Up)
	f.breakerSent = sim.Sum(withBreaker.Sent, s.Down, s.Up)
	f.reachedShare = float64(f.reached) / float64(sim.Sum(withBreaker.Calls, s.Down, s.Up))
	for sec := s.Up / time.Second; sec < s.End/time.Second; sec++ {
		if float64(withBreaker.FirstSent[sec]) >= 0.95*float64(withBreaker.Calls[sec]) {
			f.back = sec*time.Second + time.Second - s.Up
			break
		}
	}
	f.offeredOK, f.reachedOK = f.offered <= 1.10, f.reachedShare <= 0.05
	f.backOK = f.back >= 0 && f.back <= 5*time.Second
	return f
}

func (s outage) report(w io.Writer, f outageFigures) {
	fmt.Fprintf(w, "== outage: %.0f calls/s; the backend fails every attempt from %s to %s\n", s.Rate, secs(s.Down), secs(s.Up))
	fmt.Fprintf(w, "Each call a Retry of up to 5 attempts (100 ms doubling), hedged after the learned p95, with a 10%% RetryBudget\n"+
		"(NewRetryBudget(0.1, 5, 1s)); then the same with a Breaker of the default settings.\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "  offered load while down, retries and hedges on (attempts ÷ first attempts)\t%d ÷ %d = %.3f×\t≤ 1.10×\t%s\n",
		f.sent, f.first, f.offered, verdict(f.offeredOK))
	fmt.Fprintf(tw, "  with the breaker: calls that reached the backend while down\t%d of %d = %.2f%% (%d attempts, %d trips)\t≤ 5%%\t%s\n",
		f.reached, f.calls, 100*f.reachedShare, f.breakerSent, f.trips, verdict(f.reachedOK))
	back := "never"
	if f.back >= 0 {
		back = secs(f.back)
	}
	fmt.Fprintf(tw, "  with the breaker: full traffic after the recovery\t%s (first second with ≥ 95%% of first attempts sent)\t≤ 5s\t%s\n",
		back, verdict(f.backOK))
	tw.Flush()
}

func (s outage) panels(f outageFigures) []svgplot.Panel {
	n := int(s.End / time.Second)
	return []svgplot.Panel{{Title: "outage: attempts per second", XMax: s.End.Seconds(),
		Shade: [2]float64{s.Down.Seconds(), s.Up.Seconds()}, ShadeLabel: "backend down",
		Lines: []svgplot.Series{
			{Name: "calls", Color: "#888", DT: 1, YS: svgplot.Floats(f.plainRun.Calls[:n])},
			{Name: "sent: retries + hedges + budget", Color: "#e67e22", DT: 1, YS: svgplot.Floats(f.plainRun.Sent[:n])},
			{Name: "sent: and the breaker", Color: "#2471a3", DT: 1, YS: svgplot.Floats(f.breakerRun.Sent[:n])},
		}}}
}
