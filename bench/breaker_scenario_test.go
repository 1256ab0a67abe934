package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The circuit breakers' scenarios, driven in real time: sony/gobreaker and
// failsafe-go read the wall clock, so every breaker runs on it alike, with
// every duration of the scenarios and of the breakers' settings divided by
// breakerScale (a 60 s outage lasts 600 ms, a 10 s window 100 ms, a 1 s
// open time 10 ms). One driver calls every breaker in turn at each tick, so
// that all of them see the same backend at the same moments; each has its
// own counters.
const breakerScale = 100

// scaled divides a duration of the full-size scenario by breakerScale.
func scaled(d time.Duration) time.Duration { return d / breakerScale }

// scenarioBreaker is one breaker under TestBreakerScenarios.
type scenarioBreaker interface {
	// call asks the breaker whether a call may be made; if so, it calls
	// backend and reports its error to the breaker. It returns whether the
	// breaker refused the call (backend was not called).
	call(backend func() error) (refused bool)
	// trips returns how many times the breaker has opened from its closed
	// state (not counting a failed probe that opens it again).
	trips() int64
}

// breakerScenarioImpls are the breakers of TestBreakerScenarios, each
// configured as close to our defaults, scaled, as its API allows (see
// ours_breaker_test.go and theirs_breaker_test.go).
var breakerScenarioImpls []impl[func() scenarioBreaker]

// The backend's errors: a failure while it is down, and a timeout.
var (
	errBackendDown    = errors.New("bench: backend down")
	errBackendTimeout = fmt.Errorf("bench: backend: %w", context.DeadlineExceeded)
)

// The scenarios, at full size (the durations are scaled when they run):
//   - Outage: the backend fails every call for outageDown, then recovers;
//     each breaker is called once per outageTick of real time (every
//     100 ms at full size).
//   - Blip: one call in blipEvery (0.14%) times out for blipLen, at
//     blipRate calls per second of full-size time, between healthy phases;
//     each tick's calls go in a burst.
//   - Slow and sparse: a backend that fails every call, called once every
//     sparseGap, sparseCalls times.
const (
	outageTick   = time.Millisecond // real time
	outageBefore = 10 * time.Second
	outageDown   = 60 * time.Second
	outageAfter  = 40 * time.Second // the recovery observed, at most

	blipTick   = time.Millisecond // real time
	blipRate   = 840
	blipEvery  = 714
	blipBefore = 10 * time.Second
	blipLen    = 10 * time.Second
	blipAfter  = 10 * time.Second

	sparseGap   = 19 * time.Second
	sparseCalls = 8
)

// breakerFigures are one breaker's figures over the three scenarios.
type breakerFigures struct {
	name string

	outageCalls, outageReached int64 // calls made while the backend was down, and those let through
	outageTripped              bool
	recovery                   time.Duration // from the recovery until full traffic; -1: not within outageAfter

	blipCalls, blipRefused int64 // from the blip's start to the end of the run
	blipTrips              int64 // over the whole run

	sparseFirstTrip int   // the failure at which it first tripped; 0: never
	sparseReached   int64 // calls that reached the backend
}

