// Command adaptive shows what the library's adaptive pacers do under load,
// in three seeded simulations, each checked against its target:
//
//   - capacity-drop: an AdaptiveLimiter admits requests (TryAcquire; a
//     refused request is shed) to a server of 12 workers with lognormal
//     service times, whose workers fall to 6 from 60 s to 180 s, under
//     Poisson arrivals at 1.5 times the reduced capacity. It prints the
//     goodput and the p99 latency while the server is overloaded, the limit
//     after 10 minutes of overload (a second run, in which the capacity
//     stays halved) against the limit 10 s after the drop, and the goodput
//     after the restore.
//   - shared-quota: 50 clients share a quota of 100 requests per second that
//     answers 429 with a Retry-After beyond it; each client paced by an
//     AdaptiveRate of its own, against exponential backoff alone. It prints
//     the 429s and the time to finish against the quota's minimum.
//   - outage: a Throttler (k = 2) in front of a backend that rejects 80% of
//     requests for a minute. It prints the share of requests that still
//     reach the backend, and how soon full traffic returns; and, against a
//     backend that serves a fifth of the load for that minute, the requests
//     that reach it over k times those it accepts.
//
// Each figure is printed next to its target, with "met" or "missed".
//
// The program is instant and deterministic: each simulation is a
// discrete-event loop that sets a FakeClock to each event's instant, and
// calls the pacers there, so that minutes of traffic take milliseconds and a
// seed always gives the same figures. With -svg FILE it also draws the
// capacity drop (offered load and goodput, the limit, the p99 latency, per
// second), and the other scenarios' traffic, as stacked charts in an SVG
// file:
//
//	go run ./examples/adaptive -svg adaptive.svg
//	go run ./examples/adaptive -seed 2 -scenario quota
//
// The program uses the library's exported API only. Its tests assert the
// targets (the capacity drop's is also the library's own scenario test,
// adaptive_scenario_test.go, which reaches inside the limiter).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/retrykit/backoff/internal/svgplot"
)

// epoch is the instant every simulation starts at. The Throttler seeds its
// random draws from its clock's time at construction, so a fixed epoch is
// what makes its decisions repeatable.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// A scenario is one simulation the program runs: it prints its figures to
// w and returns its charts and its verdicts, one per target.
type scenario struct {
	name string
	run  func(seed uint64, w io.Writer) ([]svgplot.Panel, []bool)
}

var scenarios = []scenario{
	{"capacity-drop", func(seed uint64, w io.Writer) ([]svgplot.Panel, []bool) {
		s := defaultCapacityDrop
		s.Seed = seed
		r := s.run()
		f := s.figures(r, s.sustained().run())
		s.report(w, f)
		return s.panels(r), []bool{f.goodputOK, f.p99OK, f.driftOK, f.restoreOK}
	}},
	{"shared-quota", func(seed uint64, w io.Writer) ([]svgplot.Panel, []bool) {
		s := defaultSharedQuota
		s.seed = seed
		f := s.figures()
		s.report(w, f)
		return s.panels(f), []bool{f.fewerOK, f.completionOK}
	}},
	{"outage", func(seed uint64, w io.Writer) ([]svgplot.Panel, []bool) {
		s := defaultOutage
		s.seed = seed
		r := s.run()
		f := s.figures(r)
		s.report(w, f)
		return s.panels(r), []bool{f.backOK, f.capacityOK}
	}},
}

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "adaptive:", err)
		os.Exit(2)
	}
}

// run is the program: it parses args, runs the scenarios they select and
// prints their figures to stdout, and writes the SVG if asked to.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("adaptive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "the seed of the simulations' random draws")
	svgPath := fs.String("svg", "", "also draw the simulations as an SVG file at this path")
	only := fs.String("scenario", "", "run only the scenario whose name, or a word of it, starts with this: "+names())
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var selected []scenario
	for _, sc := range scenarios {
		if matches(sc.name, *only) {
			selected = append(selected, sc)
		}
	}
	if len(selected) == 0 {
		return fmt.Errorf("no scenario matches -scenario %q: the scenarios are %s", *only, names())
	}
	var panels []svgplot.Panel
	met, missed := 0, 0
	fmt.Fprintf(stdout, "adaptive pacers on a fake clock, seed %d\n", *seed)
	for _, sc := range selected {
		fmt.Fprintln(stdout)
		p, verdicts := sc.run(*seed, stdout)
		panels = append(panels, p...)
		for _, ok := range verdicts {
			if ok {
				met++
			} else {
				missed++
			}
		}
	}
	fmt.Fprintf(stdout, "\ntargets: %d met, %d missed\n", met, missed)
	if *svgPath == "" {
		return nil
	}
	f, err := os.Create(*svgPath)
	if err != nil {
		return err
	}
	err = svgplot.WriteSVG(f, fmt.Sprintf("adaptive pacers on a fake clock, seed %d", *seed), panels)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// matches reports whether the scenario named name is selected by only: only
// is empty, or the name or one of its dash-separated words starts with it.
func matches(name, only string) bool {
	if strings.HasPrefix(name, only) {
		return true
	}
	for _, word := range strings.Split(name, "-") {
		if strings.HasPrefix(word, only) {
			return true
		}
	}
	return false
}

// names lists the scenarios' names.
func names() string {
	var ns []string
	for _, sc := range scenarios {
		ns = append(ns, sc.name)
	}
	return strings.Join(ns, ", ")
}

// secs formats d in seconds, as "60s" or "1.5s".
func secs(d time.Duration) string { return fmt.Sprintf("%gs", d.Seconds()) }

// verdict says whether a figure meets its target.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}
