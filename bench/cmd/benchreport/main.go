// Command benchreport writes BENCHMARKS.md from the raw `go test -bench`
// output that bench/run.sh collects over several interleaved rounds.
//
// It takes the median of every (benchmark, implementation, unit) over the
// rounds, divides ours by each other implementation measured in the same
// run, checks the targets of issue 5, and appends benchstat's own tables
// (with their confidence intervals) for the record.
//
// Usage (run.sh does this):
//
//	go run ./cmd/benchreport -raw results.txt -benchstat benchstat.txt -out ../BENCHMARKS.md \
//	    -rounds 6 -cores 2 -go "go1.26.8" -cpu "..." -commit abc123 -command "bench/run.sh" -how "..."
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// ours is the impl= value of this library's sub-benchmarks.
const ours = "ours"

// implLabels maps impl= values to what the tables call them.
var implLabels = map[string]string{
	"clientgo":      "client-go",
	"priorityqueue": "controller-runtime priorityqueue",
	"xrate":         "x/time/rate",
	"cenkalti":      "cenkalti/backoff/v5",
	"apimachinery":  "apimachinery wait",
	"timer":         "bare time.AfterFunc",
	"rearmed":       "one re-armed time.AfterFunc",
	"floor":         "machine floor",
	ours:            "ours",
}

// implOrder is the column order of the tables; ours comes last.
var implOrder = []string{"floor", "timer", "rearmed", "clientgo", "priorityqueue", "xrate", "cenkalti", "apimachinery", ours}

// higherIsBetter lists the units where a larger value wins.
var higherIsBetter = map[string]bool{"items/s": true}

// unitOrder is the row order of units within a benchmark's parameters.
var unitOrder = []string{"ns/op", "cpu-ns/op", "faults/kop", "items/s", "ns/attempt", "B/item", "p50-us", "p99-us", "max-us", "goroutines", "cpu-ms/s", "base-cpu-ms/s", "B/op", "allocs/op"}

// series holds every sample of one benchmark row (its name without the impl
// part), by implementation and unit.
type series struct {
	bench  string // e.g. BackoffNext (benchfmt drops the Benchmark prefix)
	params string // e.g. keys=100k/mode=serial ("" when none)
	values map[string]map[string][]float64
}

func (s *series) key() string { return joinKey(s.bench, s.params) }

func joinKey(bench, params string) string {
	if params == "" {
		return bench
	}
	return bench + "/" + params
}

type data struct {
	rows  map[string]*series
	order []string // row keys in first-seen order
	cpu   string
}

func (d *data) median(row, impl, unit string) (float64, bool) {
	s, ok := d.rows[row]
	if !ok {
		return 0, false
	}
	vs := s.values[impl][unit]
	if len(vs) == 0 {
		return 0, false
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2], true
	}
	return (vs[n/2-1] + vs[n/2]) / 2, true
}

func read(path string) (*data, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &data{rows: map[string]*series{}}
	r := benchfmt.NewReader(f, path)
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		if d.cpu == "" {
			d.cpu = strings.TrimSpace(res.GetConfig("cpu"))
		}
		base, parts := res.Name.Parts()
		impl := ""
		var params []string
		for _, p := range parts {
			ps := string(p)
			if strings.HasPrefix(ps, "-") { // GOMAXPROCS
				continue
			}
			ps = strings.TrimPrefix(ps, "/")
			if v, ok := strings.CutPrefix(ps, "impl="); ok {
				impl = v
				continue
			}
			params = append(params, ps)
		}
		if impl == "" {
			continue
		}
		s := &series{bench: strings.TrimPrefix(string(base), "Benchmark"), params: strings.Join(params, "/")}
		if old, ok := d.rows[s.key()]; ok {
			s = old
		} else {
			s.values = map[string]map[string][]float64{}
			d.rows[s.key()] = s
			d.order = append(d.order, s.key())
		}
		if s.values[impl] == nil {
			s.values[impl] = map[string][]float64{}
		}
		for _, v := range res.Values {
			unit, val := v.Unit, v.Value
			if v.OrigUnit != "" {
				unit, val = v.OrigUnit, v.OrigValue
			}
			s.values[impl][unit] = append(s.values[impl][unit], val)
		}
	}
	return d, r.Err()
}

