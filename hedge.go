package backoff

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/retrykit/backoff/internal/optionhook"
)

func init() {
	optionhook.Hedged = func(opts any) bool {
		var cfg config
		cfg.apply(opts.([]Option))
		return cfg.retry.hedge.delay > 0
	}
}

// WithHedge makes [Retry] and [RetryValue] hedge: when an attempt has not
// answered delay after it started, Retry starts another one beside it, on a
// new goroutine, and takes whichever succeeds first. See Retry's Hedging
// section for the rules. delay = 0 means no hedging (the default); a
// negative delay makes it panic. With [WithHedgeDelay], delay is only the
// one used until the learned delay is known. httpretry's Transport hedges
// the requests it may send twice, each attempt with a request and a body of
// its own.
func WithHedge(delay time.Duration) Option {
	mustNotBeNegative("WithHedge", "delay", delay)
	return durationOption(optionHedge, delay)
}

// WithMaxHedges sets how many hedges one attempt of [Retry] may have: the
// k-th starts k times the hedge delay after the attempt did, if no attempt
// has succeeded and the first is still running, so at most n+1 attempts are
// in flight at once. The default is 1. It has no effect without
// [WithHedge]; n < 1 makes it panic.
func WithMaxHedges(n int) Option {
	if n < 1 {
		badArgument("WithMaxHedges", "n must be at least 1", n)
	}
	return countOption(optionMaxHedges, n)
}

// WithHedgeDelay makes [Retry] hedge after the delay that d has learned,
// and report the latency of each of its attempts to d. Until d has learned
// one, Retry hedges after [WithHedge]'s delay; without WithHedge there is no
// hedging, and d learns nothing from this call. WithHedgeDelay panics if d
// is nil.
func WithHedgeDelay(d *HedgeDelay) Option {
	mustNotBeNil("WithHedgeDelay", "d", d == nil)
	return valueOption(optionHedgeDelay, d)
}

// WithHedgeRelease gives [RetryValue] the function that disposes of a
// value nobody will read: that of an attempt that succeeded after another
// had won, or after a [Permanent] error ended the call. release is called
// once per such value, on the goroutine of the attempt that returned it,
// before RetryValue returns; calls may run concurrently with one another
// and with other attempts. Use it to close what the value holds, such as an
// *http.Response's body. Without it, such values are dropped. It has no
// effect on [Retry], whose attempts return no value. release may not be nil:
// WithHedgeRelease panics if it is.
func WithHedgeRelease(release func(value any)) Option {
	mustNotBeNil("WithHedgeRelease", "release", release == nil)
	return valueOption(optionHedgeRelease, release)
}

// hedgeConfig holds the options of hedging, a part of retryConfig. Its zero
// value is no hedging.
type hedgeConfig struct {
	delay   time.Duration // WithHedge's; 0: no hedging
	max     int           // WithMaxHedges'; 0 means 1
	learned *HedgeDelay   // nil: the delay is fixed
	release func(any)     // nil: late values are dropped
}

// hedgeFn is what a hedge calls: Retry's fn, or RetryValue's as a
// valueFunc. The first attempt, on the caller's goroutine, calls the
// function given to retry instead, so that RetryValue's value stays on its
// stack.
type hedgeFn struct {
	fn    func(context.Context) error
	value valueCaller // nil for Retry
}

func (h *hedgeFn) run(ctx context.Context) (any, error) {
	if h.value != nil {
		return h.value.callValue(ctx)
	}
	return nil, h.fn(ctx)
}

// valueCaller is RetryValue's fn, whatever its T. (An interface rather
// than a generic function value, which would allocate a closure per call.)
type valueCaller interface {
	callValue(ctx context.Context) (any, error)
}

// valueFunc is RetryValue's fn as a valueCaller.
type valueFunc[T any] func(context.Context) (T, error)

