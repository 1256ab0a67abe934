package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// The per-key Backoff (client-go's flowcontrol.Backoff): work gated on a
// ticker, and kubelet's CrashLoopBackOff.

func init() {
	register("backoff-ticker",
		"client-go flowcontrol.Backoff, NewBackOff(5s, 60s), gating work on a 1 s ticker: runs 1, 5, 10, 20, 40, 60, 60 s apart (a real clock's log: 6, 11, 21, 41 s; see the note)",
		runTickerGated)
	register("kubelet-crashloop",
		"kubelet CrashLoopBackOff, NewBackOff(10s, 300s): restarts 10, 20, 40, 80, 160, 300, 300 s after each crash; 10 s again after >10 min up",
		runCrashLoop)
}

// demoEpoch is where the fake clocks start; the tables print offsets from it.
var demoEpoch = time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)

// A tickerRun is one run of the work in the ticker-gated loop.
type tickerRun struct {
	at, gap, backoff time.Duration
}

// tickerGated runs the ticker-gated loop for n runs: a 1 s ticker; on each tick, if
// IsInBackOffSince(id, lastDo) skip, else do the work, Next(id, now), and
// lastDo = now + lag. The gap is the time from the previous lastDo, as the
// loop logs it.
func tickerGated(lag time.Duration, n int) []tickerRun {
	clock := testingclock.NewFakeClock(demoEpoch)
	b := backoff.NewBackOff(5*time.Second, 60*time.Second, backoff.WithClock(clock))
	const id = "test"
	lastDo := clock.Now()
	tick := demoEpoch
	var runs []tickerRun
	for len(runs) < n {
		tick = tick.Add(time.Second)
		clock.SetTime(tick)
		if b.IsInBackOffSince(id, lastDo) {
			continue
		}
		now := clock.Now()
		gap := now.Sub(lastDo)
		b.Next(id, now)
		runs = append(runs, tickerRun{at: now.Sub(demoEpoch), gap: gap, backoff: b.Get(id)})
		clock.Step(lag)
		lastDo = clock.Now()
	}
	return runs
}

func runTickerGated(w io.Writer) {
	table := func(runs []tickerRun) {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "run\tat (s)\tgap (s)\tbackoff (s)\t")
		for i, r := range runs {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t\n", i+1, seconds(r.at), seconds(r.gap), seconds(r.backoff))
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "Ticks exactly on the second, lastDo = the tick's time:")
	table(tickerGated(0, 7))
	fmt.Fprintln(w, "The same loop on a real clock logs runs at 1, 6, 11, 21, 41 s: it read lastDo a moment after")
	fmt.Fprintln(w, "the tick, so the tick at the window's end came a hair early relative to it,")
	fmt.Fprintln(w, "was still in backoff, and the work slipped one tick. With a 1 ms lag:")
	table(tickerGated(time.Millisecond, 6))
	fmt.Fprintln(w, "Numbers: client-go's util/flowcontrol.Backoff (kubelet's image pull back-off uses the same")
	fmt.Fprintln(w, "type), with the initial and maximum durations the caller picks, here 5 s and 60 s.")
}

// A crashRestart is one restart in the kubelet model.
type crashRestart struct {
	at, waited, backoff time.Duration
	attempts            int
	ranFor              time.Duration // how long it ran before crashing again
}

// crashLoop models kubelet's sync loop for one container: a sync on every
// whole second from t = 0; the container starts at t = 0 and crashes at once.
// At a sync, a container whose crash time has come is exited with FinishedAt =
// the crash time, and kubelet's doBackOff decides: if
// IsInBackOffSince(key, FinishedAt) it waits for a later sync, otherwise it
// calls Next(key, FinishedAt) and restarts the container now, which then runs
// for runs[i] after restart i (0: crashes at once).
func crashLoop(runs []time.Duration) []crashRestart {
	clock := testingclock.NewFakeClock(demoEpoch)
	b := backoff.NewBackOff(10*time.Second, 300*time.Second, backoff.WithClock(clock))
	const key = "default/web_app" // kubelet keys by pod and container
	finishedAt := demoEpoch
	var restarts []crashRestart
	for len(restarts) < len(runs) {
		now := clock.Now()
		if !finishedAt.After(now) && !b.IsInBackOffSince(key, finishedAt) {
			b.Next(key, finishedAt)
			ran := runs[len(restarts)]
			restarts = append(restarts, crashRestart{
				at: now.Sub(demoEpoch), waited: now.Sub(finishedAt),
				backoff: b.Get(key), attempts: b.Attempts(key), ranFor: ran,
			})
			finishedAt = now.Add(ran)
		}
		clock.Step(time.Second)
	}
	return restarts
}

// crashLoopRuns is the demo's scenario: a container that crashes at once,
// eight times, then runs 10 min 1 s (longer than 2×max = 600 s, so its entry
// expires), then crash-loops again.
var crashLoopRuns = []time.Duration{0, 0, 0, 0, 0, 0, 0, 10*time.Minute + time.Second, 0, 0, 0}

func runCrashLoop(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "restart\tat (s)\twaited (s)\tbackoff (s)\tattempts\t  then")
	for i, r := range crashLoop(crashLoopRuns) {
		then := "crashes at once"
		if r.ranFor > 0 {
			then = "runs " + seconds(r.ranFor) + " s"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t  %s\n", i+1, seconds(r.at), seconds(r.waited), seconds(r.backoff), r.attempts, then)
	}
	tw.Flush()
	fmt.Fprintln(w, "Syncs every 1 s; waited = restart - FinishedAt. Restart 9 waits no time:")
	fmt.Fprintln(w, "the entry was last updated 601 s before the crash (> 2×300 s), so it expired.")
	fmt.Fprintln(w, "Numbers: kubelet's container restart back-off, 10 s doubling to 300 s (kubelet's defaults")
	fmt.Fprintln(w, "in Kubernetes releases to date; recent ones add alpha feature gates to lower them), on a")
	fmt.Fprintln(w, "flowcontrol.Backoff, whose entries expire 2×300 s after their last update.")
}