// TestBreakerScenarios runs ours, sony/gobreaker and failsafe-go's
// breakers through the outage, the blip and the slow and sparse failures,
// in real time at 1/breakerScale of the full size (about 3 s), prints their
// figures and checks what holds however loaded the machine is. It is
// skipped with -short.
func TestBreakerScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time scenarios of a few seconds; skipped with -short")
	}
	if len(breakerScenarioImpls) == 0 {
		t.Fatal("no breaker registered")
	}
	figs := make([]breakerFigures, len(breakerScenarioImpls))
	for i, im := range breakerScenarioImpls {
		figs[i].name = im.name
	}
	outageScenario(figs)
	blipScenario(figs)
	sparseScenario(figs)
	t.Log(breakerTable(figs))

	for _, f := range figs {
		switch f.name {
		case "ours":
			if !f.outageTripped || f.recovery < 0 {
				t.Errorf("ours in the outage: tripped %v, recovery %v; want a trip and full traffic within %v of the recovery",
					f.outageTripped, f.recovery, scaled(outageAfter))
			}
			if f.blipTrips != 0 || f.blipRefused != 0 {
				t.Errorf("ours in the blip: %d trips, %d calls refused; want none", f.blipTrips, f.blipRefused)
			}
			if f.sparseFirstTrip != 5 {
				t.Errorf("ours under slow and sparse failures first tripped at failure %d, want 5 (the count does not decay)", f.sparseFirstTrip)
			}
		case "gobreaker":
			// Its consecutive-failure count rolls out of its window with the
			// buckets, and the failures are two windows apart.
			if f.sparseFirstTrip != 0 {
				t.Errorf("gobreaker with a rolling window under slow and sparse failures tripped at failure %d; want never", f.sparseFirstTrip)
			}
		case "gobreaker-default":
			// No interval: its counts are never cleared; it trips on more
			// than 5 failures in a row.
			if f.sparseFirstTrip != 6 {
				t.Errorf("gobreaker's defaults under slow and sparse failures first tripped at failure %d, want 6", f.sparseFirstTrip)
			}
		case "failsafe":
			if f.sparseFirstTrip != 0 {
				t.Errorf("failsafe-go's rate breaker under slow and sparse failures tripped at failure %d; want never (20 executions per window)", f.sparseFirstTrip)
			}
		case "failsafe-consecutive":
			if f.sparseFirstTrip != 5 {
				t.Errorf("failsafe-go's count breaker under slow and sparse failures first tripped at failure %d, want 5", f.sparseFirstTrip)
			}
		}
	}
}

// newScenarioBreakers builds a fresh breaker of every implementation.
func newScenarioBreakers() []scenarioBreaker {
	bs := make([]scenarioBreaker, len(breakerScenarioImpls))
	for i, im := range breakerScenarioImpls {
		bs[i] = im.make()
	}
	return bs
}

// ticks calls at(elapsed) at every tick from now until total has passed,
// on an absolute schedule: a tick that comes late is not made up for.
func ticks(tick, total time.Duration, at func(elapsed time.Duration)) {
	start := time.Now()
	for next := tick; ; next += tick {
		elapsed := time.Since(start)
		if elapsed >= total {
			return
		}
		at(elapsed)
		if wait := next - time.Since(start); wait > 0 {
			time.Sleep(wait)
		} else {
			next = time.Since(start) // late: the next tick is one tick from now
		}
	}
}

// outageScenario: healthy, down for outageDown, healthy again; one call per
// breaker per tick. Recovery is the time from the backend's recovery until
// the first call after which the breaker refused nothing to the end.
func outageScenario(figs []breakerFigures) {
	bs := newScenarioBreakers()
	downFrom, downUntil := scaled(outageBefore), scaled(outageBefore+outageDown)
	total := downUntil + scaled(outageAfter)
	lastRefused := make([]time.Duration, len(bs)) // after the recovery; -1: none
	firstAfter := make([]time.Duration, len(bs))  // the first call let through after lastRefused
	for i := range lastRefused {
		lastRefused[i], firstAfter[i] = -1, -1
	}
	ticks(outageTick, total, func(now time.Duration) {
		down := now >= downFrom && now < downUntil
		backend := func() error {
			if down {
				return errBackendDown
			}
			return nil
		}
		for i, b := range bs {
			refused := b.call(backend)
			switch {
			case down:
				figs[i].outageCalls++
				if !refused {
					figs[i].outageReached++
				}
			case now >= downUntil && refused:
				lastRefused[i], firstAfter[i] = now, -1
			case now >= downUntil && firstAfter[i] < 0:
				firstAfter[i] = now
			}
		}
	})
	for i, b := range bs {
		figs[i].outageTripped = b.trips() > 0
		switch {
		case lastRefused[i] < 0:
			figs[i].recovery = 0
		case firstAfter[i] < 0:
			figs[i].recovery = -1
		default:
			figs[i].recovery = firstAfter[i] - downUntil
		}
	}
}

