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

// sparse is the slow-and-sparse scenario: one call every 19 s, each one
// attempt, against a backend that is down; a Breaker of the default
// settings, and one that keeps only its failure-ratio rule.
type sparse struct{ sim.Sparse }

// sparseFigures are the figures the program prints: when the breaker
// tripped and after how many failures (target: it trips, on the 5th
// failure in a row), the calls it let through after that, and the trips of
// the breaker without the consecutive rule.
type sparseFigures struct {
	calls, before, after int
	trip                 time.Duration // -1: never
	ratioTrips           int
	tripOK               bool
	states               []float64
}

func (s sparse) figures() sparseFigures {
	clk := testingclock.NewFakeClock(epoch)
	g := newGate(clk)
	r := s.Traffic().Run(clk, sim.Policy{Attempts: 1, Gate: g})
	clk = testingclock.NewFakeClock(epoch)
	ratioOnly := newGate(clk, backoff.WithBreakerConsecutiveFailures(0))
	s.Traffic().Run(clk, sim.Policy{Attempts: 1, Gate: ratioOnly})

	f := sparseFigures{calls: sim.Sum(r.Calls, 0, s.End), trip: -1, ratioTrips: len(ratioOnly.trips()), states: g.states(s.End)}
	if ts := g.trips(); len(ts) > 0 {
		f.trip = ts[0]
	}
	for sec, n := range r.Sent {
		if f.trip >= 0 && time.Duration(sec)*time.Second > f.trip {
			f.after += n
		} else {
			f.before += n
		}
	}
	f.tripOK = f.trip >= 0 && f.before == 5
	return f
}

func (s sparse) report(w io.Writer, f sparseFigures) {
	fmt.Fprintf(w, "== slow and sparse: a call every %s for %s, each one attempt, against a backend that is down\n", secs(s.Every), secs(s.End))
	fmt.Fprintf(w, "A Breaker of the default settings (5 failures in a row, or 50%% of ≥ 20 outcomes in 10 s).\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  figure\tvalue\ttarget\n")
	trip := "never"
	if f.trip >= 0 {
		trip = fmt.Sprintf("at %s, on failure %d in a row", secs(f.trip), f.before)
	}
	fmt.Fprintf(tw, "  the breaker trips on the undecayed count\t%s\ton the 5th\t%s\n", trip, verdict(f.tripOK))
	fmt.Fprintf(tw, "  calls let through after the trip\t%d of %d, each a half-open probe\t–\n", f.after, f.calls-f.before)
	fmt.Fprintf(tw, "  trips of a breaker with the ratio rule alone\t%d\t–\n", f.ratioTrips)
	tw.Flush()
	fmt.Fprintf(w, "  The open time (≤ 4.4 s) is shorter than the %s between calls, so each later call finds the breaker half-open\n"+
		"  and is its probe: the trip spares the backend nothing at this rate, but the state says the backend is down.\n", secs(s.Every))
}

func (s sparse) panels(f sparseFigures) []svgplot.Panel {
	return []svgplot.Panel{{Title: "slow and sparse: breaker state (0 closed, 1 half-open, 2 open, the worst of each second)", XMax: s.End.Seconds(),
		Lines: []svgplot.Series{{Name: "state", Color: "#27ae60", DT: 1, Step: true, YS: f.states}}}}
}
