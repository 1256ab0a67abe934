// Command demo prints, instantly, the timelines that Kubernetes' retry
// machinery is known for, reproduced by this library under a fake clock:
// kubelet's CrashLoopBackOff, a controller's requeue backoff, the scheduler's
// pod backoff. Nothing sleeps; every delay is a step of a FakeClock.
//
//	go run ./examples/demo            # every timeline
//	go run ./examples/demo -only NAME # one of them (-list shows the names)
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
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
	only := flag.String("only", "", "run only the timeline with this name")
	list := flag.Bool("list", false, "list the timelines and exit")
	flag.Parse()
	if err := runTimelines(os.Stdout, *only, *list); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func runTimelines(w io.Writer, only string, list bool) error {
	sort.Slice(timelines, func(i, j int) bool { return timelines[i].name < timelines[j].name })
	ran := false
	for _, tl := range timelines {
		if list {
			fmt.Fprintf(w, "%-14s %s\n", tl.name, tl.title)
			continue
		}
		if only != "" && tl.name != only {
			continue
		}
		fmt.Fprintf(w, "== %s: %s\n", tl.name, tl.title)
		tl.run(w)
		fmt.Fprintln(w)
		ran = true
	}
	if only != "" && !ran {
		return fmt.Errorf("demo: no timeline named %q (try -list)", only)
	}
	return nil
}
