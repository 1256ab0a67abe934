//go:build go1.25

package backoff_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/backoff"
)

// loadRun is one random pattern of the load-bound test: a budget, a
// breaker and hedging, and a backend whose failure rate, latency and
// callers' patience change from phase to phase.
type loadRun struct {
	seed         uint64
	ratio        float64
	minPerSecond float64
	window       time.Duration
	hedge        time.Duration
	maxHedges    int
	steps        int // the schedule's attempts per call
	learned      bool
	length       time.Duration
}

// loadPhase is a stretch of a run in which calls arrive at rate per
// second, fail with probability fail (a tenth of failures carry a
// Retry-After hint), answer after a lognormal latency of the given median
// (stragglers take 20 times longer), and give up after a random patience
// (cancel of them).
type loadPhase struct {
	until   time.Duration
	rate    float64
	fail    float64
	median  time.Duration
	cancel  float64
	patient time.Duration
}

// loadLog is what a run sent: the instants of its calls (each recorded as
// a request of the budget) and of the attempts fn saw, first attempts
// apart.
type loadLog struct {
	mu          sync.Mutex
	calls       []time.Duration
	firstSent   []time.Duration // a call's first attempt, sent as the call began
	chargedSent []time.Duration // every other attempt: a retry or a hedge
	decided     []time.Duration // the instants the budget allowed a retry, before its wait
	waits       []time.Duration // the waits that followed
	hedges      []time.Duration // the charged attempts that were hedges
}

func newLoadRun(seed uint64, length time.Duration) loadRun {
	rng := rand.New(rand.NewPCG(seed, 0x10adb0))
	return loadRun{
		seed:         seed,
		ratio:        []float64{0.05, 0.1, 0.2, 0.5, 1}[rng.IntN(5)],
		minPerSecond: []float64{0, 0.5, 2, 10}[rng.IntN(4)],
		window:       []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}[rng.IntN(4)],
		hedge:        time.Duration(1+rng.IntN(40)) * time.Millisecond,
		maxHedges:    1 + rng.IntN(3),
		steps:        2 + rng.IntN(5),
		learned:      rng.IntN(2) == 0,
		length:       length,
	}
}

// phases draws the run's phases.
func (r loadRun) phases() []loadPhase {
	rng := rand.New(rand.NewPCG(r.seed, 0xfa5e5))
	var ps []loadPhase
	for at := time.Duration(0); at < r.length; {
		at += time.Duration(500+rng.IntN(8000)) * time.Millisecond
		ps = append(ps, loadPhase{
			until:   at,
			rate:    []float64{5, 50, 200, 800}[rng.IntN(4)],
			fail:    []float64{0, 0.02, 0.3, 0.8, 1}[rng.IntN(5)],
			median:  time.Duration(1+rng.IntN(30)) * time.Millisecond,
			cancel:  []float64{0, 0.05, 0.5}[rng.IntN(3)],
			patient: time.Duration(5+rng.IntN(300)) * time.Millisecond,
		})
	}
	return ps
}

// play runs r in a synctest bubble: a goroutine per call, each a Retry
// with the budget, hedging and the breaker, against the backend of the
// phases. It returns what was sent.
func (r loadRun) play(t *testing.T) *loadLog {
	log := &loadLog{}
	bubble(t, func(t *testing.T) {
		start := time.Now()
		budget := backoff.NewRetryBudget(r.ratio, r.minPerSecond, r.window)
		breaker := backoff.NewBreaker(backoff.WithBreakerWindow(r.window))
		opts := []backoff.Option{backoff.WithRetryBudget(budget), backoff.WithPacer(breaker),
			backoff.WithHedge(r.hedge), backoff.WithMaxHedges(r.maxHedges)}
		if r.learned {
			opts = append(opts, backoff.WithHedgeDelay(backoff.NewHedgeDelay(0.9, time.Millisecond, 50*time.Millisecond)))
		}
		schedule := backoff.Schedule{Duration: 5 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: r.steps}
		errDown := errors.New("unavailable")

		var rngMu sync.Mutex
		rng := rand.New(rand.NewPCG(r.seed, 0xca11))
		draw := func(f func(*rand.Rand) float64) float64 {
			rngMu.Lock()
			defer rngMu.Unlock()
			return f(rng)
		}
		var wg sync.WaitGroup
		for _, ph := range r.phases() {
			for time.Since(start) < min(ph.until, r.length) {
				time.Sleep(time.Duration(draw(func(g *rand.Rand) float64 { return g.ExpFloat64() }) * float64(time.Second) / ph.rate))
				began := time.Since(start)
				cancel := draw(func(g *rand.Rand) float64 { return g.Float64() }) < ph.cancel
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, stop := context.Background(), context.CancelFunc(func() {})
					if cancel {
						ctx, stop = context.WithTimeout(ctx, ph.patient)
					}
					defer stop()
					log.mu.Lock()
					log.calls = append(log.calls, began)
					log.mu.Unlock()
					first := true
					var firstMu sync.Mutex
					retryAt := time.Duration(-1)
					notify := backoff.WithNotify(func(_ int, _ error, wait time.Duration) {
						log.mu.Lock()
						log.decided = append(log.decided, time.Since(start))
						log.waits = append(log.waits, wait)
						log.mu.Unlock()
						firstMu.Lock()
						retryAt = time.Since(start) + wait
						firstMu.Unlock()
					})
					_ = backoff.Retry(ctx, schedule, func(ctx context.Context) error {
						now := time.Since(start)
						firstMu.Lock()
						isFirst := first && now == began
						first = false
						isRetry := now == retryAt
						if isRetry {
							retryAt = -1
						}
						firstMu.Unlock()
						if !isFirst && !isRetry {
							log.mu.Lock()
							log.hedges = append(log.hedges, now)
							log.mu.Unlock()
						}
						log.mu.Lock()
						if isFirst {
							log.firstSent = append(log.firstSent, now)
						} else {
							log.chargedSent = append(log.chargedSent, now)
						}
						log.mu.Unlock()
						latency := time.Duration(draw(func(g *rand.Rand) float64 {
							d := float64(ph.median) * math.Exp(0.5*g.NormFloat64())
							if g.Float64() < 0.01 {
								d *= 20
							}
							return d
						}))
						failed := draw(func(g *rand.Rand) float64 { return g.Float64() }) < ph.fail
						hinted := draw(func(g *rand.Rand) float64 { return g.Float64() }) < 0.1
						timer := time.NewTimer(latency)
						defer timer.Stop()
						select {
						case <-ctx.Done():
							return ctx.Err()
						case <-timer.C:
						}
						switch {
						case failed && hinted:
							return backoff.RetryAfter(20*time.Millisecond, backoff.ErrOverloaded)
						case failed:
							return errDown
						}
						return nil
					}, append(slices.Clip(opts), notify)...)
				}()
			}
		}
		wg.Wait()
	})
	return log
}

