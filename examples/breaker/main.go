// Command breaker shows what the library's Breaker, hedging (WithHedge,
// HedgeDelay) and RetryBudget do together, in four seeded simulations,
// each figure printed next to its target with "met" or "missed":
//
//   - stragglers: 500 calls/s whose attempts take a lognormal latency,
//     except 1% that take 20 times the median; the p99.9 latency without
//     hedging and with a hedge after the learned p98, and the extra attempts.
//   - outage: 500 calls/s, each a Retry of up to 5 attempts, hedged, with
//     a 10% RetryBudget, against a backend that fails everything for 60 s:
//     the offered load while it is down; then with a Breaker, the calls that
//     reach it while it is down, and how soon full traffic returns.
//   - blip: 840 calls/s, 0.14% of attempts time out for 10 s: the breaker's
//     trips and the calls it rejects.
//   - slow-sparse: a call every 19 s for 10 minutes against a backend that
//     is down: the breaker trips on its count of failures in a row, which
//     does not decay.
//
// The program is instant and deterministic: each simulation is a
// discrete-event loop (internal/sim's call model, which retries, hedges,
// spends the budget and asks the breaker as Retry does) that sets a
// FakeClock to each event's instant and calls the library's types there.
// With -svg FILE it also draws each scenario, per second, as stacked
// charts in an SVG file:
//
//	go run ./examples/breaker -svg breaker.svg
//	go run ./examples/breaker -seed 2 -scenario outage
//
// Its tests assert the targets the library meets for seeds 1 to 3.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/retrykit/backoff/internal/sim"
	"github.com/retrykit/backoff/internal/svgplot"
)

// epoch is the instant every simulation starts at.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// A scenario is one simulation the program runs: it prints its figures to
// w and returns its charts and its verdicts, one per target.
type scenario struct {
	name string
	run  func(seed uint64, w io.Writer) ([]svgplot.Panel, []bool)
}

var scenarios = []scenario{
	{"stragglers", func(seed uint64, w io.Writer) ([]svgplot.Panel, []bool) {
		s := stragglers{sim.DefaultStragglers}
		s.Seed = seed
		f := s.figures()
		s.report(w, f)
		return s.panels(f), []bool{f.ratioOK, f.extraOK}
	}},
	{"outage", func(seed uint64, w io.Writer) ([]svgplot.Panel, []bool) {
		s := outage{sim.DefaultOutage}
		s.Seed = seed
		f := s.figures()
		s.report(w, f)
		return s.panels(f), []bool{f.offeredOK, f.reachedOK, f.backOK}
	}},
	{"blip", func(seed uint64, w io.Writer) ([]svgplot.Panel, []bool) {
		s := blip{sim.DefaultBlip}
		s.Seed = seed
		f := s.figures()
		s.report(w, f)
		return s.panels(f), []bool{f.tripsOK, f.rejectedOK}
	}},
	{"slow-sparse", func(seed uint64, w io.Writer) ([]svgplot.Panel, []bool) {
		s := sparse{sim.DefaultSparse}
		s.Seed = seed
		f := s.figures()
		s.report(w, f)
		return s.panels(f), []bool{f.tripOK}
	}},
}

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "breaker:", err)
		os.Exit(2)
	}
}

// run is the program: it parses args, runs the scenarios they select and
// prints their figures to stdout, and writes the SVG if asked to.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("breaker", flag.ContinueOnError)
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
	fmt.Fprintf(stdout, "a breaker, hedging and a retry budget on a fake clock, seed %d\n", *seed)
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
	err = svgplot.WriteSVG(f, fmt.Sprintf("a breaker, hedging and a retry budget on a fake clock, seed %d", *seed), panels)
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