// A target is one row of issue 5's targets table: ours divided by the
// reference implementation must not exceed limit (or, with absolute, ours
// itself must not exceed limit).
type target struct {
	measure    string
	row        string
	unit       string
	ref        string
	refRow     string // the reference's row, if not row (ours against ours in another row)
	limit      float64
	absolute   bool
	zeroAllocs bool
	beatPQ     bool
}

var targets = []target{
	{measure: "`Add`+`Get`+`Done`, serial", row: "QueueAddGetDone/mode=serial", unit: "ns/op", ref: "clientgo", limit: 0.70, zeroAllocs: true, beatPQ: true},
	{measure: "`Add`+`Get`+`Done`, 2 producers + 2 workers (per item)", row: "QueueAddGetDone/mode=2p2w", unit: "ns/op", ref: "clientgo", limit: 0.70, zeroAllocs: true, beatPQ: true},
	{measure: "`Add`+`Get`+`Done` with two priorities (half at -100), serial; client-go adds plainly", row: "QueueAddGetDonePriorities/mode=serial", unit: "ns/op", ref: "clientgo", limit: 1.0, zeroAllocs: true, beatPQ: true},
	{measure: "`Add`+`Get`+`Done` with two priorities, 2 producers + 2 workers (per item)", row: "QueueAddGetDonePriorities/mode=2p2w", unit: "ns/op", ref: "clientgo", limit: 1.0, zeroAllocs: true, beatPQ: true},
	{measure: "`Add`+`Get`+`Done` with two priorities, serial, against controller-runtime's priority queue (issue 21)", row: "QueueAddGetDonePriorities/mode=serial", unit: "ns/op", ref: "priorityqueue", limit: 0.05, zeroAllocs: true},
	{measure: "`Add`+`Get`+`Done` with two priorities, 2p2w, against controller-runtime's priority queue (issue 21)", row: "QueueAddGetDonePriorities/mode=2p2w", unit: "ns/op", ref: "priorityqueue", limit: 0.05, zeroAllocs: true},
	{measure: "`Add`+`Get`+`Done` with two priorities, 2p2w paced at a depth of 1,000, against controller-runtime's priority queue (issue 21)", row: "QueueAddGetDonePriorities/mode=2p2w-depth1000", unit: "ns/op", ref: "priorityqueue", limit: 0.05, zeroAllocs: true},
	{measure: "`Add`+`Get`+`Done` with two priorities, 2p2w paced at a depth of 1,000; client-go adds plainly", row: "QueueAddGetDonePriorities/mode=2p2w-depth1000", unit: "ns/op", ref: "clientgo", limit: 1.0, zeroAllocs: true, beatPQ: true},
	{measure: "`Limiter.Allow`, one goroutine (issue 23)", row: "LimiterAllow/mode=serial", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`Limiter.Allow`, GOMAXPROCS goroutines on one limiter (issue 23)", row: "LimiterAllow/mode=parallel", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`Limiter.Allow` admitting every call (1e9/s, burst 1e6), one goroutine", row: "LimiterAllow/load=admitting/mode=serial", unit: "ns/op", ref: "xrate", limit: 0.45, zeroAllocs: true},
	{measure: "`Limiter.Allow` admitting every call (1e9/s, burst 1e6), GOMAXPROCS goroutines", row: "LimiterAllow/load=admitting/mode=parallel", unit: "ns/op", ref: "xrate", limit: 0.45, zeroAllocs: true},
	{measure: "`Limiter.Wait` that has to wait: allocations (issue 23)", row: "LimiterWait", unit: "allocs/op", ref: "xrate", limit: 0, absolute: true},
	{measure: "`KeyedLimiter.Allow` over 1M keys, against a mutex and a map of x/time/rate limiters (issue 23)", row: "KeyedLimiterAllow/keys=1M", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`KeyedLimiter` heap bytes per key at 1M keys (issue 23)", row: "KeyedLimiterAllow/keys=1M", unit: "B/key", ref: "xrate", limit: 64, absolute: true},
	{measure: "`KeyedLimiter.Allow` over 1M keys with refills (10/s, burst 100), keys in the order first seen, against a mutex and a map of x/time/rate limiters", row: "KeyedLimiterAllow/refill=10/order=seen/keys=1M", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`KeyedLimiter.Allow` over 1M keys with refills (10/s, burst 100), keys in random order, against a mutex and a map of x/time/rate limiters", row: "KeyedLimiterAllow/refill=10/order=random/keys=1M", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`KeyedLimiter` heap bytes per key at 1M keys with refills, keys in the order first seen", row: "KeyedLimiterAllow/refill=10/order=seen/keys=1M", unit: "B/key", ref: "xrate", limit: 40, absolute: true},
	{measure: "`KeyedLimiter` heap bytes per key at 1M keys with refills, keys in random order", row: "KeyedLimiterAllow/refill=10/order=random/keys=1M", unit: "B/key", ref: "xrate", limit: 40, absolute: true},
	{measure: "`Add`+`Get`+`Done` with `WithFairness` over 1,000 keys, serial; reference: ours without fairness", row: "QueueAddGetDoneFairness/keys=1000/mode=serial", refRow: "QueueAddGetDoneFairness/keys=none/mode=serial", unit: "ns/op", ref: "ours", limit: 1.5, zeroAllocs: true},
	{measure: "`Add`+`Get`+`Done` with `WithFairness` over 1,000 keys, 2 producers + 2 workers; reference: ours without fairness", row: "QueueAddGetDoneFairness/keys=1000/mode=2p2w", refRow: "QueueAddGetDoneFairness/keys=none/mode=2p2w", unit: "ns/op", ref: "ours", limit: 1.5, zeroAllocs: true},
	{measure: "`AddAfter` per call", row: "AddAfter", unit: "ns/op", ref: "clientgo", limit: 0.25, zeroAllocs: true, beatPQ: true},
	{measure: "heap bytes per waiting item at 1M", row: "WaitingHeap", unit: "B/item", ref: "clientgo", limit: 0.45, beatPQ: true},
	{measure: "`Backoff.Next`, 100k keys, serial", row: "BackoffNext/keys=100k/mode=serial", unit: "ns/op", ref: "clientgo", limit: 0.75},
	{measure: "`Backoff.Next`, 100k keys, parallel", row: "BackoffNext/keys=100k/mode=parallel", unit: "ns/op", ref: "clientgo", limit: 0.60},
	{measure: "item-exponential `When`, serial", row: "ItemExponentialWhen/mode=serial", unit: "ns/op", ref: "clientgo", limit: 0.60},
	{measure: "item-exponential `When`, parallel", row: "ItemExponentialWhen/mode=parallel", unit: "ns/op", ref: "clientgo", limit: 0.50},
	{measure: "default controller limiter `When`+`Forget`, serial", row: "ControllerLimiterWhenForget/mode=serial", unit: "ns/op", ref: "clientgo", limit: 0.40, zeroAllocs: true},
	{measure: "default controller limiter `When`+`Forget`, parallel", row: "ControllerLimiterWhenForget/mode=parallel", unit: "ns/op", ref: "clientgo", limit: 0.40, zeroAllocs: true},
	{measure: "delivery lateness p99 (vs the bare runtime timer)", row: "Lateness", unit: "p99-us", ref: "timer", limit: 1.10, beatPQ: true},
	{measure: "idle cost of 10,000 queues: goroutines of their own", row: "Idle", unit: "goroutines", ref: "clientgo", limit: 0, absolute: true, beatPQ: true},
}

type verdict struct {
	t                 target
	ref, us, pq       float64
	haveRef, haveUs   bool
	havePQ            bool
	allocs            float64
	haveAllocs        bool
	ratio             float64
	met, beatsPQ, all bool
}

func judge(d *data, t target) verdict {
	v := verdict{t: t}
	refRow := t.row
	if t.refRow != "" {
		refRow = t.refRow
	}
	v.ref, v.haveRef = d.median(refRow, t.ref, t.unit)
	v.us, v.haveUs = d.median(t.row, ours, t.unit)
	v.pq, v.havePQ = d.median(t.row, "priorityqueue", t.unit)
	v.allocs, v.haveAllocs = d.median(t.row, ours, "allocs/op")
	if !v.haveUs || (!t.absolute && !v.haveRef) {
		return v
	}
	if t.absolute {
		v.met = v.us <= t.limit
	} else {
		v.ratio = v.us / v.ref
		v.met = v.ratio <= t.limit
	}
	if t.zeroAllocs && (!v.haveAllocs || v.allocs != 0) {
		v.met = false
	}
	v.beatsPQ = !t.beatPQ || (v.havePQ && v.us < v.pq)
	v.all = v.met && v.beatsPQ
	return v
}

func num(x float64) string {
	switch ax := math.Abs(x); {
	case x == 0:
		return "0"
	case ax >= 1e6:
		return fmt.Sprintf("%.3g", x)
	case ax >= 100:
		return fmt.Sprintf("%.0f", x)
	case ax >= 10:
		return fmt.Sprintf("%.1f", x)
	case ax >= 1:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

// writeTargets writes the targets table; with onlyMeasured it leaves out the
// targets whose row the results do not have (a partial run).
func writeTargets(w io.Writer, d *data, onlyMeasured bool) []verdict {
	fmt.Fprintln(w, "| measure | target | reference | ours | ours/reference | ours allocs/op | priority queue | status |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	var vs []verdict
	for _, t := range targets {
		if _, ok := d.rows[t.row]; onlyMeasured && !ok {
			continue
		}
		v := judge(d, t)
		vs = append(vs, v)
		goal := fmt.Sprintf("≤ %.2f", t.limit)
		if t.absolute {
			goal = fmt.Sprintf("%s ≤ %g", t.unit, t.limit)
		}
		if t.zeroAllocs {
			goal += ", 0 allocs/op"
		}
		if t.beatPQ {
			goal += ", beat priorityqueue"
		}
		cell := func(x float64, ok bool) string {
			if !ok {
				return "—"
			}
			return num(x) + " " + t.unit
		}
		ratio, allocs, status := "—", "—", "no data"
		if v.haveUs && v.haveRef && v.ref != 0 {
			ratio = fmt.Sprintf("%.2f", v.us/v.ref)
		}
		if v.haveAllocs && t.unit == "ns/op" {
			allocs = num(v.allocs)
		}
		if v.haveUs && (t.absolute || v.haveRef) {
			switch {
			case v.all:
				status = "**met**"
			case v.met:
				status = "ratio met, does **not** beat priorityqueue"
			default:
				status = "**NOT met**"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s: %s | %s | %s | %s | %s | %s |\n", t.measure, goal,
			implLabels[t.ref], cell(v.ref, v.haveRef), cell(v.us, v.haveUs), ratio, allocs, cell(v.pq, v.havePQ), status)
	}
	return vs
}

// writeDetails writes one table per benchmark function: the median of every
// unit for every implementation, and ours divided by each of the others.
func writeDetails(w io.Writer, d *data, heading string) {
	var benches []string
	byBench := map[string][]*series{}
	for _, k := range d.order {
		s := d.rows[k]
		if _, ok := byBench[s.bench]; !ok {
			benches = append(benches, s.bench)
		}
		byBench[s.bench] = append(byBench[s.bench], s)
	}
	for _, bench := range benches {
		rows := byBench[bench]
		impls := implsOf(rows)
		var others []string
		hasOurs := slices.Contains(impls, ours)
		for _, im := range impls {
			if im != ours {
				others = append(others, im)
			}
		}
		fmt.Fprintf(w, "\n%s %s\n\n", heading, bench)
		head := "| parameters | unit |"
		sep := "| --- | --- |"
		for _, im := range impls {
			head += " " + implLabels[im] + " |"
			sep += " ---: |"
		}
		if hasOurs {
			for _, im := range others {
				head += " ours/" + label(im) + " |"
				sep += " ---: |"
			}
		}
		fmt.Fprintln(w, head)
		fmt.Fprintln(w, sep)
		for _, s := range rows {
			units := map[string]bool{}
			for _, byUnit := range s.values {
				for u := range byUnit {
					units[u] = true
				}
			}
			for _, u := range unitsOf(units) {
				label := u
				if higherIsBetter[u] {
					label += " (higher is better)"
				}
				params := s.params
				if params == "" {
					params = "—"
				}
				line := fmt.Sprintf("| %s | %s |", params, label)
				for _, im := range impls {
					if m, ok := d.median(s.key(), im, u); ok {
						line += " " + num(m) + " |"
					} else {
						line += " |"
					}
				}
				if hasOurs {
					us, okUs := d.median(s.key(), ours, u)
					for _, im := range others {
						them, ok := d.median(s.key(), im, u)
						if okUs && ok && them != 0 {
							line += fmt.Sprintf(" %.2f |", us/them)
						} else {
							line += " — |"
						}
					}
				}
				fmt.Fprintln(w, line)
			}
		}
	}
}

// label is what the tables call an implementation: its label when it has
// one, else its impl= value as the benchmark names it.
func label(impl string) string {
	if l, ok := implLabels[impl]; ok {
		return l
	}
	return impl
}

// implsOf lists the implementations measured in rows, in implOrder, with
// any implementation implOrder does not name (a benchmark's own baseline)
// before ours, in name order.
func implsOf(rows []*series) []string {
	present := map[string]bool{}
	for _, s := range rows {
		for im, byUnit := range s.values {
			if len(byUnit) > 0 {
				present[im] = true
			}
		}
	}
	var impls, extra []string
	for _, im := range implOrder {
		if present[im] && im != ours {
			impls = append(impls, im)
		}
	}
	for im := range present {
		if !slices.Contains(implOrder, im) {
			extra = append(extra, im)
		}
	}
	slices.Sort(extra)
	impls = append(impls, extra...)
	if present[ours] {
		impls = append(impls, ours)
	}
	return impls
}

// unitsOf orders the units present: unitOrder first, then any other unit a
// benchmark reported (its own metric, such as B/key), in name order.
func unitsOf(present map[string]bool) []string {
	var us, extra []string
	for _, u := range unitOrder {
		if present[u] {
			us = append(us, u)
		}
	}
	for u := range present {
		if !slices.Contains(unitOrder, u) {
			extra = append(extra, u)
		}
	}
	slices.Sort(extra)
	return append(us, extra...)
}

// writeHeadline writes the ratios the README quotes.
func writeHeadline(w io.Writer, d *data) {
	type h struct {
		text, row, unit, ref string
	}
	lines := []h{
		{"`Add`+`Get`+`Done` (serial)", "QueueAddGetDone/mode=serial", "ns/op", "clientgo"},
		{"`Add`+`Get`+`Done` (2 producers, 2 workers)", "QueueAddGetDone/mode=2p2w", "ns/op", "clientgo"},
		{"`AddAfter`, 3M items for every queue", "AddAfter", "ns/op", "clientgo"},
		{"`AddAfter`, CPU time per call of every goroutine", "AddAfter", "cpu-ns/op", "clientgo"},
		{"`AddAfter`, heap already faulted in, 3M items for every queue", "AddAfterPrefaulted", "ns/op", "clientgo"},
		{"heap per waiting item at 1M", "WaitingHeap", "B/item", "clientgo"},
		{"`Backoff.Next`, 100k keys, parallel", "BackoffNext/keys=100k/mode=parallel", "ns/op", "clientgo"},
		{"default controller limiter `When`+`Forget`", "ControllerLimiterWhenForget/mode=serial", "ns/op", "clientgo"},
		{"token bucket `When`", "BucketWhen/mode=serial", "ns/op", "xrate"},
		{"`Retry`, per attempt (1 ns delays: every library arms a timer)", "Retry/delay=1ns", "ns/attempt", "cenkalti"},
		{"`Retry`, per attempt (1 ns delays: every library arms a timer)", "Retry/delay=1ns", "ns/attempt", "apimachinery"},
	}
	for _, l := range lines {
		us, ok1 := d.median(l.row, ours, l.unit)
		them, ok2 := d.median(l.row, l.ref, l.unit)
		if !ok1 || !ok2 || them == 0 {
			continue
		}
		fmt.Fprintf(w, "- %s: ours %s %s, %s %s %s: **%.2f×**.\n",
			l.text, num(us), l.unit, implLabels[l.ref], num(them), l.unit, us/them)
	}
	if _, ok := d.median("Idle", ours, "goroutines"); ok {
		idle := func(impl string) string {
			gr, _ := d.median("Idle", impl, "goroutines")
			cpu, _ := d.median("Idle", impl, "cpu-ms/s")
			base, _ := d.median("Idle", impl, "base-cpu-ms/s")
			return fmt.Sprintf("%s goroutines, %s ms of CPU per second (%s with no queue)", num(gr), num(cpu), num(base))
		}
		fmt.Fprintf(w, "- 10,000 queues, each with one item waiting an hour: ours %s; client-go %s; controller-runtime priorityqueue %s.\n",
			idle(ours), idle("clientgo"), idle("priorityqueue"))
	}
}

// method explains what is compared and how; it does not change between runs.
const method = `## What is compared, and how

- **Queues**: client-go's ` + "`workqueue.NewTypedRateLimitingQueue`" + `, controller-runtime's
  ` + "`priorityqueue.New`" + ` and our ` + "`NewRateLimitingQueue`" + `, each with its default controller limiter and
  with metrics off (an unnamed client-go or controller-runtime queue records no metrics; ours has a no-op
  default), items of type ` + "`int`" + `. Every implementation runs the identical body through one small
  interface (their method sets are the same).
- **Fairness with asynchronous queues**: client-go's ` + "`AddAfter`" + ` hands the item to a goroutine over a
  1000-slot channel, and the priority queue appends it to a buffer that another goroutine flushes. So every
  benchmark that adds waiting items ends its timed region with a barrier: one sentinel item added with a 1 ns
  delay, and a ` + "`Get`" + ` that waits for it. Both process their input in order, so the sentinel comes out only
  after everything before it is in their heap or tree. Ours runs the same barrier (and pays one timer firing,
  amortised over b.N). allocs/op counts allocations on every goroutine, so work done by their background
  goroutines is counted too.
- **2 producers + 2 workers** (` + "`mode=2p2w`" + `): two goroutines add distinct items, two others ` + "`Get`" + ` and
  ` + "`Done`" + ` them; ` + "`ns/op`" + ` is wall time per item, ` + "`cpu-ns/op`" + ` the process's CPU time (getrusage) per item.
  Nothing is queued first, but the producers are not paced and an add costs less than a ` + "`Get`" + ` plus a
  ` + "`Done`" + `, so every queue holds a backlog of tens of thousands of items for most of the run. The machine
  floor of the priority rows is one mutex, one condition variable and two FIFOs with no per-item state (no
  de-duplication): the hand-off any queue built that way pays; the difference between it and a queue is the
  per-item state that de-duplication needs. The priority rows also run paced (` + "`mode=2p2w-depth1000`" + `): the
  producers yield while more than about 1,000 items are queued or being processed, so that every queue is
  measured at the depth the serial rows use, not at a depth that grows with b.N.
- **` + "`AddAfter`" + `**: 3,000,000 calls for every queue, so that all queues reach the same size (a call costs
  more in a larger queue, and with a time-based benchtime the fastest queue would be measured at the largest
  size). ` + "`ns/op`" + ` is wall time; ` + "`cpu-ns/op`" + ` is the process's CPU time (getrusage: every goroutine, the
  garbage collector and the kernel) per call. They differ for client-go, whose ` + "`AddAfter`" + ` is a two-stage
  pipeline: the caller sends the item on a channel and a goroutine files it, on the other core when that core
  is free, so its wall time counts only the slower stage, and depends on what else the machine runs.
- **Memory** (` + "`B/item`" + `): live heap after a full GC with the queue holding n items waiting 1–2 h, minus
  the live heap before the queue was built, divided by n. Between measurements the harness waits until the
  previous queue's memory is collected (a stopped ` + "`time.AfterFunc`" + ` timer keeps its callback, and so its
  queue, reachable until the Go runtime deletes it lazily).
- **Growth**: the queue is filled (untimed) to n waiting items, then ` + "`AddAfter`" + ` of new distinct items is
  timed; it is refilled after every n/4 timed adds, so its size stays within [n, 1.25n]. Each timed stretch of
  n/4 adds ends with the barrier above (timed), and ` + "`cpu-ns/op`" + ` is the process's CPU time over the timed
  stretches.
- **Lateness**: real clock; 1,000 items added 1 ms apart, each with a 10 ms delay, one worker blocked in
  ` + "`Get`" + `; lateness = when ` + "`Get`" + ` returned − (when ` + "`AddAfter`" + ` was called + 10 ms). The floor ("bare
  time.AfterFunc") arms one runtime timer per item whose callback hands the item to the same kind of worker
  over a channel. A second floor ("one re-armed time.AfterFunc") keeps one timer for all items, as our queue
  does, and re-arms it from its callback for the next item.
- **Prefaulted ` + "`AddAfter`" + `**: ` + "`AddAfter`" + ` again, with 3,000,000 calls for every queue, after a ballast of 512 bytes
  per call has been written page by page and freed, so that the queues' allocations reuse memory the process
  already holds (as in a long-running controller) instead of first-touching fresh pages, which is dear on this
  VM. ` + "`faults/kop`" + ` (minor page faults per 1,000 calls) shows whether that held.
- **Idle**: 10,000 queues each holding one item due in an hour; goroutines they keep, and the process's CPU
  time (getrusage) over a 2 s real-time window, next to the same window measured with no queue.
- **Per-key Backoff and limiters**: string keys shaped like ` + "`ns-12/object-345`" + `; the Backoff holds an entry
  for every key before timing (steady state); parallel runs use ` + "`b.RunParallel`" + ` (GOMAXPROCS goroutines).
- **Limiters**: x/time/rate's ` + "`Reserve`" + ` against our token bucket's ` + "`When`" + ` (BucketWhen), its ` + "`Allow`" + ` and
  ` + "`Wait`" + ` against our ` + "`Limiter`" + `'s, and one ` + "`sync.Mutex`" + ` around a ` + "`map[string]*rate.Limiter`" + ` (what services
  write by hand) against our ` + "`KeyedLimiter`" + `; ` + "`B/key`" + ` is the heap the keyed limiter took per key.
- **Retry**: one op is a retried call of a function that fails 9 times and then succeeds; with 0 delays (each
  library handles a zero delay its own way: ours skips the timer, the others arm a 0-length one) and with 1 ns
  delays (every library arms a real timer, already expired when waited on, so nothing sleeps).`

func main() {
	var (
		raw       = flag.String("raw", "results.txt", "raw go test -bench output of all rounds")
		statsFile = flag.String("benchstat", "", "benchstat output to append")
		out       = flag.String("out", "../BENCHMARKS.md", "file to write")
		rounds    = flag.Int("rounds", 0, "rounds run")
		cores     = flag.String("cores", "", "core count")
		goVersion = flag.String("go", "", "Go version")
		cpuFlag   = flag.String("cpu", "", "CPU model name from /proc/cpuinfo (the raw output's cpu line comes first)")
		commit    = flag.String("commit", "", "commit measured")
		command   = flag.String("command", "bench/run.sh", "command that produced the results")
		how       = flag.String("how", "", "how the rounds were run (markdown)")
		partial   = flag.Bool("partial", false, "the results are a partial run (ONLY=...): append them to -out as a section of their own instead of rewriting it")
	)
	flag.Parse()
	d, err := read(*raw)
	if err != nil {
		log.Fatal(err)
	}
	cpu := d.cpu
	switch {
	case cpu == "":
		cpu = *cpuFlag
	case *cpuFlag != "" && *cpuFlag != cpu:
		cpu = fmt.Sprintf("%s (/proc/cpuinfo model name: %s)", cpu, *cpuFlag)
	}
	run := runInfo{
		command: *command, cpu: cpu, cores: *cores, goVersion: *goVersion, rounds: *rounds,
		commit: *commit, how: *how, statsFile: *statsFile,
	}
	if *partial {
		if err := writePartial(*out, d, run); err != nil {
			log.Fatal(err)
		}
		return
	}
	var b bytes.Buffer
	fmt.Fprintln(&b, "# Benchmarks")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "<!-- Generated by bench/run.sh (bench/cmd/benchreport). Do not edit by hand. -->")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "This library side by side with the code it re-implements or competes with, measured in the same run:")
	fmt.Fprintln(&b, "client-go's workqueue and flowcontrol, controller-runtime's priority queue, apimachinery's wait,")
	fmt.Fprintln(&b, "cenkalti/backoff/v5 and golang.org/x/time/rate. Every figure is the median over the rounds; every ratio")
	fmt.Fprintln(&b, "is ours divided by theirs (lower is better, except items/s).")
	fmt.Fprintln(&b)
	writeRunTable(&b, run)
	if *how != "" {
		fmt.Fprintln(&b, "## How it was run")
		fmt.Fprintln(&b)
		fmt.Fprintln(&b, *how)
		fmt.Fprintln(&b)
	}
	fmt.Fprintln(&b, method)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "## Targets")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Issue 5's targets, and those of later issues as named in each row.")
	fmt.Fprintln(&b)
	writeTargets(&b, d, false)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "## Headline")
	fmt.Fprintln(&b)
	writeHeadline(&b, d)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "## Every comparison")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Medians; the ratio columns divide ours by each other implementation.")
	writeDetails(&b, d, "###")
	if err := writeBenchstat(&b, run.statsFile, "## benchstat",
		"`benchstat -col /impl` over the same raw results (bench/results.txt), with its 95% confidence intervals."); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}