// excess returns, over the windows (t-W, t] that end at the given
// instants, the largest excess of the charged instants in the window over
// ratio × the calls in (t-W-extra, t] plus the floor, and where it is; the
// bound holds in those windows if the excess is at most 0.
func (r loadRun) excess(charged, calls, ends []time.Duration, extra time.Duration) (worst float64, at time.Duration) {
	slices.Sort(charged)
	slices.Sort(calls)
	floor := r.minPerSecond * r.window.Seconds()
	count := func(xs []time.Duration, from, to time.Duration) int { // in (from, to]
		lo, _ := slices.BinarySearch(xs, from+1)
		hi, _ := slices.BinarySearch(xs, to+1)
		return hi - lo
	}
	worst = math.Inf(-1)
	for _, t := range ends {
		e := float64(count(charged, t-r.window, t)) - r.ratio*float64(count(calls, t-r.window-extra, t)) - floor
		if e > worst {
			worst, at = e, t
		}
	}
	return worst, at
}

// everyWindow returns the instants at which the windows (t-W, t] that
// count the most charged instants against the fewest calls end: each
// charged instant, and each instant just before a call leaves a window of
// length W+extra. Between them the excess only falls.
func (r loadRun) everyWindow(charged, calls []time.Duration, extra time.Duration) []time.Duration {
	ends := slices.Clone(charged)
	for _, c := range calls {
		ends = append(ends, c+r.window+extra-1)
	}
	return ends
}

// TestLoadBound: with retries, hedges and a breaker all on, over random
// patterns of arrivals, failures, latencies and cancellations, each Retry
// on the real clock of a synctest bubble, the retries and hedges that the
// budget lets through stay within ratio × the calls plus minPerSecond ×
// window: exactly in the window that ends at each of them, and in every
// window when the calls of the window before it are counted too (see
// RetryBudget). So the attempts of every window are at most its first
// attempts plus ratio × the calls of two windows plus the floor.
//
// The retries are counted when the budget allowed them, which WithNotify
// reports, before Retry's wait; the hedges when fn was called, which is
// when the budget allowed them (a breaker does not make an attempt wait).
// The attempts that fn saw are counted against the bound too, to report
// how far the instants at which retries are sent, up to a breaker's open
// time after the budget allowed them, stray from it.
//
// It plays 2 runs of 20 s of virtual time, 64 of 240 s in the long mode
// (BACKOFF_LONG=1).
func TestLoadBound(t *testing.T) {
	t.Parallel()
	runs, length := 2, 20*time.Second
	if longTests() {
		runs, length = 64, 240*time.Second
	}
	// The runs are independent bubbles: they are played on as many
	// goroutines as there are cores, and checked in order.
	logs := make([]*loadLog, runs+1)
	var next atomic.Uint64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := next.Add(1); s <= uint64(runs); s = next.Add(1) {
				logs[s] = newLoadRun(s, length).play(t)
			}
		}()
	}
	wg.Wait()
	var sent, calls, charged int
	sendExcess, sendRuns := math.Inf(-1), 0
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		r, log := newLoadRun(seed, length), logs[seed]
		sent += len(log.firstSent) + len(log.chargedSent)
		calls += len(log.calls)
		decisions := append(slices.Clone(log.decided), log.hedges...)
		charged += len(decisions)
		if e, at := r.excess(decisions, log.calls, decisions, 0); e > 0 {
			t.Errorf("seed %d (%+v): the window ending at the retry or hedge at %v holds %.1f more than ratio × its calls + the floor",
				seed, r, at, e)
		}
		if e, at := r.excess(decisions, log.calls, r.everyWindow(decisions, log.calls, r.window), r.window); e > 0 {
			t.Errorf("seed %d (%+v): the window ending at %v holds %.1f retries and hedges more than ratio × the calls of it and the window before + the floor",
				seed, r, at, e)
		}
		// The bound as the attempts are sent: the window of each send,
		// and every window.
		if e, _ := r.excess(log.chargedSent, log.calls, r.everyWindow(log.chargedSent, log.calls, 0), 0); e > 0 {
			sendRuns++
			sendExcess = max(sendExcess, e)
		}
	}
	t.Logf("%d calls, %d attempts sent, %d retries and hedges allowed, in %d runs", calls, sent, charged, runs)
	t.Logf("sent ≤ (1+ratio)·first + floor over every window of the sends failed in %d of %d runs, by at most %.1f attempts",
		sendRuns, runs, max(sendExcess, 0))
	if sent == 0 || charged == 0 {
		t.Fatal("nothing was retried")
	}
}
