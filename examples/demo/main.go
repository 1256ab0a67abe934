// Command demo prints, instantly, the timelines that Kubernetes' retry
// machinery is known for, reproduced by this library under a fake clock:
// kubelet's CrashLoopBackOff, a controller's requeue backoff and
// controller-runtime's observed log of it, the scheduler's pod backoff, and
// Retry. Nothing sleeps; every delay is a step of a FakeClock. Every
// duration is printed in seconds.
//
//	go run ./examples/demo                   # every timeline
//	go run ./examples/demo -list             # their names
//	go run ./examples/demo -only controller  # the timelines whose name, or a word of it, starts so
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// A timeline is one demonstration: it writes a small table to w.
type timeline struct {
	name  string // short name for -only
	title string // one line that says what it reproduces
	run   func(w io.Writer)
}

// timelines is filled by the init functions of the other files of this
// package, one file per part of the library.
var timelines []timeline

func register(name, title string, run func(w io.Writer)) {
	timelines = append(timelines, timeline{name: name, title: title, run: run})
}

func main() {
	only := flag.String("only", "", "run only the timelines whose name, or a word of it (between dashes), starts with this")
	list := flag.Bool("list", false, "list the timelines and exit")
	flag.Parse()
	if err := runTimelines(os.Stdout, *only, *list); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// matches reports whether the timeline named name is selected by only: only
// is empty, or the name or one of its dash-separated words starts with it
// ("requeue" selects controller-requeue, "controller" all three controller
// timelines).
func matches(name, only string) bool {
	if only == "" || strings.HasPrefix(name, only) {
		return true
	}
	for _, word := range strings.Split(name, "-") {
		if strings.HasPrefix(word, only) {
			return true
		}
	}
	return false
}

func runTimelines(w io.Writer, only string, list bool) error {
	sort.Slice(timelines, func(i, j int) bool { return timelines[i].name < timelines[j].name })
	width := 0
	for _, tl := range timelines {
		width = max(width, len(tl.name))
	}
	ran := false
	for _, tl := range timelines {
		if !matches(tl.name, only) {
			continue
		}
		ran = true
		if list {
			fmt.Fprintf(w, "%-*s  %s\n", width, tl.name, tl.title)
			continue
		}
		fmt.Fprintf(w, "== %s: %s\n", tl.name, tl.title)
		tl.run(w)
		fmt.Fprintln(w)
	}
	if !ran {
		return fmt.Errorf("demo: no timeline name or word starts with %q (try -list)", only)
	}
	return nil
}
