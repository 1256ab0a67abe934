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

// stragglers is the stragglers scenario: every call is one attempt, and
// with hedging a second one after the learned 98th percentile of the
// attempts' latencies, charged to the retry budget.
type stragglers struct{ sim.Stragglers }

// stragglersFigures are the figures the program prints: the p99.9 latency
// of the calls without hedging and with it, their ratio (target ≥ 20×),
// and the hedges sent per call (target ≤ 3%).
type stragglersFigures struct {
	calls               int
	plain, hedged       time.Duration
	ratio               float64
	extra               float64
	delay               time.Duration // the learned hedge delay at the end
	ratioOK, extraOK    bool
	plainRun, hedgedRun sim.CallRun
}

func (s stragglers) figures() stragglersFigures {
	clk := testingclock.NewFakeClock(epoch)
	plain := s.Traffic().Run(clk, sim.Policy{Attempts: 1})
	clk = testingclock.NewFakeClock(epoch)
	learned := backoff.NewHedgeDelay(0.98, time.Millisecond, time.Second)
	hedged := s.Traffic().Run(clk, sim.Policy{Attempts: 1, Budget: budget(clk), Hedge: 50 * time.Millisecond, Learned: learned})
	f := stragglersFigures{calls: sim.Sum(plain.Calls, 0, s.End), plainRun: plain, hedgedRun: hedged}
	f.plain = latencyPercentile(plain, 0.999, 0, s.End)
	f.hedged = latencyPercentile(hedged, 0.999, 0, s.End)
	f.ratio = float64(f.plain) / float64(f.hedged)
	f.extra = float64(hedged.Hedges) / float64(sim.Sum(hedged.Calls, 0, s.End))
	f.delay, _ = learned.Delay()
	f.ratioOK, f.extraOK = f.ratio >= 20, f.extra <= 0.03
	return f
}

// latencyPercentile returns the p-th percentile latency of the calls of r
// that arrived in [from, to) and succeeded.
func latencyPercentile(r sim.CallRun, p float64, from, to time.Duration) time.Duration {
	var ds []time.Duration
	for _, a := range r.Latencies {
		if a.At >= from && a.At < to {
			ds = append(ds, a.Latency)
		}
	}
	return sim.Percentile(ds, p)
}

func (s stragglers) report(w io.Writer, f stragglersFigures) {
	fmt.Fprintf(w, "== stragglers: %.0f calls/s for %s, lognormal latency (median %v, σ %.2f), %.0f%% of attempts %.0f× the median\n",
		s.Rate, secs(s.End), s.Median, s.Sigma, 100*s.Share, s.Factor)
	fmt.Fprintf(w, "Hedging: a second attempt after the learned p98 of attempt latencies (now %v), charged to a 10%% RetryBudget.\n", f.delay.Round(10*time.Microsecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "  p99.9 latency of %d calls, without hedging ÷ with\t%v ÷ %v = %.1f×\t≥ 20×\t%s\n",
		f.calls, f.plain.Round(10*time.Microsecond), f.hedged.Round(10*time.Microsecond), f.ratio, verdict(f.ratioOK))
	fmt.Fprintf(tw, "  extra attempts (hedges ÷ calls)\t%.2f%%\t≤ 3%%\t%s\n", 100*f.extra, verdict(f.extraOK))
	tw.Flush()
	fmt.Fprintf(w, "  The 20× target is out of reach in this scenario: a straggler takes %.0f× the median (%v), and a hedge that\n"+
		"  rescues it answers after the hedge delay plus an ordinary latency. A delay that keeps extra attempts ≤ 3%% lies\n"+
		"  above the p97 of attempt latencies, here %v (the learned p98), so p99.9 falls at most %v ÷ (%v + %v) = %.1f×;\n"+
		"  20× needs stragglers 40 or more times the median (The Tail at Scale's 1,800 ms tail was 180 times its 10 ms delay).\n",
		s.Factor, time.Duration(s.Factor*float64(s.Median)), f.delay.Round(10*time.Microsecond),
		time.Duration(s.Factor*float64(s.Median)), f.delay.Round(10*time.Microsecond), s.Median,
		s.Factor*float64(s.Median)/float64(f.delay+s.Median))
}

func (s stragglers) panels(f stragglersFigures) []svgplot.Panel {
	n := int(s.End / time.Second)
	per := func(r sim.CallRun) []float64 {
		ys := make([]float64, n)
		for i := range ys {
			ys[i] = float64(latencyPercentile(r, 0.999, time.Duration(i)*time.Second, time.Duration(i+1)*time.Second)) / float64(time.Millisecond)
		}
		return ys
	}
	return []svgplot.Panel{{Title: "stragglers: p99.9 latency of the calls of each second (ms)", XMax: s.End.Seconds(),
		Lines: []svgplot.Series{
			{Name: "without hedging", Color: "#c0392b", DT: 1, YS: per(f.plainRun)},
			{Name: "hedged after the learned p98", Color: "#2471a3", DT: 1, YS: per(f.hedgedRun)},
		}}}
}
