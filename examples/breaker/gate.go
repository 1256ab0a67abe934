package main

import (
	"context"
	"errors"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/internal/sim"
	testingclock "k8s.io/utils/clock/testing"
)

// gate is a backoff.Breaker as the simulations' sim.Gate: it keeps the
// permit of each attempt it let through until the attempt's outcome, and
// records the breaker's changes of state with their instants.
type gate struct {
	b       *backoff.Breaker
	permits map[int]backoff.BreakerPermit
	changes []change
}

// change is a change of the breaker's state, at an instant of the run.
type change struct {
	at time.Duration
	to backoff.BreakerState
}

// errFailed is the error of a failed attempt.
var errFailed = errors.New("backend failed")

// newGate returns a gate around a new breaker on clk, whose instants count
// from the clock's time now, with opts on top of the breaker's defaults
// (but for the open time's jitter).
func newGate(clk *testingclock.FakeClock, opts ...backoff.Option) *gate {
	start := clk.Now()
	g := &gate{permits: map[int]backoff.BreakerPermit{}}
	// The default schedule without its jitter, drawn from a source no seed
	// sets: a seed then always gives the same figures.
	opts = append([]backoff.Option{backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: time.Second, Factor: 2, Cap: 4 * time.Second})}, opts...)
	opts = append(opts, backoff.WithClock(clk), backoff.WithBreakerStateChange(func(_, to backoff.BreakerState) {
		g.changes = append(g.changes, change{clk.Since(start), to})
	}))
	g.b = backoff.NewBreaker(opts...)
	return g
}

func (g *gate) Allow(id int) (time.Duration, bool) {
	p, err := g.b.Allow()
	if err != nil {
		var hint *backoff.RetryAfterError
		if errors.As(err, &hint) {
			return hint.Delay, false
		}
		return 0, false
	}
	g.permits[id] = p
	return 0, true
}

func (g *gate) Done(id int, o sim.Outcome) {
	p := g.permits[id]
	delete(g.permits, id)
	switch o {
	case sim.Success:
		p.Done(context.Background(), nil)
	case sim.Failure:
		p.Done(context.Background(), errFailed)
	default:
		p.Release()
	}
}

// trips returns the instants at which the breaker opened from closed.
func (g *gate) trips() []time.Duration {
	var ts []time.Duration
	last := backoff.BreakerClosed
	for _, c := range g.changes {
		if c.to == backoff.BreakerOpen && last == backoff.BreakerClosed {
			ts = append(ts, c.at)
		}
		last = c.to
	}
	return ts
}

// states returns the breaker's state over each second of [0, end):
// 0 closed, 1 half-open, 2 open, the worst it was in that second.
func (g *gate) states(end time.Duration) []float64 {
	level := map[backoff.BreakerState]float64{backoff.BreakerClosed: 0, backoff.BreakerHalfOpen: 1, backoff.BreakerOpen: 2}
	ys := make([]float64, int(end/time.Second))
	cur, i := 0.0, 0
	for s := range ys {
		ys[s] = cur
		for ; i < len(g.changes) && g.changes[i].at < time.Duration(s+1)*time.Second; i++ {
			cur = level[g.changes[i].to]
			ys[s] = max(ys[s], cur)
		}
	}
	return ys
}

// budget returns the retry budget of the scenarios, on clk: 10% of the
// calls plus 5 retries per second (1% of the outage's calls), over a 1 s
// window.
func budget(clk *testingclock.FakeClock) *backoff.RetryBudget {
	return backoff.NewRetryBudget(0.1, 5, time.Second, backoff.WithClock(clk))
}
