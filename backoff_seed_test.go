package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// The timelines of seeds 000 and 001 (see /work/shared/seeds), reproduced on
// a fake clock. examples/demo/crashloop.go prints the same timelines.

// tickerGaps runs seed 000's loop: NewBackOff(5s, 60s), a 1 s ticker, work
// gated by IsInBackOffSince(id, lastDo), and after each run Next(id, now) and
// lastDo = now + lag. It returns the first n gaps between runs (from the
// previous lastDo, as the seed prints them).
func tickerGaps(t *testing.T, lag time.Duration, n int) []time.Duration {
	t.Helper()
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOff(5*time.Second, 60*time.Second, backoff.WithClock(fc))
	const id = "test"
	lastDo := fc.Now()
	next := epoch // time of the next tick: the ticker keeps its own schedule
	var gaps []time.Duration
	for len(gaps) < n {
		next = next.Add(time.Second)
		fc.SetTime(next)
		if b.IsInBackOffSince(id, lastDo) {
			continue
		}
		now := fc.Now()
		gaps = append(gaps, now.Sub(lastDo))
		b.Next(id, now)
		fc.Step(lag) // the time the loop body takes before it reads lastDo
		lastDo = fc.Now()
	}
	return gaps
}

func TestSeed000TickerGatedWork(t *testing.T) {
	s := time.Second
	// On exact ticks the run waits exactly its window: the tick at the
	// window's end is no longer in backoff (Since == backoff is not < it).
	assert.Equal(t, []time.Duration{1 * s, 5 * s, 10 * s, 20 * s, 40 * s, 60 * s, 60 * s}, tickerGaps(t, 0, 7))

	// The seed's real-clock log shows 1, 6, 11, 21, 41 s (5.999162394s,
	// 10.9999193s, ...): there lastDo is read a moment after the tick, so the
	// tick at the window's end comes a hair early relative to it and is
	// still in backoff; the run slips to the next tick, a hair short of a
	// whole second later. A 1 ms lag reproduces that.
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{1 * s, 6*s - ms, 11*s - ms, 21*s - ms, 41*s - ms, 61*s - ms}, tickerGaps(t, ms, 6))
}

// A restart is one restart of the container by the kubelet model below.
type restart struct {
	at       time.Duration // since the first crash
	waited   time.Duration // since the crash it follows
	backoff  time.Duration // Get after the restart's Next
	attempts int           // Attempts after the restart's Next
}

// crashLoop models kubelet restarting one container (seed 001). The Backoff
// is kubelet's, NewBackOff(10s, 300s), keyed by pod and container. The sync
// loop runs on every whole second from t = 0; the container starts at t = 0
// and crashes at once. At each sync, a container whose crash time has come
// (crash time ≤ now) is exited with FinishedAt = crash time, and kubelet's
// doBackOff decides: IsInBackOffSince(key, FinishedAt) means wait for a later
// sync; otherwise Next(key, FinishedAt) and restart the container now.
// runs[i] is how long the container runs after restart i (0: it crashes at
// once). crashLoop returns the restarts, one per element of runs.
func crashLoop(t *testing.T, runs []time.Duration) []restart {
	t.Helper()
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOff(10*time.Second, 300*time.Second, backoff.WithClock(fc))
	const key = "default/web_app" // pod and container, as kubelet's stable key
	crashAt := epoch
	var restarts []restart
	for len(restarts) < len(runs) {
		now := fc.Now()
		if !crashAt.After(now) { // exited; FinishedAt = crashAt
			if !b.IsInBackOffSince(key, crashAt) {
				b.Next(key, crashAt)
				restarts = append(restarts, restart{
					at:       now.Sub(epoch),
					waited:   now.Sub(crashAt),
					backoff:  b.Get(key),
					attempts: b.Attempts(key),
				})
				crashAt = now.Add(runs[len(restarts)-1])
			}
		}
		fc.Step(time.Second)
	}
	return restarts
}

func TestSeed001CrashLoopBackOff(t *testing.T) {
	s := time.Second
	stable := 10*time.Minute + time.Second // > 2×300 s: the entry expires
	runs := []time.Duration{0, 0, 0, 0, 0, 0, 0, stable, 0, 0, 0}
	want := []restart{
		{0, 0, 10 * s, 1}, // first crash: no entry, restarted at the next sync
		{10 * s, 10 * s, 20 * s, 2},
		{30 * s, 20 * s, 40 * s, 3},
		{70 * s, 40 * s, 80 * s, 4},
		{150 * s, 80 * s, 160 * s, 5},
		{310 * s, 160 * s, 300 * s, 6},
		{610 * s, 300 * s, 300 * s, 7},
		{910 * s, 300 * s, 300 * s, 8}, // then runs for 10m1s
		{1511 * s, 0, 10 * s, 1},       // the entry had expired: back to 10 s
		{1521 * s, 10 * s, 20 * s, 2},
		{1541 * s, 20 * s, 40 * s, 3},
	}
	assert.Equal(t, want, crashLoop(t, runs))
}

func TestSeed001StableForExactly2xMaxIsNotEnough(t *testing.T) {
	// Expiry needs more than 2×max (strictly): a container that crashes
	// exactly 600 s after its restart still waits the full 300 s.
	runs := []time.Duration{0, 0, 0, 0, 0, 0, 0, 10 * time.Minute, 0}
	got := crashLoop(t, runs)
	last := got[len(got)-1]
	assert.Equal(t, 300*time.Second, last.waited)
	assert.Equal(t, 300*time.Second, last.backoff)
	assert.Equal(t, 9, last.attempts)
}
