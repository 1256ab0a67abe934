// Command benchreport writes BENCHMARKS.md from the raw `go test -bench`
// output that bench/run.sh collects over several interleaved rounds.
//
// It takes the median of every (benchmark, implementation, unit) over the
// rounds, divides ours by each other implementation measured in the same
// run, checks the targets, and appends benchstat's own tables (with their
// confidence intervals) for the record.
//
// The report holds tables and the command that produced them, nothing else:
// what each benchmark measures, and why the figures are what they are, is in
// docs/performance.md, which does not change from run to run.
//
// Usage (run.sh does this):
//
//	go run ./cmd/benchreport -raw results.txt -benchstat benchstat.txt -out ../BENCHMARKS.md \
//	    -rounds 6 -cores 2 -go "go1.26.8" -cpu "..." -commit abc123 -command "bench/run.sh" \
//	    -benchtimes "..." -wall 4552 -load-start "3.27 1.92 0.80" -load-end "1.71 1.32 1.19"
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"regexp"
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
	"failsafe":      "failsafe-go",
	"failsafeexec":  "failsafe-go's executor",
	"gobreaker":     "sony/gobreaker v2",
	"aws":           "aws-sdk-go-v2 adaptive mode",
	"nointerceptor": "grpc-go, no interceptor",
	"grpcgo":        "grpc-go's own retry",
	"nohedge":       "ours without WithHedge",
	"plaintimer":    "ours without WithHedge, plus one time.AfterFunc",
	ours:            "ours",
}

// implOrder is the column order of the tables; ours comes last.
var implOrder = []string{"floor", "timer", "rearmed", "clientgo", "priorityqueue", "xrate", "cenkalti", "apimachinery", "failsafe", "failsafeexec", "gobreaker", "aws", "nointerceptor", "grpcgo", "nohedge", "plaintimer", ours}

// higherIsBetter lists the units where a larger value wins.
var higherIsBetter = map[string]bool{"items/s": true, "goodput%": true, "completed%": true}

// unitOrder is the row order of units within a benchmark's parameters.
var unitOrder = []string{"ns/op", "cpu-ns/op", "faults/kop", "items/s", "ns/attempt", "B/item", "p50-us", "p99-us", "max-us", "goroutines", "cpu-ms/s", "base-cpu-ms/s",
	"refused%", "goodput%", "p99x", "drift", "shed%", "limit", "noload-p99-us", "reach%", "recovery-ms", "429s", "done-s", "completed%", "B/op", "allocs/op"}

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
	// byRun holds, for rows measured at more than one run length (run.sh's
	// MICRO_BENCHTIME with several -benchtime values, which it records as
	// a run=... part of the name), the samples of each run length apart:
	// row key, then run length. rows pools them.
	byRun map[string]map[string]*data
	runs  []string // the run lengths, in first-seen order
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
	d := &data{rows: map[string]*series{}, byRun: map[string]map[string]*data{}}
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
		impl, run := "", ""
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
			if v, ok := strings.CutPrefix(ps, "run="); ok {
				run = v
				continue
			}
			params = append(params, ps)
		}
		if impl == "" {
			continue
		}
		bench, joined := strings.TrimPrefix(string(base), "Benchmark"), strings.Join(params, "/")
		d.add(bench, joined, impl, res)
		if run != "" {
			key := joinKey(bench, joined)
			if d.byRun[key] == nil {
				d.byRun[key] = map[string]*data{}
			}
			rd := d.byRun[key][run]
			if rd == nil {
				rd = &data{rows: map[string]*series{}}
				d.byRun[key][run] = rd
			}
			if !slices.Contains(d.runs, run) {
				d.runs = append(d.runs, run)
			}
			rd.add(bench, joined, impl, res)
		}
	}
	return d, r.Err()
}