// blipScenario: blipRate calls per second (of full-size time), healthy but
// for one call in blipEvery timing out during the blip; the calls of each
// tick go in a burst.
func blipScenario(figs []breakerFigures) {
	bs := newScenarioBreakers()
	from, until := scaled(blipBefore), scaled(blipBefore+blipLen)
	total := until + scaled(blipAfter)
	perTick := int(blipRate * breakerScale * blipTick / time.Second)
	inBlip := make([]int, len(bs))
	ticks(blipTick, total, func(now time.Duration) {
		blip := now >= from && now < until
		for i, b := range bs {
			for range perTick {
				refused := b.call(func() error {
					if !blip {
						return nil
					}
					inBlip[i]++
					if inBlip[i]%blipEvery == 0 {
						return errBackendTimeout
					}
					return nil
				})
				if now >= from {
					figs[i].blipCalls++
					if refused {
						figs[i].blipRefused++
					}
				}
			}
		}
	})
	for i, b := range bs {
		figs[i].blipTrips = b.trips() // none before the blip: the backend was healthy
	}
}

// sparseScenario: a backend that fails every call, called once every
// sparseGap (scaled), sparseCalls times.
func sparseScenario(figs []breakerFigures) {
	bs := newScenarioBreakers()
	failures := make([]int, len(bs))
	for n := range sparseCalls {
		if n > 0 {
			time.Sleep(scaled(sparseGap))
		}
		for i, b := range bs {
			refused := b.call(func() error { return errBackendDown })
			if refused {
				continue
			}
			figs[i].sparseReached++
			failures[i]++
			if figs[i].sparseFirstTrip == 0 && b.trips() > 0 {
				figs[i].sparseFirstTrip = failures[i]
			}
		}
	}
}

// breakerTable formats the figures, one line per breaker.
func breakerTable(figs []breakerFigures) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nbreaker scenarios, real time at 1/%d scale (durations below at full size)\n", breakerScale)
	fmt.Fprintf(&sb, "%-21s | %-30s | %-26s | %-28s\n", "", "outage (60 s down)", "blip (0.14% timeouts)", "slow and sparse (every 19 s)")
	fmt.Fprintf(&sb, "%-21s | %9s %20s | %6s %19s | %14s %13s\n", "breaker",
		"reached", "full traffic after", "trips", "refused locally", "first trip at", "calls reached")
	for _, f := range figs {
		reached := fmt.Sprintf("%.1f%%", 100*float64(f.outageReached)/float64(max(f.outageCalls, 1)))
		recovery := "> " + outageAfter.String()
		if f.recovery >= 0 {
			recovery = (f.recovery * breakerScale).Round(100 * time.Millisecond).String()
		}
		if !f.outageTripped {
			recovery = "never tripped"
		}
		refused := fmt.Sprintf("%.2f%%", 100*float64(f.blipRefused)/float64(max(f.blipCalls, 1)))
		first := "never"
		if f.sparseFirstTrip > 0 {
			first = fmt.Sprintf("failure %d", f.sparseFirstTrip)
		}
		fmt.Fprintf(&sb, "%-21s | %9s %20s | %6d %19s | %14s %8d of %d\n", f.name,
			reached, recovery, f.blipTrips, refused, first, f.sparseReached, sparseCalls)
	}
	fmt.Fprintf(&sb, "reached: share of the calls made while the backend was down that the breaker let through;\n")
	fmt.Fprintf(&sb, "full traffic after: from the recovery until the first call after which nothing was refused;\n")
	fmt.Fprintf(&sb, "refused locally: share of the calls from the blip's start to 10 s after its end.")
	return sb.String()
}
