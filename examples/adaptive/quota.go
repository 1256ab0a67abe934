package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/internal/sim"
	"github.com/retrykit/backoff/internal/svgplot"
	testingclock "k8s.io/utils/clock/testing"
)

// sharedQuota is the shared-quota scenario: clients clients each make
// perClient requests, one at a time, to a server with a quota of quota
// requests per second (a token bucket holding a second's worth), which
// answers 429 with a Retry-After in whole seconds beyond it. Each request
// takes rtt. A client retries a 429 after an exponential backoff (100 ms,
// doubling, up to 10 s, with 50% jitter), or after the Retry-After when
// useHint is set; with adaptive, each attempt also waits for the client's
// own AdaptiveRate and reports the answer to it.
type sharedQuota struct {
	seed               uint64
	clients, perClient int
	quota              float64
	rtt                time.Duration
	useHint, adaptive  bool
}

// defaultSharedQuota is the shared-quota scenario that TestSharedQuotaTargets
// checks, with seed 1.
var defaultSharedQuota = sharedQuota{seed: 1, clients: 50, perClient: 100, quota: 100, rtt: 20 * time.Millisecond}

// minimum is the least time the quota lets all the requests through in.
func (s sharedQuota) minimum() time.Duration {
	return time.Duration(float64(s.clients*s.perClient) / s.quota * float64(time.Second))
}

// quotaRun is what a run of the scenario observed: the requests sent and
// throttled, in all and in each second, and when the last one succeeded.
type quotaRun struct {
	throttled, sent             int
	completion                  time.Duration
	sentPerSec, throttledPerSec []int
}

// The events of the shared-quota scenario; id is the client.
const (
	evReady = iota // the client has a request to send: it asks its rate
	evSend
	evAnswer
)

// quotaClient is one client of the quota.
type quotaClient struct {
	rate     *backoff.AdaptiveRate // nil without adaptive
	done     int                   // requests that succeeded
	attempt  int                   // 429s of the current request
	accepted bool                  // the answer on its way
	// When the rate last allowed a request, and until when the latest
	// Retry-After holds the client.
	lastSent, hold time.Duration
}

// retryAt returns when a client whose rate refused a request at now is
// worth asking again. A discrete-event simulation cannot block in Wait, so
// it calls Allow again at the instants the rate's documentation says a slot
// comes free: 1/Rate() after the last request allowed, and when the
// Retry-After has passed, the earlier of the two that is still ahead. The
// rate does not change while a client waits (it changes only with answers,
// and a client has none on its way), so these are the instants at which
// Wait would return; a millisecond's poll is the fallback if neither
// instant is ahead.
func (c *quotaClient) retryAt(now time.Duration) time.Duration {
	at := time.Duration(math.MaxInt64)
	for _, free := range [...]time.Duration{c.lastSent + time.Duration(float64(time.Second)/c.rate.Rate()), c.hold} {
		if free > now {
			at = min(at, free)
		}
	}
	if at == math.MaxInt64 {
		return now + time.Millisecond
	}
	return at
}

// run simulates s on a FakeClock set to each event's instant in turn.
func (s sharedQuota) run() quotaRun {
	rng := rand.New(rand.NewPCG(s.seed, 0x9007a))
	clk := testingclock.NewFakeClock(epoch)
	clients := make([]quotaClient, s.clients)
	var q sim.Agenda
	for i := range clients {
		if s.adaptive {
			clients[i].rate = backoff.NewAdaptiveRate(backoff.WithClock(clk))
		}
		q.Schedule(time.Duration(rng.Int64N(int64(10*time.Millisecond))), evReady, i)
	}
	tokens, last := s.quota, time.Duration(0)
	var out quotaRun
	finished := 0
	for q.Len() > 0 && finished < s.clients {
		e := q.Next()
		clk.SetTime(epoch.Add(e.At))
		sec := int(e.At / time.Second)
		c := &clients[e.ID]
		switch e.Kind {
		case evReady:
			if c.rate != nil {
				if !c.rate.Allow() {
					q.Schedule(c.retryAt(e.At), evReady, e.ID)
					continue
				}
				c.lastSent = e.At
			}
			q.Schedule(e.At, evSend, e.ID)
		case evSend:
			out.sent++
			sim.Count(&out.sentPerSec, sec)
			tokens = min(tokens+(e.At-last).Seconds()*s.quota, s.quota)
			last = e.At
			c.accepted = tokens >= 1
			if c.accepted {
				tokens--
			}
			q.Schedule(e.At+s.rtt, evAnswer, e.ID)
		case evAnswer:
			if c.accepted {
				if c.rate != nil {
					c.rate.Succeeded()
				}
				c.done++
				c.attempt = 0
				if c.done == s.perClient {
					finished++
					out.completion = e.At
					continue
				}
				q.Schedule(e.At, evReady, e.ID)
				continue
			}
			out.throttled++
			sim.Count(&out.throttledPerSec, sec)
			// Retry-After: the time until the bucket has a token, in whole
			// seconds, as HTTP sends it.
			hint := time.Duration(math.Ceil(max(1-tokens, 0)/s.quota)) * time.Second
			hint = max(hint, time.Second)
			if c.rate != nil {
				c.rate.Throttled(hint)
				c.hold = max(c.hold, e.At+hint)
			}
			wait := min(100*time.Millisecond<<min(c.attempt, 10), 10*time.Second)
			wait += time.Duration(rng.Float64() * 0.5 * float64(wait))
			if s.useHint {
				wait = hint
			}
			c.attempt++
			q.Schedule(e.At+wait, evReady, e.ID)
		}
	}
	return out
}