// add records the values of res, a result of impl, in the row of bench and
// params.
func (d *data) add(bench, params, impl string, res *benchfmt.Result) {
	s := &series{bench: bench, params: params}
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

// A target is one row of the targets table: ours divided by the
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
	{measure: "`Add`+`Get`+`Done` with two priorities, serial, against controller-runtime's priority queue", row: "QueueAddGetDonePriorities/mode=serial", unit: "ns/op", ref: "priorityqueue", limit: 0.05, zeroAllocs: true},
	{measure: "`Add`+`Get`+`Done` with two priorities, 2p2w, against controller-runtime's priority queue", row: "QueueAddGetDonePriorities/mode=2p2w", unit: "ns/op", ref: "priorityqueue", limit: 0.05, zeroAllocs: true},
	{measure: "`Add`+`Get`+`Done` with two priorities, 2p2w paced at a depth of 1,000, against controller-runtime's priority queue", row: "QueueAddGetDonePriorities/mode=2p2w-depth1000", unit: "ns/op", ref: "priorityqueue", limit: 0.05, zeroAllocs: true},
	{measure: "`Add`+`Get`+`Done` with two priorities, 2p2w paced at a depth of 1,000; client-go adds plainly", row: "QueueAddGetDonePriorities/mode=2p2w-depth1000", unit: "ns/op", ref: "clientgo", limit: 1.0, zeroAllocs: true, beatPQ: true},
	{measure: "`Limiter.Allow`, one goroutine", row: "LimiterAllow/mode=serial", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`Limiter.Allow`, GOMAXPROCS goroutines on one limiter", row: "LimiterAllow/mode=parallel", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`Limiter.Allow` admitting every call (1e9/s, burst 1e6), one goroutine", row: "LimiterAllow/load=admitting/mode=serial", unit: "ns/op", ref: "xrate", limit: 0.45, zeroAllocs: true},
	{measure: "`Limiter.Allow` admitting every call (1e9/s, burst 1e6), GOMAXPROCS goroutines", row: "LimiterAllow/load=admitting/mode=parallel", unit: "ns/op", ref: "xrate", limit: 0.45, zeroAllocs: true},
	{measure: "`Limiter.Wait` that has to wait: allocations", row: "LimiterWait", unit: "allocs/op", ref: "xrate", limit: 0, absolute: true},
	{measure: "`KeyedLimiter.Allow` over 1M keys, against a mutex and a map of x/time/rate limiters", row: "KeyedLimiterAllow/keys=1M", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`KeyedLimiter` heap bytes per key at 1M keys", row: "KeyedLimiterAllow/keys=1M", unit: "B/key", ref: "xrate", limit: 64, absolute: true},
	{measure: "`KeyedLimiter.Allow` over 1M keys with refills (10/s, burst 100), keys in the order first seen, against a mutex and a map of x/time/rate limiters", row: "KeyedLimiterAllow/refill=10/order=seen/keys=1M", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`KeyedLimiter.Allow` over 1M keys with refills (10/s, burst 100), keys in random order, against a mutex and a map of x/time/rate limiters", row: "KeyedLimiterAllow/refill=10/order=random/keys=1M", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`KeyedLimiter` heap bytes per key at 1M keys with refills, keys in the order first seen", row: "KeyedLimiterAllow/refill=10/order=seen/keys=1M", unit: "B/key", ref: "xrate", limit: 40, absolute: true},
	{measure: "`KeyedLimiter` heap bytes per key at 1M keys with refills, keys in random order", row: "KeyedLimiterAllow/refill=10/order=random/keys=1M", unit: "B/key", ref: "xrate", limit: 40, absolute: true},
	{measure: "`KeyedLimiter.Allow` over 10k keys with refills (1,000/s, burst 100), keys in the order first seen, against a mutex and a map of x/time/rate limiters", row: "KeyedLimiterAllow/refill=1000/order=seen/keys=10k", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`KeyedLimiter.Allow` over 10k keys with refills (1,000/s, burst 100), keys in random order, against a mutex and a map of x/time/rate limiters", row: "KeyedLimiterAllow/refill=1000/order=random/keys=10k", unit: "ns/op", ref: "xrate", limit: 0.5, zeroAllocs: true},
	{measure: "`Add`+`Get`+`Done` with `WithFairness` over 1,000 keys, serial; reference: ours without fairness", row: "QueueAddGetDoneFairness/keys=1000/mode=serial", refRow: "QueueAddGetDoneFairness/keys=none/mode=serial", unit: "ns/op", ref: "ours", limit: 1.5, zeroAllocs: true},
	{measure: "`Add`+`Get`+`Done` with `WithFairness` over 1,000 keys, 2 producers + 2 workers; reference: ours without fairness", row: "QueueAddGetDoneFairness/keys=1000/mode=2p2w", refRow: "QueueAddGetDoneFairness/keys=none/mode=2p2w", unit: "ns/op", ref: "ours", limit: 1.5, zeroAllocs: true},
	{measure: "`AdaptiveLimiter` `TryAcquire`+`Permit.Record` with room, serial, against failsafe-go's adaptivelimiter", row: "AdaptivePermit/op=try/mode=serial", unit: "ns/op", ref: "failsafe", limit: 0.25, zeroAllocs: true},
	{measure: "`AdaptiveLimiter` `TryAcquire`+`Permit.Record` with room, 2 goroutines, against failsafe-go's adaptivelimiter", row: "AdaptivePermit/op=try/mode=2goroutines", unit: "ns/op", ref: "failsafe", limit: 0.25, zeroAllocs: true},
	{measure: "`AdaptiveLimiter` `Acquire`+`Permit.Record` with room, serial, against failsafe-go's adaptivelimiter", row: "AdaptivePermit/op=acquire/mode=serial", unit: "ns/op", ref: "failsafe", limit: 0.25, zeroAllocs: true},
	{measure: "`AdaptiveLimiter` `Acquire`+`Permit.Record` with room, 2 goroutines, against failsafe-go's adaptivelimiter", row: "AdaptivePermit/op=acquire/mode=2goroutines", unit: "ns/op", ref: "failsafe", limit: 0.25, zeroAllocs: true},
	{measure: "`Throttler` `Allow`+`Record`, serial, against failsafe-go's adaptivethrottler", row: "ThrottlerDecision/mode=serial", unit: "ns/op", ref: "failsafe", limit: 0.5, zeroAllocs: true},
	{measure: "`Throttler` `Allow`+`Record`, 2 goroutines, against failsafe-go's adaptivethrottler", row: "ThrottlerDecision/mode=2goroutines", unit: "ns/op", ref: "failsafe", limit: 0.5, zeroAllocs: true},
	{measure: "`AdaptiveRate` `Allow`+`Succeeded` before any 429, serial: allocations", row: "AdaptiveRateAllow/state=open/mode=serial", unit: "allocs/op", ref: "aws", limit: 0, absolute: true},
	{measure: "`AdaptiveRate` `Allow`+`Succeeded` paced after a 429, serial: allocations", row: "AdaptiveRateAllow/state=paced/mode=serial", unit: "allocs/op", ref: "aws", limit: 0, absolute: true},
	{measure: "`Breaker` `Allow`+`BreakerPermit.Done` of a success, serial, against gobreaker's `Execute` (default Settings)", row: "Breaker/mode=serial", unit: "ns/op", ref: "gobreaker", limit: 0.5, zeroAllocs: true},
	{measure: "`Breaker` `Allow`+`BreakerPermit.Done` of a success, GOMAXPROCS goroutines on one breaker, against gobreaker's `Execute` (default Settings)", row: "Breaker/mode=parallel", unit: "ns/op", ref: "gobreaker", limit: 0.5, zeroAllocs: true},
	{measure: "`Breaker` `Allow`+`BreakerPermit.Done` of a success, serial, against failsafe-go's count-based breaker raw (`TryAcquirePermit`+`RecordSuccess`)", row: "Breaker/mode=serial", unit: "ns/op", ref: "failsafe", limit: 1.0, zeroAllocs: true},
	{measure: "`Breaker` `Allow`+`BreakerPermit.Done` of a success, GOMAXPROCS goroutines on one breaker, against failsafe-go's count-based breaker raw", row: "Breaker/mode=parallel", unit: "ns/op", ref: "failsafe", limit: 1.0, zeroAllocs: true},
	{measure: "`Retry` with `WithPacer(breaker)`, first attempt succeeds, serial, against failsafe-go's executor over its breaker alone (`failsafe.With(cb).Get`, row Breaker/mode=serial)", row: "RetryBreaker", refRow: "Breaker/mode=serial", unit: "ns/op", ref: "failsafeexec", limit: 0.2, zeroAllocs: true},
	{measure: "`Retry` with `WithHedge(1h)`, first attempt succeeds, serial, against a plain `Retry` plus one `time.AfterFunc` armed and stopped", row: "HedgeNotFired", unit: "ns/op", ref: "plaintimer", limit: 1.0},
	{measure: "`Retry` with `WithHedge(1h)`, first attempt succeeds: allocations, against a plain `Retry` plus one `time.AfterFunc` armed and stopped", row: "HedgeNotFired", unit: "allocs/op", ref: "plaintimer", limit: 1.0},
	{measure: "unary gRPC call over bufconn that succeeds at once, through `grpcbackoff`'s interceptor with default options, against the same call with no interceptor", row: "GrpcUnary", unit: "ns/op", ref: "nointerceptor", limit: 1.05},
	{measure: "`AddAfter` per call, queues filled to 3M waiting items", row: "AddAfter", unit: "ns/op", ref: "clientgo", limit: 0.25, zeroAllocs: true, beatPQ: true},
	{measure: "`AddAfter` per call, queues of 10,000 waiting items (a new queue every 10,000 calls, counted)", row: "AddAfterSmall", unit: "ns/op", ref: "clientgo", limit: 0.27, zeroAllocs: true, beatPQ: true},
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
	run               string  // the run length judged, if the row has several
	swing             float64 // ours' largest median ÷ smallest, less 1, over run lengths
}

// swingFlag is the swing between run lengths beyond which a row is flagged.
const swingFlag = 0.15

// judge compares ours with the reference for target t. A row measured at
// several run lengths is judged at each, apart, and the verdict is the
// worst of them, with the run length it came from and how far ours' median
// moved between run lengths (swing).
func judge(d *data, t target) verdict {
	runs := d.byRun[t.row]
	if len(runs) == 0 {
		return judgeOne(d, t)
	}
	var worst verdict
	lo, hi := math.Inf(1), math.Inf(-1)
	first := true
	for _, run := range d.runs {
		rd, ok := runs[run]
		if !ok {
			continue
		}
		v := judgeOne(rd, t)
		if !v.haveUs {
			continue
		}
		lo, hi = min(lo, v.us), max(hi, v.us)
		score := v.us
		if !t.absolute {
			score = v.ratio
		}
		worstScore := worst.us
		if !t.absolute {
			worstScore = worst.ratio
		}
		if first || score > worstScore {
			worst, first = v, false
			worst.run = run
		}
	}
	if first {
		return judgeOne(d, t)
	}
	if lo > 0 {
		worst.swing = hi/lo - 1
	}
	return worst
}

func judgeOne(d *data, t target) verdict {
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
		measure := t.measure
		if v.run != "" {
			measure += fmt.Sprintf(" (worst run length: %s; ours moved %.0f%% between run lengths", v.run, 100*v.swing)
			if v.swing > swingFlag {
				measure += ", **unsteady**"
			}
			measure += ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s: %s | %s | %s | %s | %s | %s |\n", measure, goal,
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
		benchtime = flag.String("benchtimes", "", "the -benchtime of each group of benchmarks")
		extra     = flag.String("extra", "", "extra flags given to the test binary")
		wall      = flag.Int("wall", 0, "wall time of the run, in seconds")
		loadStart = flag.String("load-start", "", "load average (1, 5, 15 min) at the start")
		loadEnd   = flag.String("load-end", "", "load average (1, 5, 15 min) at the end")
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
		commit: *commit, benchtimes: *benchtime, extra: *extra, wall: *wall,
		loadStart: *loadStart, loadEnd: *loadEnd, statsFile: *statsFile,
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
	fmt.Fprintln(&b, generatedLine)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, legend)
	fmt.Fprintln(&b)
	writeRunTable(&b, run)
	fmt.Fprintln(&b, "## Targets")
	fmt.Fprintln(&b)
	writeTargets(&b, d, false)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "## Every comparison")
	writeDetails(&b, d, "###")
	if err := writeBenchstat(&b, run.statsFile, "## benchstat",
		"`benchstat -col /impl` over the same raw results (bench/results.txt), with its 95% confidence intervals."); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}

// legend says how to read the tables.
const legend = "Medians over the interleaved rounds; every ratio is ours divided by the other implementation's median\n" +
	"from the same rounds (lower is better, except items/s). What each benchmark measures:\n" +
	"[docs/performance.md](docs/performance.md)."

// runInfo describes a run: what was run, where and how.
type runInfo struct {
	command, cpu, cores, goVersion, commit string
	benchtimes, extra, loadStart, loadEnd  string
	statsFile                              string
	rounds, wall                           int
}

// Markers of the section a partial run appends. A full run rewrites the
// whole file, and so drops the section: its rows are then measured afresh.
const (
	generatedLine = "<!-- Generated by bench/run.sh (bench/cmd/benchreport). Do not edit by hand. -->"
	noticeMarker  = "<!-- partial-notice -->"
	partialMarker = "<!-- partial-run: a full bench/run.sh removes this section -->"
)

// writePartial appends to the report at path a section with the results of
// a partial run. An earlier partial run's section that measured any of the
// same benchmark functions is replaced; one that measured others stays, so
// that rows re-measured on different occasions all remain. The rows of the
// full run stay as they were, and a notice at the top names every
// benchmark function re-measured since.
func writePartial(path string, d *data, r runInfo) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(old)
	var names []string
	for _, k := range d.order {
		if name := d.rows[k].bench; !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	var kept []string      // earlier sections that measured other functions
	var keptNames []string // and the functions they measured
	if i := strings.Index(doc, partialMarker); i >= 0 {
		sections := strings.Split(doc[i:], partialMarker)[1:]
		doc = strings.TrimRight(doc[:i], "\n") + "\n"
		for _, sec := range sections {
			pattern := partialPattern(sec)
			if pattern == nil || slices.ContainsFunc(names, pattern.MatchString) {
				continue // measured again now, or unreadable: replaced
			}
			kept = append(kept, strings.TrimRight(sec, "\n"))
			keptNames = append(keptNames, strings.Split(strings.Trim(pattern.String(), "^()$"), "|")...)
		}
	}
	all := append(slices.Clone(keptNames), names...)
	notice := noticeMarker + "\n> " + fmt.Sprintf("Re-measured after this run, alone: %s (see the sections \"Re-measured rows\" at the end).", strings.Join(all, ", ")) +
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
	for _, sec := range kept {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + partialMarker + sec + "\n"
	}
	var b bytes.Buffer
	b.WriteString(doc)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, partialMarker)
	fmt.Fprintln(&b, "## Re-measured rows: "+strings.Join(names, ", "))
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Benchmark functions run again by themselves, with every implementation they compare.")
	fmt.Fprintln(&b)
	writeRunTable(&b, r)
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
	// A | in a table cell ends the cell, even inside a code span, unless escaped.
	fmt.Fprintf(w, "| command | `%s` |\n", strings.ReplaceAll(r.command, "|", `\|`))
	fmt.Fprintf(w, "| CPU | %s |\n", r.cpu)
	fmt.Fprintf(w, "| cores | %s |\n", r.cores)
	fmt.Fprintf(w, "| Go | %s |\n", r.goVersion)
	fmt.Fprintf(w, "| rounds | %d |\n", r.rounds)
	if r.commit != "" {
		fmt.Fprintf(w, "| commit | %s |\n", r.commit)
	}
	if r.benchtimes != "" {
		fmt.Fprintf(w, "| benchtimes | %s |\n", r.benchtimes)
	}
	extra := r.extra
	if extra == "" {
		extra = "none"
	}
	fmt.Fprintf(w, "| extra flags | `%s` |\n", extra)
	if r.wall > 0 {
		fmt.Fprintf(w, "| wall time | %d s |\n", r.wall)
	}
	if r.loadStart != "" || r.loadEnd != "" {
		fmt.Fprintf(w, "| load average (1, 5, 15 min), start / end | %s / %s |\n", r.loadStart, r.loadEnd)
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

// partialPattern returns the ONLY pattern of a partial run's section, read
// from its command line (`ONLY='A\|B' ...`), as a regular expression that
// matches a whole benchmark function name; nil if there is none.
func partialPattern(section string) *regexp.Regexp {
	m := regexp.MustCompile("ONLY='([^']*)'").FindStringSubmatch(section)
	if m == nil {
		return nil
	}
	re, err := regexp.Compile("^(" + strings.ReplaceAll(m[1], `\|`, "|") + ")$")
	if err != nil {
		return nil
	}
	return re
}
