package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/internal/sim"
	"github.com/retrykit/backoff/internal/svgplot"
	testingclock "k8s.io/utils/clock/testing"
)

// outage is the outage scenario: Poisson requests at rate per second, each
// asked of a Throttler(k, window) and, if allowed, sent to a backend that
// rejects reject of them from outageAt for outageFor, and none otherwise.
// With capacity > 0 the backend instead accepts, during the outage, up to
// capacity requests per second (a token bucket of a tenth of a second's
// worth) and rejects the rest.
type outage struct {
	seed                uint64
	rate                float64
	k                   float64
	window              time.Duration
	reject              float64
	capacity            float64
	outageAt, outageFor time.Duration
	end                 time.Duration
}

// defaultOutage is the outage scenario that TestOutageTargets checks, with
// seed 1.
var defaultOutage = outage{seed: 1, rate: 100, k: 2, window: 2 * time.Second, reject: 0.8,
	outageAt: 30 * time.Second, outageFor: 60 * time.Second, end: 150 * time.Second}

// outageRun counts, in each second, the calls of Allow, those it let
// through, and those the backend accepted.
type outageRun struct {
	requests, sent, accepted []int
}

// run simulates s on a FakeClock set to each request's instant in turn. The
// seed draws the arrivals and the backend's answers; the Throttler's own
// draws are seeded from the clock's time at construction, the same epoch for
// every seed.
func (s outage) run() outageRun {
	rng := rand.New(rand.NewPCG(s.seed, 0x07a9e))
	clk := testingclock.NewFakeClock(epoch)
	th := backoff.NewThrottler(s.k, s.window, backoff.WithClock(clk))
	n := int(s.end/time.Second) + 1
	out := outageRun{make([]int, n), make([]int, n), make([]int, n)}
	mean := time.Duration(float64(time.Second) / s.rate)
	tokens, last := s.capacity/10, time.Duration(0)
	// One request at a time, and nothing else happens: the arrivals are the
	// events, in order, with no agenda.
	for at := sim.Exponential(rng, mean); at < s.end; at += sim.Exponential(rng, mean) {
		clk.SetTime(epoch.Add(at))
		sec := at / time.Second
		out.requests[sec]++
		if !th.Allow() {
			continue
		}
		out.sent[sec]++
		ok := at < s.outageAt || at >= s.outageAt+s.outageFor
		if !ok && s.capacity > 0 {
			tokens = min(tokens+(at-last).Seconds()*s.capacity, s.capacity/10)
			last = at
			if ok = tokens >= 1; ok {
				tokens--
			}
		} else if !ok {
			ok = rng.Float64() >= s.reject
		}
		if ok {
			out.accepted[sec]++
		}
		th.Record(ok)
	}
	return out
}

// outageFigures are the figures the program prints: during the outage, the
// requests, those that reached the backend and those it accepted; and how
// long after the recovery the first second came in which at least 95% of
// the requests reached it (-1: never). The target is that second within
// 10 s. capacityRatio is, for the same outage against a backend of a fifth
// of the capacity instead, the requests that reached it from two windows
// into the outage over k times those it accepted: the target is ≤ 1.1.
type outageFigures struct {
	requests, sent, accepted int
	back                     time.Duration
	backOK                   bool
	capacity                 float64
	capacitySent             int
	capacityAccepted         int
	capacityRatio            float64
	capacityOK               bool
}

func (s outage) figures(r outageRun) outageFigures {
	from, to := s.outageAt, s.outageAt+s.outageFor
	f := outageFigures{requests: sim.Sum(r.requests, from, to), sent: sim.Sum(r.sent, from, to), accepted: sim.Sum(r.accepted, from, to), back: -1}
	for sec := to / time.Second; sec < s.end/time.Second; sec++ {
		if float64(r.sent[sec]) >= 0.95*float64(r.requests[sec]) {
			f.back = sec*time.Second + time.Second - to
			break
		}
	}
	f.backOK = f.back >= 0 && f.back <= 10*time.Second

	c := s
	c.capacity = (1 - s.reject) * s.rate
	cr := c.run()
	f.capacity = c.capacity
	f.capacitySent, f.capacityAccepted = sim.Sum(cr.sent, from+2*s.window, to), sim.Sum(cr.accepted, from+2*s.window, to)
	f.capacityRatio = float64(f.capacitySent) / (s.k * float64(f.capacityAccepted))
	f.capacityOK = f.capacityRatio <= 1.1
	return f
}

// report prints f, with the target.
func (s outage) report(w io.Writer, f outageFigures) {
	fmt.Fprintf(w, "== outage: a Throttler(k=%g, window %v) in front of a backend that rejects %.0f%% from %s to %s\n",
		s.k, s.window, 100*s.reject, secs(s.outageAt), secs(s.outageAt+s.outageFor))
	fmt.Fprintf(w, "Poisson requests at %.0f/s; a request the throttler rejects fails locally.\n", s.rate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "  reached the backend during the outage\t%d of %d requests = %.1f%% (%d accepted)\t–\n",
		f.sent, f.requests, 100*float64(f.sent)/float64(f.requests), f.accepted)
	back := "never"
	if f.back >= 0 {
		back = secs(f.back)
	}
	fmt.Fprintf(tw, "  full traffic after the recovery\t%s (first second with ≥ 95%% of requests sent)\t≤ 10s\t%s\n", back, verdict(f.backOK))
	fmt.Fprintf(tw, "  same outage, backend serving %.0f/s: reached ÷ (k × accepted)\t%d ÷ (%g × %d) = %.3f×, from 2 windows in\t≤ 1.1×\t%s\n",
		f.capacity, f.capacitySent, s.k, f.capacityAccepted, f.capacityRatio, verdict(f.capacityOK))
	tw.Flush()
	fmt.Fprintf(w, "  Against the backend that rejects %.0f%% of what it is sent, reached ÷ (k × accepted) = %.2f×: it accepts a fixed\n"+
		"  share, so the ratio is at least 1/(k × %.1f) = %.2g whatever the throttler does; against a backend of reduced capacity it settles at 1.\n",
		100*s.reject, float64(f.sent)/(s.k*float64(f.accepted)), 1-s.reject, 1/(s.k*(1-s.reject)))
}

// panels draws the requests, those sent and those accepted, per second.
func (s outage) panels(r outageRun) []svgplot.Panel {
	n := int(s.end / time.Second)
	return []svgplot.Panel{{Title: "outage: requests per second through the Throttler", XMax: s.end.Seconds(),
		Shade: [2]float64{s.outageAt.Seconds(), (s.outageAt + s.outageFor).Seconds()}, ShadeLabel: fmt.Sprintf("backend rejects %.0f%%", 100*s.reject),
		Lines: []svgplot.Series{
			{Name: "requests", Color: "#888", DT: 1, YS: svgplot.Floats(r.requests[:n])},
			{Name: "sent to the backend", Color: "#e67e22", DT: 1, YS: svgplot.Floats(r.sent[:n])},
			{Name: "accepted", Color: "#2471a3", DT: 1, YS: svgplot.Floats(r.accepted[:n])},
		}}}
}
