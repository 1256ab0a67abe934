package sim

import (
	"math/rand/v2"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// This file is the call model of the breaker scenarios: calls that retry,
// hedge, spend a retry budget and ask a circuit breaker before each
// attempt, as the library's Retry does, against a backend whose answers
// the scenario draws. The library's types come in through the small
// interfaces below, since this package cannot import the library: the
// library's own tests import it.

// Outcome is how an attempt ended, as a breaker counts it.
type Outcome int

const (
	// Success: the backend answered.
	Success Outcome = iota
	// Failure: the backend failed, or the attempt timed out.
	Failure
	// Neutral: the caller gave the attempt up (a hedge's loser).
	Neutral
)

// A Gate is a circuit breaker: Allow asks whether attempt id may go out,
// and returns, when it may not, how long until it may let one through
// (0: unknown); Done reports the outcome of an attempt it let through.
type Gate interface {
	Allow(id int) (wait time.Duration, ok bool)
	Done(id int, o Outcome)
}

// A Budget is a retry budget: a request per call, a retry or a hedge
// allowed or refused.
type Budget interface {
	RecordRequest()
	TryRetry() bool
}

// A HedgeDelay learns the hedge delay from attempt latencies.
type HedgeDelay interface {
	Observe(latency time.Duration)
	Delay() (time.Duration, bool)
}

// A Backend answers an attempt sent at instant at after latency,
// successfully or not.
type Backend func(rng *rand.Rand, at time.Duration) (latency time.Duration, ok bool)

// Policy is how a call makes its attempts: Retry's options.
type Policy struct {
	Attempts       int           // per call, hedges aside; 1: no retry
	Backoff        time.Duration // the first wait, doubling, each stretched by up to half
	AttemptTimeout time.Duration // 0: none
	Budget         Budget        // nil: none
	Gate           Gate          // nil: none
	Hedge          time.Duration // the hedge delay until Learned has one; 0: no hedging
	MaxHedges      int           // hedges per attempt; 0 means 1
	Learned        HedgeDelay    // nil: the delay is fixed
}

// Traffic is the calls of a scenario: Poisson arrivals at Rate per second,
// or one every Every, until End.
type Traffic struct {
	Seed    uint64
	Rate    float64
	Every   time.Duration
	End     time.Duration
	Backend Backend
}

// CallRun is what a run observed, per second of the run: the calls that
// arrived, those whose first attempt went out as they arrived, the calls
// with any attempt sent to the backend, the attempts sent, the calls that
// ended refused by the gate, and the calls that succeeded; and the latency
// of each call that succeeded, by its arrival.
type CallRun struct {
	Calls, FirstSent, Reached, Sent, Rejected, Succeeded []int
	Latencies                                            []Admission
	Hedges, Retries                                      int // sent
}

// The events of the call model.
const (
	evCall = iota
	evAttemptEnd
	evHedge
	evRetry
)

type call struct {
	arrival  time.Duration
	attempts int // rounds started
	round    int // the current round
	reached  bool
}

type round struct {
	call        int
	primaryDone bool
	decided     bool
	inFlight    []int // attempts
	fired       int
	delay       time.Duration
}

type attempt struct {
	round   int
	start   time.Duration
	ok      bool
	ended   bool // answered or given up
	primary bool
}

// Run simulates the calls of t made with policy p, setting clk to each
// event's instant in turn (its time at the call is the run's start).
func (t Traffic) Run(clk *testingclock.FakeClock, p Policy) CallRun {
	start := clk.Now()
	rng := rand.New(rand.NewPCG(t.Seed, 0xb4ea6e4))
	seconds := int(t.End/time.Second) + 1
	out := CallRun{Calls: make([]int, seconds), FirstSent: make([]int, seconds), Reached: make([]int, seconds),
		Sent: make([]int, seconds), Rejected: make([]int, seconds), Succeeded: make([]int, seconds)}
	// Sized for the expected calls up front: growing slices of a hundred
	// thousand entries dominates a run under the race detector.
	expected := int(t.End.Seconds()*t.Rate) + 16
	if t.Every > 0 {
		expected = int(t.End/t.Every) + 16
	}
	calls := make([]call, 0, expected+expected/8)
	rounds := make([]round, 0, 2*expected)
	attempts := make([]attempt, 0, 2*expected)
	out.Latencies = make([]Admission, 0, expected+expected/8)
	var q Agenda
	next := func(now time.Duration) time.Duration {
		if t.Every > 0 {
			return now + t.Every
		}
		return now + Exponential(rng, time.Duration(float64(time.Second)/t.Rate))
	}
	sec := func(d time.Duration) int { return min(int(d/time.Second), seconds-1) }

	// send sends an attempt of round r, if the gate lets it through.
	send := func(now time.Duration, r int, primary bool) (wait time.Duration, ok bool) {
		id := len(attempts)
		if p.Gate != nil {
			if wait, ok := p.Gate.Allow(id); !ok {
				return wait, false
			}
		}
		latency, answered := t.Backend(rng, now)
		if p.AttemptTimeout > 0 && latency > p.AttemptTimeout {
			latency, answered = p.AttemptTimeout, false
		}
		attempts = append(attempts, attempt{round: r, start: now, ok: answered, primary: primary})
		rounds[r].inFlight = append(rounds[r].inFlight, id)
		c := &calls[rounds[r].call]
		if !c.reached {
			c.reached = true
			out.Reached[sec(c.arrival)]++
		}
		out.Sent[sec(now)]++
		q.Schedule(now+latency, evAttemptEnd, id)
		return 0, true
	}
	// fail ends round r, failed, and retries its call if it may: the
	// budget is asked before the wait, as Retry does.
	var startRound func(now time.Duration, c int)
	fail := func(now time.Duration, c int, refusedWait time.Duration, refused bool) {
		cl := &calls[c]
		if cl.attempts < p.Attempts && (p.Budget == nil || p.Budget.TryRetry()) {
			wait := p.Backoff << (cl.attempts - 1)
			wait += time.Duration(rng.Float64() * 0.5 * float64(wait))
			if refused && refusedWait > 0 {
				wait = refusedWait
			}
			q.Schedule(now+wait, evRetry, c)
			return
		}
		if refused {
			out.Rejected[sec(cl.arrival)]++
		}
	}
	startRound = func(now time.Duration, c int) {
		cl := &calls[c]
		cl.attempts++
		r := len(rounds)
		cl.round = r
		delay := p.Hedge
		if p.Learned != nil {
			if d, ok := p.Learned.Delay(); ok {
				delay = d
			}
		}
		rounds = append(rounds, round{call: c, delay: delay})
		wait, ok := send(now, r, true)
		if !ok {
			rounds[r].primaryDone, rounds[r].decided = true, true
			fail(now, c, wait, true)
			return
		}
		if cl.attempts == 1 {
			out.FirstSent[sec(now)]++
		} else {
			out.Retries++
		}
		if p.Hedge > 0 {
			q.Schedule(now+delay, evHedge, r)
		}
	}

	q.Schedule(next(0), evCall, 0)
	for q.Len() > 0 {
		e := q.Next()
		clk.SetTime(start.Add(e.At))
		now := e.At
		switch e.Kind {
		case evCall:
			if now >= t.End {
				continue
			}
			q.Schedule(next(now), evCall, 0)
			out.Calls[sec(now)]++
			calls = append(calls, call{arrival: now})
			if p.Budget != nil {
				p.Budget.RecordRequest()
			}
			startRound(now, len(calls)-1)
		case evRetry:
			startRound(now, e.ID)
		case evHedge:
			r := &rounds[e.ID]
			if r.primaryDone || r.decided || r.fired >= max(p.MaxHedges, 1) {
				continue
			}
			r.fired++
			if r.fired < max(p.MaxHedges, 1) {
				q.Schedule(now+r.delay, evHedge, e.ID)
			}
			if p.Budget != nil && !p.Budget.TryRetry() {
				continue
			}
			if _, ok := send(now, e.ID, false); ok {
				out.Hedges++
			}
		case evAttemptEnd:
			a := &attempts[e.ID]
			if a.ended {
				continue // given up when another attempt of its round won
			}
			a.ended = true
			r := &rounds[a.round]
			r.inFlight = remove(r.inFlight, e.ID)
			if p.Learned != nil {
				p.Learned.Observe(now - a.start)
			}
			o := Success
			if !a.ok {
				o = Failure
			}
			if p.Gate != nil {
				p.Gate.Done(e.ID, o)
			}
			if a.primary {
				r.primaryDone = true
			}
			switch {
			case r.decided:
			case a.ok:
				r.decided = true
				cl := calls[r.call]
				out.Succeeded[sec(cl.arrival)]++
				out.Latencies = append(out.Latencies, Admission{At: cl.arrival, Latency: now - cl.arrival})
				// The losers are cancelled: they count for nothing.
				for _, id := range r.inFlight {
					attempts[id].ended = true
					if p.Learned != nil { // Retry learns a loser's latency up to its cancellation
						p.Learned.Observe(now - attempts[id].start)
					}
					if p.Gate != nil {
						p.Gate.Done(id, Neutral)
					}
				}
				r.inFlight = r.inFlight[:0]
			case r.primaryDone && len(r.inFlight) == 0:
				r.decided = true
				fail(now, r.call, 0, false)
			}
		}
	}
	return out
}

// remove returns ids without id.
func remove(ids []int, id int) []int {
	for i, x := range ids {
		if x == id {
			return append(ids[:i], ids[i+1:]...)
		}
	}
	return ids
}
