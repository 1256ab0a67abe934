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

// blip is the blip scenario: each call a Retry of up to 3 attempts with a
// 1 s attempt timeout, hedged after the learned p95, with a 10%
// RetryBudget and a Breaker of the default settings.
type blip struct{ sim.Blip }

// blipFigures are the figures the program prints: the breaker's trips
// (target 0) and the calls refused by it (target ≤ 0.2%).
type blipFigures struct {
	calls, rejected     int
	trips               int
	rejectedShare       float64
	tripsOK, rejectedOK bool
	run                 sim.CallRun
	states              []float64
}

func (s blip) figures() blipFigures {
	clk := testingclock.NewFakeClock(epoch)
	g := newGate(clk)
	r := s.Traffic().Run(clk, sim.Policy{Attempts: 3, Backoff: 100 * time.Millisecond, AttemptTimeout: time.Second,
		Budget: budget(clk), Gate: g, Hedge: 50 * time.Millisecond, Learned: backoff.NewHedgeDelay(0.95, time.Millisecond, time.Second)})
	f := blipFigures{run: r, calls: sim.Sum(r.Calls, 0, s.End), rejected: sim.Sum(r.Rejected, 0, s.End),
		trips: len(g.trips()), states: g.states(s.End)}
	f.rejectedShare = float64(f.rejected) / float64(f.calls)
	f.tripsOK, f.rejectedOK = f.trips == 0, f.rejectedShare <= 0.002
	return f
}

func (s blip) report(w io.Writer, f blipFigures) {
	fmt.Fprintf(w, "== blip: %.0f calls/s; from %s to %s, %.2f%% of attempts hang past their 1 s timeout\n",
		s.Rate, secs(s.From), secs(s.To), 100*s.Share)
	fmt.Fprintf(w, "Each call a Retry of up to 3 attempts, hedged after the learned p95, with a 10%% RetryBudget and a default Breaker.\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "  breaker trips\t%d\t0\t%s\n", f.trips, verdict(f.tripsOK))
	fmt.Fprintf(tw, "  calls rejected locally (ErrBreakerOpen)\t%d of %d = %.3f%%\t≤ 0.2%%\t%s\n",
		f.rejected, f.calls, 100*f.rejectedShare, verdict(f.rejectedOK))
	tw.Flush()
}

func (s blip) panels(f blipFigures) []svgplot.Panel {
	n := int(s.End / time.Second)
	return []svgplot.Panel{{Title: "blip: calls and attempts per second", XMax: s.End.Seconds(),
		Shade: [2]float64{s.From.Seconds(), s.To.Seconds()}, ShadeLabel: fmt.Sprintf("%.2f%% time out", 100*s.Share),
		Lines: []svgplot.Series{
			{Name: "calls", Color: "#888", DT: 1, YS: svgplot.Floats(f.run.Calls[:n])},
			{Name: "attempts sent", Color: "#2471a3", DT: 1, YS: svgplot.Floats(f.run.Sent[:n])},
			{Name: "rejected locally", Color: "#c0392b", DT: 1, YS: svgplot.Floats(f.run.Rejected[:n])},
			{Name: "breaker state ×100 (0 closed, 100 half-open, 200 open)", Color: "#27ae60", DT: 1, Step: true, YS: scale(f.states, 100)},
		}}}
}

// scale returns ys times k.
func scale(ys []float64, k float64) []float64 {
	out := make([]float64, len(ys))
	for i, y := range ys {
		out[i] = k * y
	}
	return out
}
