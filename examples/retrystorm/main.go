// Command retrystorm shows what a retry budget does to the load on a
// dependency during an outage. It simulates, on a discrete-event clock, 1,000
// clients that call a dependency at 1,000 requests per second in total, each
// call being a backoff.Retry of up to 5 attempts (100 ms, 200 ms, 400 ms,
// 800 ms apart). The dependency fails every call for 60 seconds, then
// recovers. The simulation runs twice, without a budget and with a 10%
// budget shared by all the clients (backoff.NewRetryBudget(0.1, 10, window),
// a floor of 10 retries per second; -window sets the window, 1 s by
// default), and prints the calls the dependency receives per second, as
// figures and as a text chart. With -svg FILE it also draws the chart as an
// SVG file.
//
// The program is instant: it runs on a fake clock of its own (simClock) that
// jumps from one timer to the next, and every run gives the same figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/retrykit/backoff"
)

// scenario is what is simulated: clients that each call the dependency once
// a second, from their own traffic (a call starts whether or not the
// client's previous one is still retrying), and a dependency that fails every
// call from outageStart for outageLength. A budget, if any, has a floor of
// floorPerSecond retries per second.
type scenario struct {
	clients                int
	outageStart, outageEnd time.Duration
	duration               time.Duration
	floorPerSecond         float64
}

// storm is the scenario of docs/retry-budgets.md: 1,000 calls per second, a minute of
// outage, a floor of 1% of the calls.
var storm = scenario{
	clients:        1000,
	outageStart:    20 * time.Second,
	outageEnd:      80 * time.Second,
	duration:       120 * time.Second,
	floorPerSecond: 10,
}

// schedule is each call's Retry schedule: 5 attempts, 100 ms apart, doubling.
var schedule = backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 5}

var errUnavailable = errors.New("dependency unavailable")

// result is one simulation: the attempts the dependency received in each
// second, and how the calls ended.
type result struct {
	load              []int // attempts in second i
	failed, succeeded int
	refused           int64 // retries the budget refused
}

// simulate runs sc, with a budget of ratio over window if ratio > 0.
func (sc scenario) simulate(ratio float64, window time.Duration) result {
	start := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	clk := newSimClock(start)
	opts := []backoff.Option{backoff.WithClock(clk)}
	var budget *backoff.RetryBudget
	if ratio > 0 {
		budget = backoff.NewRetryBudget(ratio, sc.floorPerSecond, window, backoff.WithClock(clk))
		opts = append(opts, backoff.WithRetryBudget(budget))
	}
	r := result{load: make([]int, int(sc.duration/time.Second))}
	// Only one goroutine runs at a time (see simClock), so the counts need
	// no lock.
	call := func(ctx context.Context) error {
		t := clk.Since(start)
		if s := int(t / time.Second); s < len(r.load) {
			r.load[s]++
		}
		if t >= sc.outageStart && t < sc.outageEnd {
			return errUnavailable
		}
		return nil
	}
	// Client i calls at i/clients of a second past each second.
	var arrivals []time.Duration
	for t := time.Duration(0); t < sc.duration; t += time.Second / time.Duration(sc.clients) {
		arrivals = append(arrivals, t)
	}
	clk.run(arrivals, func() {
		defer clk.park()
		if err := backoff.Retry(context.Background(), schedule, call, opts...); err != nil {
			r.failed++
		} else {
			r.succeeded++
		}
	})
	if budget != nil {
		r.refused = budget.Snapshot().Refused
	}
	return r
}

// stats summarizes a run against the normal load: the mean and peak load
// per second during the outage, and how many seconds after its end the load
// is back within 5% of normal.
type stats struct {
	mean, peak float64
	recovery   int
}

func (sc scenario) summarize(load []int) stats {
	base := float64(sc.clients)
	from, to := int(sc.outageStart/time.Second), int(sc.outageEnd/time.Second)
	var s stats
	sum := 0
	for _, n := range load[from:to] {
		sum += n
		s.peak = max(s.peak, float64(n)/base)
	}
	s.mean = float64(sum) / float64(to-from) / base
	s.recovery = -1
	for i := to; i < len(load); i++ {
		if float64(load[i]) <= 1.05*base {
			s.recovery = i - to
			break
		}
	}
	return s
}

// report prints the figures and the text chart of both runs.
func (sc scenario) report(w io.Writer, window time.Duration, without, with result) {
	a, b := sc.summarize(without.load), sc.summarize(with.load)
	fmt.Fprintf(w, "%d clients, %d calls/s in total, Retry with %d attempts; the dependency fails from %v to %v.\n",
		sc.clients, sc.clients, schedule.Steps, sc.outageStart, sc.outageEnd)
	fmt.Fprintf(w, "load on the dependency during the outage, as a multiple of the normal load:\n")
	fmt.Fprintf(w, "  no budget:  mean %.2fx, peak %.2fx, back to normal %d s after; %d calls failed, %d retries refused\n",
		a.mean, a.peak, a.recovery, without.failed, without.refused)
	fmt.Fprintf(w, "  10%% budget: mean %.2fx, peak %.2fx, back to normal %d s after; %d calls failed, %d retries refused (window %v)\n",
		b.mean, b.peak, b.recovery, with.failed, with.refused, window)
	fmt.Fprintf(w, "\ncalls/s (mean of each 5 s; # no budget, = 10%% budget, one mark per 125 calls/s)\n")
	const step, perMark = 5, 125
	for s := 0; s < len(without.load); s += step {
		x, y := mean(without.load[s:s+step]), mean(with.load[s:s+step])
		mark := " "
		if s >= int(sc.outageStart/time.Second) && s < int(sc.outageEnd/time.Second) {
			mark = "!"
		}
		fmt.Fprintf(w, "%4d s %s %5.0f %-40s %5.0f %s\n", s, mark, x, strings.Repeat("#", int(x/perMark+0.5)),
			y, strings.Repeat("=", int(y/perMark+0.5)))
	}
	fmt.Fprintf(w, "(! marks the outage)\n")
}

func mean(xs []int) float64 {
	sum := 0
	for _, x := range xs {
		sum += x
	}
	return float64(sum) / float64(len(xs))
}

func main() {
	svgPath := flag.String("svg", "", "also draw the chart as an SVG file at this path")
	window := flag.Duration("window", time.Second, "the budget's window")
	flag.Parse()
	if *window <= 0 {
		fmt.Fprintln(os.Stderr, "retrystorm: -window must be positive")
		os.Exit(2)
	}
	without, with := storm.simulate(0, *window), storm.simulate(0.1, *window)
	storm.report(os.Stdout, *window, without, with)
	if *svgPath != "" {
		f, err := os.Create(*svgPath)
		if err == nil {
			storm.writeSVG(f, without.load, with.load)
			err = f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "retrystorm:", err)
			os.Exit(1)
		}
	}
}
