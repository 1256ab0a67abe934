package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	testingclock "k8s.io/utils/clock/testing"
)

var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// fixed is a backend that answers every attempt after latency, with ok.
func fixed(latency time.Duration, ok bool) Backend {
	return func(*rand.Rand, time.Duration) (time.Duration, bool) { return latency, ok }
}

// countingBudget allows up to allow retries and counts what it is asked.
type countingBudget struct{ requests, asked, allow int }

func (b *countingBudget) RecordRequest() { b.requests++ }
func (b *countingBudget) TryRetry() bool {
	b.asked++
	return b.asked <= b.allow
}

// closedGate lets every attempt through and counts the outcomes.
type closedGate struct{ outcomes map[Outcome]int }

func (g *closedGate) Allow(int) (time.Duration, bool) { return 0, true }
func (g *closedGate) Done(_ int, o Outcome)           { g.outcomes[o]++ }

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func TestCallsOfAHealthyBackendMakeOneAttemptEach(t *testing.T) {
	tr := Traffic{Seed: 1, Every: 100 * time.Millisecond, End: 10 * time.Second, Backend: fixed(5*time.Millisecond, true)}
	r := tr.Run(testingclock.NewFakeClock(epoch), Policy{Attempts: 3, Backoff: 10 * time.Millisecond, Hedge: 50 * time.Millisecond})
	assert.Equal(t, 99, sum(r.Calls), "one every 100 ms from 100 ms")
	assert.Equal(t, 99, sum(r.Sent))
	assert.Equal(t, 99, sum(r.FirstSent))
	assert.Equal(t, 99, sum(r.Succeeded))
	assert.Zero(t, r.Hedges+r.Retries)
	for _, a := range r.Latencies {
		assert.Equal(t, 5*time.Millisecond, a.Latency)
	}
}

func TestFailedCallsRetryWithinTheBudget(t *testing.T) {
	tr := Traffic{Seed: 1, Every: time.Second, End: 10 * time.Second, Backend: fixed(5*time.Millisecond, false)}
	b := &countingBudget{allow: 4}
	g := &closedGate{outcomes: map[Outcome]int{}}
	r := tr.Run(testingclock.NewFakeClock(epoch), Policy{Attempts: 3, Backoff: 10 * time.Millisecond, Budget: b, Gate: g})
	assert.Equal(t, 9, b.requests, "a call a second from 1 s")
	assert.Equal(t, 4, r.Retries, "the budget's retries, and no more")
	assert.Equal(t, 13, sum(r.Sent))
	assert.Equal(t, 13, g.outcomes[Failure])
	assert.Zero(t, sum(r.Succeeded))
}

func TestAHedgeWinsOverASlowAttemptAndTheLoserCountsForNothing(t *testing.T) {
	n := 0
	slowFirst := func(*rand.Rand, time.Duration) (time.Duration, bool) {
		n++
		if n%2 == 1 {
			return time.Second, true // each call's first attempt
		}
		return 10 * time.Millisecond, true
	}
	tr := Traffic{Seed: 1, Every: 5 * time.Second, End: 11 * time.Second, Backend: slowFirst} // calls at 5 s and 10 s
	g := &closedGate{outcomes: map[Outcome]int{}}
	r := tr.Run(testingclock.NewFakeClock(epoch), Policy{Attempts: 1, Gate: g, Hedge: 50 * time.Millisecond})
	assert.Equal(t, 2, r.Hedges)
	assert.Equal(t, 2, sum(r.Succeeded))
	for _, a := range r.Latencies {
		assert.Equal(t, 60*time.Millisecond, a.Latency, "the hedge's delay and latency")
	}
	assert.Equal(t, map[Outcome]int{Success: 2, Neutral: 2}, g.outcomes)
}

// refusingGate refuses every attempt until open ends, with the wait until
// then.
type refusingGate struct {
	clk  *testingclock.FakeClock
	open time.Time
}

func (g *refusingGate) Allow(int) (time.Duration, bool) {
	if now := g.clk.Now(); now.Before(g.open) {
		return g.open.Sub(now), false
	}
	return 0, true
}
func (g *refusingGate) Done(int, Outcome) {}

func TestARefusedCallWaitsForTheGateOrIsRejected(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	g := &refusingGate{clk: clk, open: epoch.Add(3 * time.Second)}
	tr := Traffic{Seed: 1, Every: time.Second, End: 5 * time.Second, Backend: fixed(time.Millisecond, true)}
	r := tr.Run(clk, Policy{Attempts: 2, Backoff: 10 * time.Millisecond, Gate: g})
	// The calls at 1 s and 2 s are refused and retry at 3 s, when the
	// gate opens, beside the call made then; the call at 4 s goes through
	// at once.
	assert.Equal(t, 4, sum(r.Succeeded))
	assert.Equal(t, 2, r.Retries)
	assert.Equal(t, []int{0, 0, 0, 3, 1, 0}, r.Sent)
	assert.Zero(t, sum(r.Rejected))

	clk = testingclock.NewFakeClock(epoch)
	g = &refusingGate{clk: clk, open: epoch.Add(time.Hour)}
	r = tr.Run(clk, Policy{Attempts: 1, Gate: g})
	assert.Equal(t, 4, sum(r.Rejected))
	assert.Zero(t, sum(r.Reached))
}