// runInfo describes a run: what was run, where and how.
type runInfo struct {
	command, cpu, cores, goVersion, commit, how, statsFile string
	rounds                                                 int
}

// Markers of the section a partial run appends. A full run rewrites the
// whole file, and so drops the section: its rows are then measured afresh.
const (
	generatedLine = "<!-- Generated by bench/run.sh (bench/cmd/benchreport). Do not edit by hand. -->"
	noticeMarker  = "<!-- partial-notice -->"
	partialMarker = "<!-- partial-run: a full bench/run.sh removes this section -->"
)

// writePartial appends to the report at path a section with the results of
// a partial run, replacing the section of an earlier partial run: the rows
// of the full run stay as they were, and a notice at the top says that some
// were re-measured.
func writePartial(path string, d *data, r runInfo) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(old)
	if i := strings.Index(doc, partialMarker); i >= 0 {
		doc = strings.TrimRight(doc[:i], "\n") + "\n"
	}
	var names []string
	for _, k := range d.order {
		if name := d.rows[k].bench; !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	notice := noticeMarker + "\n> " + fmt.Sprintf("Re-measured after this run, alone: %s (see [Re-measured rows](#re-measured-rows) at the end).", strings.Join(names, ", ")) +
		" Where a row appears in both places, the one at the end is newer.\n"
	if i := strings.Index(doc, noticeMarker); i >= 0 {
		end := strings.Index(doc[i:], "\n\n")
		if end < 0 {
			return fmt.Errorf("%s: notice without an end", path)
		}
		doc = doc[:i] + strings.TrimSuffix(notice, "\n") + doc[i+end:]
	} else if i := strings.Index(doc, generatedLine); i >= 0 {
		at := i + len(generatedLine) + 1
		doc = doc[:at] + "\n" + notice + doc[at:]
	} else {
		return fmt.Errorf("%s: not a report written by benchreport (no %q line)", path, generatedLine)
	}
	var b bytes.Buffer
	b.WriteString(doc)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, partialMarker)
	fmt.Fprintln(&b, "## Re-measured rows")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "These benchmark functions were run again after the full run above, by themselves, with every")
	fmt.Fprintln(&b, "implementation they compare, in the same interleaved rounds.")
	fmt.Fprintln(&b)
	writeRunTable(&b, r)
	if r.how != "" {
		fmt.Fprintln(&b, r.how)
		fmt.Fprintln(&b)
	}
	fmt.Fprintln(&b, "### Targets of these rows")
	fmt.Fprintln(&b)
	writeTargets(&b, d, true)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "### Every comparison of these rows")
	writeDetails(&b, d, "####")
	if err := writeBenchstat(&b, r.statsFile, "### benchstat of these rows", ""); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// writeRunTable writes the table that says what was run, where and how.
func writeRunTable(w io.Writer, r runInfo) {
	fmt.Fprintln(w, "| | |")
	fmt.Fprintln(w, "| --- | --- |")
	fmt.Fprintf(w, "| command | `%s` |\n", r.command)
	fmt.Fprintf(w, "| CPU | %s |\n", r.cpu)
	fmt.Fprintf(w, "| cores | %s |\n", r.cores)
	fmt.Fprintf(w, "| Go | %s |\n", r.goVersion)
	fmt.Fprintf(w, "| rounds | %d |\n", r.rounds)
	if r.commit != "" {
		fmt.Fprintf(w, "| commit | %s |\n", r.commit)
	}
	fmt.Fprintln(w)
}

// writeBenchstat appends benchstat's output from path (nothing when path is
// empty) under heading, after intro when there is one.
func writeBenchstat(w io.Writer, path, heading, intro string) error {
	if path == "" {
		return nil
	}
	st, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, heading)
	fmt.Fprintln(w)
	if intro != "" {
		fmt.Fprintln(w, intro)
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "```")
	w.Write(bytes.TrimRight(st, "\n"))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "```")
	return nil
}