// quotaFigures are the four runs the program prints, and the verdicts on
// the targets: AdaptiveRate (with exponential backoff) makes at least 90%
// fewer 429s than exponential backoff alone, and finishes within 1.2 times
// the quota's minimum.
type quotaFigures struct {
	minimum                         time.Duration
	backoff, hinted, adaptive, both quotaRun
	fewer                           float64 // AdaptiveRate's 429s, fewer than backoff's, as a share of them
	completion                      float64 // AdaptiveRate's completion over the minimum
	fewerOK, completionOK           bool
}

// figures runs the four variants of s: exponential backoff, backoff that
// honours Retry-After, and each with an AdaptiveRate.
func (s sharedQuota) figures() quotaFigures {
	variant := func(useHint, adaptive bool) quotaRun {
		v := s
		v.useHint, v.adaptive = useHint, adaptive
		return v.run()
	}
	f := quotaFigures{minimum: s.minimum(),
		backoff: variant(false, false), hinted: variant(true, false),
		adaptive: variant(false, true), both: variant(true, true)}
	f.fewer = 1 - float64(f.adaptive.throttled)/float64(f.backoff.throttled)
	f.completion = float64(f.adaptive.completion) / float64(f.minimum)
	f.fewerOK = f.fewer >= 0.9
	f.completionOK = f.completion <= 1.2
	return f
}

// report prints f as a table, with the targets.
func (s sharedQuota) report(w io.Writer, f quotaFigures) {
	fmt.Fprintf(w, "== shared-quota: %d clients, each an AdaptiveRate, against exponential backoff alone\n", s.clients)
	fmt.Fprintf(w, "%d clients make %d requests each, one at a time (%v a round trip), under a shared quota of %.0f/s (a token bucket of %.0f)\n",
		s.clients, s.perClient, s.rtt, s.quota, s.quota)
	fmt.Fprintf(w, "that answers 429 with a Retry-After in whole seconds; backoff: 100ms doubling to 10s, 50%% jitter. The quota's minimum: %s.\n", secs(f.minimum))
	fmt.Fprintf(w, "  %-36s  429s  sent  done in  × minimum\n", "client")
	for _, v := range []struct {
		name string
		run  quotaRun
	}{{"exponential backoff alone", f.backoff}, {"backoff honouring Retry-After", f.hinted},
		{"AdaptiveRate + exponential backoff", f.adaptive}, {"AdaptiveRate + Retry-After", f.both}} {
		fmt.Fprintf(w, "  %-36s %5d %5d %7.1fs %9.2f×\n", v.name, v.run.throttled, v.run.sent, v.run.completion.Seconds(),
			float64(v.run.completion)/float64(f.minimum))
	}
	fmt.Fprintf(w, "  AdaptiveRate + exponential backoff: %.0f%% fewer 429s than exponential backoff alone (target ≥ 90%%: %s), done in %.2f× the minimum (target ≤ 1.2×: %s).\n",
		100*f.fewer, verdict(f.fewerOK), f.completion, verdict(f.completionOK))
	const start = 3 * time.Second
	fmt.Fprintf(w, "  Of those 429s, %d and %d came in the first %s, while the clients found the quota (each AdaptiveRate in its slow start until its first 429); %d and %d after.\n",
		sim.Sum(f.adaptive.throttledPerSec, 0, start), sim.Sum(f.backoff.throttledPerSec, 0, start), secs(start),
		f.adaptive.throttled-sim.Sum(f.adaptive.throttledPerSec, 0, start), f.backoff.throttled-sim.Sum(f.backoff.throttledPerSec, 0, start))
}

// panels draws the requests sent and the 429s per second, with exponential
// backoff alone and with an AdaptiveRate per client.
func (s sharedQuota) panels(f quotaFigures) []svgplot.Panel {
	xmax := math.Ceil(max(f.backoff.completion, f.adaptive.completion).Seconds()/10) * 10
	n := int(xmax)
	pad := func(counts []int) []float64 {
		ys := svgplot.Floats(counts)
		for len(ys) < n {
			ys = append(ys, math.NaN())
		}
		return ys
	}
	return []svgplot.Panel{
		{Title: "shared quota: requests sent per second, all clients", XMax: xmax, Lines: []svgplot.Series{
			{Name: "quota", Color: "#888", Dash: "5,3", DT: 1, Step: true, YS: svgplot.Constant(n, s.quota)},
			{Name: "exponential backoff alone", Color: "#c0392b", DT: 1, YS: pad(f.backoff.sentPerSec)},
			{Name: "AdaptiveRate + backoff", Color: "#2471a3", DT: 1, YS: pad(f.adaptive.sentPerSec)},
		}},
		{Title: "shared quota: 429 answers per second", XMax: xmax, Lines: []svgplot.Series{
			{Name: "exponential backoff alone", Color: "#c0392b", DT: 1, YS: pad(f.backoff.throttledPerSec)},
			{Name: "AdaptiveRate + backoff", Color: "#2471a3", DT: 1, YS: pad(f.adaptive.throttledPerSec)},
		}},
	}
}