// callValue calls f. The value is boxed: a hedge's value reaches the
// caller's goroutine through the round, an allocation made only when a
// hedge runs.
func (f valueFunc[T]) callValue(ctx context.Context) (any, error) {
	v, err := f(ctx)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// roundResult is the outcome of one hedged attempt and its hedges.
type roundResult struct {
	err      error
	started  bool // false: ctx ended while the first attempt waited for the pacer
	hedges   int  // hedges whose fn was called, for RetryError.Attempts
	hedgeWon bool // a hedge succeeded first: value is its value
	value    any
	// lateValue: the first attempt succeeded after the round was decided
	// otherwise; RetryValue releases its value with release.
	lateValue bool
	release   func(any)
}

// hedgeRound is the state of one attempt and its hedges. Rounds are pooled,
// and on a fake clock with their timer, so that a round whose hedge never
// fires allocates nothing but the first attempt's context and, on the real
// clock, its timer. A runtime timer is not pooled: one made inside a
// testing/synctest bubble must never be reset outside it (the runtime
// stops the program), and a pooled round cannot tell where it was made.
// Nothing of a round reaches the caller's fn but that context, which is
// never pooled: fn may keep its context after it returns.
type hedgeRound struct {
	// Set by hedgedAttempt before any hedge can start; read-only after.
	parent         context.Context
	clk            clock.WithDelayedExecution
	h              hedgeFn
	pacer          Pacer
	budget         *RetryBudget
	retryable      func(error) bool
	learned        *HedgeDelay
	release        func(any)
	delay          time.Duration
	attemptTimeout time.Duration
	max            int

	// timer fires the first hedge. Only the caller's goroutine uses it, and
	// keeps it across rounds while the clock is the same and it never fired
	// (a FakeClock's AfterFunc timer cannot fire twice).
	timer    clock.Timer
	timerClk clock.WithDelayedExecution
	fire     func() // r.onTimer, made once per pooled round
	// pending counts the timers armed whose callback has neither run nor
	// been stopped: a round with a callback to come is not pooled, so that
	// no callback ever reaches the round of another call.
	pending atomic.Int32
	wg      sync.WaitGroup // the hedges' goroutines

	mu          sync.Mutex
	next        clock.Timer // the timer of the next hedge after the first, armed by a hedge
	primary     *clockTimeoutContext
	hedgeCtxs   []*clockTimeoutContext // of the hedges started
	primaryDone bool                   // no hedge starts once the first attempt has returned
	decided     bool                   // a success or a final error ended the round
	hedgeWon    bool
	value       any   // the winning hedge's
	final       error // a Permanent or not retryable error that ends the call
	last        error // the latest failure
	fired       int   // hedges started
	sent        int   // hedges whose fn was called
	panicked    any   // what a hedge's fn panicked with, raised again on the caller's goroutine
}

var hedgeRounds = sync.Pool{New: func() any {
	r := new(hedgeRound)
	r.fire = r.onTimer
	return r
}}

// hedgedAttempt runs one attempt of Retry with its hedges: primary on the
// caller's goroutine, under a context of its own, and, each delay that
// passes while it runs, a hedge on a goroutine of its own, up to the
// configured number, each charged to the budget and paced as any attempt.
// It returns when every attempt it started has returned.
func hedgedAttempt(ctx context.Context, primary func(context.Context) error, h hedgeFn, rc *retryConfig,
	clk clock.WithDelayedExecution, budget *RetryBudget) roundResult {
	r := hedgeRounds.Get().(*hedgeRound)
	if r.timer != nil && !sameClock(r.timerClk, clk) {
		r.timer = nil
	}
	r.parent, r.clk, r.h = ctx, clk, h
	r.pacer, r.budget, r.retryable = rc.pacer, budget, rc.retryable
	r.learned, r.release = rc.hedge.learned, rc.hedge.release
	r.attemptTimeout, r.max = rc.attemptTimeout, max(rc.hedge.max, 1)
	r.delay = rc.hedge.delay
	if r.learned != nil {
		if d, ok := r.learned.Delay(); ok {
			r.delay = d
		}
	}
	// The first attempt's context is the one allocation of a round whose
	// hedge never fires: fn may keep it, so it is never pooled.
	r.primary = &clockTimeoutContext{parent: ctx}

	done, called := false, false
	defer func() {
		if !done { // fn panicked: stop the hedges before the panic goes on
			r.mu.Lock()
			r.primaryDone, r.decided = true, true
			r.cancelOthersLocked(nil)
			r.mu.Unlock()
			if called {
				r.timer.Stop()
			}
			r.wg.Wait() // the hedges armed their timers, if any, before this returns
			if r.next != nil {
				r.next.Stop()
			}
			r.primary.release() // the round is not pooled: its callbacks find it over
		}
	}()

	var start time.Time
	call := func(actx context.Context) error {
		// The delay counts from when the attempt starts, after the pacer.
		called = true
		if r.learned != nil {
			start = clk.Now()
		}
		r.arm()
		return primary(actx)
	}
	var err error
	started := true
	switch {
	case r.pacer != nil:
		err, started = pacedAttempt(r.primary, r.pacer, call, clk, r.attemptTimeout)
	case r.attemptTimeout > 0:
		actx := withAttemptTimeout(r.primary, clk, r.attemptTimeout)
		err = call(actx)
		actx.release()
	default:
		err = call(r.primary)
	}
	if r.learned != nil && called && ctx.Err() == nil {
		r.learned.Observe(clk.Since(start))
	}
	if called && r.timer.Stop() {
		r.pending.Add(-1)
	} else if called {
		r.timer = nil // it fired: never reused (see timer)
	}
	final := started && err != nil && r.ends(err)

	r.mu.Lock()
	r.primaryDone = true
	res := roundResult{started: started, release: r.release}
	switch {
	case r.decided:
		res.lateValue = err == nil && called
	case err == nil && called:
		r.decided = true
	case final:
		r.decided, r.final = true, err
	case err != nil:
		r.last = err
	}
	if r.decided {
		r.cancelOthersLocked(nil)
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.primary.release()
	done = true

	// Every hedge has returned: nothing but a timer callback still to run
	// (which sees primaryDone and does nothing) reads the round now.
	r.mu.Lock()
	next := r.next
	r.next = nil
	r.mu.Unlock()
	if next != nil && next.Stop() {
		r.pending.Add(-1)
	}
	if p := r.panicked; p != nil {
		r.put()
		raiseAgain(p)
	}
	res.hedges = r.sent
	switch {
	case r.hedgeWon:
		res.hedgeWon, res.value = true, r.value
	case r.final != nil:
		res.err = r.final
	case r.decided:
		// the first attempt won
	default:
		res.err = r.last
		if !called {
			res.err = err // the pacer refused, or ctx ended during its wait
		}
	}
	r.put()
	return res
}

// ends reports whether err, an attempt's, ends the call: a Permanent error,
// or one that WithRetryable's predicate rejects.
func (r *hedgeRound) ends(err error) bool {
	permanent, _, _ := inspectError(err)
	return permanent || (r.retryable != nil && !r.retryable(err))
}

// arm sets the timer of the first hedge, on the caller's goroutine.
func (r *hedgeRound) arm() {
	r.pending.Add(1)
	if r.timer != nil {
		r.timer.Reset(r.delay)
		return
	}
	r.timer, r.timerClk = r.clk.AfterFunc(r.delay, r.fire), r.clk
}

// onTimer starts a hedge, unless the round is over or has all its hedges.
// It may run inside a FakeClock's Step, which holds the clock's lock: it
// must not call the clock, and leaves everything else to the hedge's
// goroutine.
func (r *hedgeRound) onTimer() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending.Add(-1)
	if r.primaryDone || r.decided || r.fired >= r.max {
		return
	}
	r.fired++
	// Allocated only when a hedge fires: the hedge's context, goroutine
	// and, with RetryValue, its boxed value.
	hctx := &clockTimeoutContext{parent: r.parent}
	r.hedgeCtxs = append(r.hedgeCtxs, hctx)
	r.wg.Add(1)
	go r.hedge(hctx, r.fired)
}

// hedge runs the k-th hedge, under hctx, and arms the timer of the next.
func (r *hedgeRound) hedge(hctx *clockTimeoutContext, k int) {
	defer r.wg.Done()
	defer hctx.release()
	defer func() {
		// A panic here would end the program; the caller's goroutine
		// raises it again instead, once the other attempts have returned.
		if p := recover(); p != nil {
			r.mu.Lock()
			if r.panicked == nil {
				r.panicked = p
			}
			r.decided = true
			r.cancelOthersLocked(hctx)
			r.mu.Unlock()
		}
	}()
	if k < r.max {
		r.armNext()
	}
	// A budget that refuses suppresses this hedge and nothing else: the
	// attempts in flight go on.
	if r.budget != nil && !r.budget.TryRetry() {
		return
	}
	var value any
	var start time.Time
	called := false
	run := func(c context.Context) error {
		called = true
		r.mu.Lock()
		r.sent++
		r.mu.Unlock()
		if r.learned != nil {
			start = r.clk.Now()
		}
		var err error
		value, err = r.h.run(c)
		return err
	}
	var err error
	switch {
	case r.pacer != nil:
		// A pacer that refuses (a Throttler, a Breaker), or whose wait ends
		// with the round, suppresses this hedge: run is not called.
		err, _ = pacedAttempt(hctx, r.pacer, run, r.clk, r.attemptTimeout)
	case r.attemptTimeout > 0:
		actx := withAttemptTimeout(hctx, r.clk, r.attemptTimeout)
		err = run(actx)
		actx.release()
	default:
		err = run(hctx)
	}
	if !called {
		return
	}
	if r.learned != nil && r.parent.Err() == nil {
		r.learned.Observe(r.clk.Since(start))
	}
	final := err != nil && r.ends(err)

	r.mu.Lock()
	late, decides := false, false
	switch {
	case r.decided:
		late = err == nil
	case err == nil:
		decides, r.hedgeWon, r.value = true, true, value
	case final:
		decides, r.final = true, err
	default:
		r.last = err
	}
	if decides {
		r.decided = true
		r.cancelOthersLocked(hctx)
	}
	r.mu.Unlock()
	if late && r.h.value != nil && r.release != nil {
		r.release(value)
	}
}

// armNext sets the timer of the hedge after this one, from a hedge's
// goroutine (never from a timer's callback, which may hold a FakeClock's
// lock).
func (r *hedgeRound) armNext() {
	r.mu.Lock()
	over := r.primaryDone || r.decided
	r.mu.Unlock()
	if over {
		return
	}
	r.pending.Add(1)
	t := r.clk.AfterFunc(r.delay, r.fire)
	r.mu.Lock()
	r.next = t // the previous next, if any, has fired: it started this hedge
	r.mu.Unlock()
}

// cancelOthersLocked ends the context of every attempt of the round but
// keep's: the losers see ctx.Done() close, with context.Canceled.
func (r *hedgeRound) cancelOthersLocked(keep *clockTimeoutContext) {
	if r.primary != keep {
		r.primary.end(context.Canceled)
	}
	for _, c := range r.hedgeCtxs {
		if c != keep {
			c.end(context.Canceled)
		}
	}
}

// put returns the round to the pool, cleared, unless a timer's callback is
// still to run.
func (r *hedgeRound) put() {
	// Under the lock, so that a callback that has just counted itself out
	// has also finished reading the round.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending.Load() != 0 {
		return // a callback is still to run: it finds the round over, and it is never reused
	}
	r.parent, r.h, r.pacer, r.budget, r.retryable = nil, hedgeFn{}, nil, nil, nil
	r.learned, r.release, r.primary, r.value, r.final, r.last, r.panicked = nil, nil, nil, nil, nil, nil, nil
	clear(r.hedgeCtxs)
	r.hedgeCtxs = r.hedgeCtxs[:0]
	r.primaryDone, r.decided, r.hedgeWon = false, false, false
	r.fired, r.sent = 0, 0
	if _, real := r.timerClk.(clock.RealClock); real {
		r.timer = nil // a runtime timer: see hedgeRound
	}
	if r.timer == nil {
		r.clk, r.timerClk = nil, nil
	}
	hedgeRounds.Put(r)
}
