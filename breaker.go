package backoff

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// ErrBreakerOpen is the error of a call that a [Breaker] refused: it was not
// made, because the downstream has been failing. While the breaker is open,
// the refusal also carries, as a [RetryAfter] hint (a [*RetryAfterError]
// around ErrBreakerOpen), the time until the breaker may let a probe
// through; [Retry] waits that long before its next attempt. Test for it
// with errors.Is.
var ErrBreakerOpen = errors.New("backoff: circuit breaker open")

// BreakerState is the state of a [Breaker]. Its zero value is
// [BreakerClosed].
type BreakerState uint8

const (
	// BreakerClosed lets every call through and counts their outcomes.
	BreakerClosed BreakerState = iota
	// BreakerOpen refuses every call until its open time has passed.
	BreakerOpen
	// BreakerHalfOpen lets a few probe calls through; their outcomes close
	// the breaker or open it again.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "BreakerState(" + strconv.Itoa(int(s)) + ")"
}

// Breaker is a circuit breaker: it stops calls to a downstream that has
// been failing, so that the downstream is not sent work it will fail, and
// lets a few probe calls through from time to time to learn when it has
// recovered.
//
// Ask [Breaker.Allow] before each call and report the call's outcome on the
// [BreakerPermit] it returns; or pass the breaker with [WithPacer] to
// [Retry], [RetryValue], httpretry's Transport or [RunWorkers], which do
// both for every attempt. One breaker is meant to be shared by all the
// calls to one downstream.
//
// # States
//
// A closed breaker lets every call through. It trips, and opens, when a
// failure makes either rule true:
//
//   - the failures are at least ratio × the outcomes counted over the
//     rolling window, and there are at least minRequests of them
//     ([WithBreakerFailureRatio], [WithBreakerWindow]);
//   - the last n outcomes were failures ([WithBreakerConsecutiveFailures]),
//     however far apart in time: only a success resets that count.
//
// An open breaker refuses every call, with [ErrBreakerOpen], for its open
// time: the k-th trip in a row opens it for the k-th wait of its schedule
// ([WithBreakerOpenSchedule]), or for the Retry-After hint of the failure
// that tripped it ([RetryAfter], at most [DefaultMaxRetryAfter]), whichever
// is later. A hinted failure of a call made before the trip extends the open
// time the same way.
//
// Once the open time has passed, the next call (or [Breaker.State]) finds
// the breaker half-open: no timer is needed for that. A half-open breaker
// lets through up to n probe calls at once ([WithBreakerProbes]) and refuses
// the others; n successful probes close it, with an empty window and the
// schedule back at its first wait, and any failed probe opens it again, for
// the next wait of the schedule.
//
// # Outcomes
//
// An outcome is read from the call's error, as for every [Pacer]: nil, or a
// [Permanent] error (the downstream answered), is a success; any other
// error is a failure: an overload signal, a timeout, a network error, or
// anything else. An error of a call cut short because the caller's own
// context ended says nothing about the downstream and counts for nothing,
// so a caller that gives up never trips the breaker; a probe cut short that
// way frees its place for another. Outcomes of calls let through before the
// latest change of state are not counted, apart from the hint above.
//
// # Cost and concurrency
//
// A Breaker is safe for concurrent use by multiple goroutines. In the
// closed state, Allow and the report of an outcome take no lock, allocate
// nothing and read the clock once between them (see
// BenchmarkBreakerAllowRecord); changes of state take a lock, and a refusal
// in the open state allocates its error. Time is read from the clock of
// [WithClock]. Its zero value is not usable: create it with [NewBreaker].
type Breaker struct {
	clk         clock.PassiveClock
	realClock   bool // clk is clock.RealClock: read time.Since directly
	epoch       time.Time
	ratio       float64
	minRequests uint64
	consecutive int64 // failures in a row that trip it; 0: no such rule
	probes      int
	schedule    Schedule
	onChange    func(from, to BreakerState)
	metrics     BreakerMetrics // nil: none

	// word is the state and its generation, gen<<2 | state: every call
	// reads it, and only a change of state, under mu, writes it. A permit
	// carries the generation it was granted in, so that an outcome reported
	// after a change of state is not counted. openUntil is stored before
	// the word that says open, so a reader that sees open sees its time.
	word      atomic.Uint64
	openUntil atomic.Int64 // ns since epoch
	_         [48]byte     // keeps the counters below off the read-mostly line
	failures  atomic.Int64 // failures in a row, in the closed state
	window    *breakerWindow
	rejected  atomic.Uint64    // calls refused, ever (see Rejected)
	entered   [3]atomic.Uint64 // changes into each state, ever (see Transitions)

	mu         sync.Mutex
	trips      int // trips since the breaker last closed
	inFlight   int // probes let through and not yet reported, in the half-open state
	succeeded  int // probes that succeeded, in the half-open state
	pending    []breakerChange
	delivering bool // a goroutine is delivering pending to onChange and metrics
}

type breakerChange struct{ from, to BreakerState }

// NewBreaker returns a closed [Breaker]. Without options it trips when half
// of the outcomes of the last 10 seconds are failures and there are at least
// 20, or after 5 failures in a row; it stays open 1 s after a first trip,
// then 2 s and 4 s after each trip in a row (±10%), and lets 3 probes
// through when half-open. So a downstream that recovers gets its full
// traffic back within about 5 s. The options that change that:
//
//	WithBreakerFailureRatio(0.5, 20)   the ratio of failures that trips, and the least outcomes
//	WithBreakerWindow(10*time.Second)  the rolling window of that ratio
//	WithBreakerConsecutiveFailures(5)  failures in a row that trip; 0: none
//	WithBreakerOpenSchedule(Schedule{Duration: time.Second, Factor: 2, Jitter: 0.1, Cap: 4 * time.Second})
//	WithBreakerProbes(3)               probes let through at once when half-open
//	WithBreakerStateChange(fn)         a function told of each change of state
//	WithBreakerMetrics(m)              metrics
//	WithClock(c)                       the clock
//
// It ignores the other options.
func NewBreaker(opts ...Option) *Breaker {
	c := newConfig(opts)
	bc := breakerOptions(opts)
	b := &Breaker{
		clk:         c.clock,
		epoch:       c.clock.Now(),
		ratio:       bc.ratio,
		minRequests: uint64(bc.minRequests),
		consecutive: int64(bc.consecutive),
		probes:      bc.probes,
		schedule:    bc.schedule,
		onChange:    bc.onChange,
		metrics:     bc.metrics,
		window:      newBreakerWindow(bc.window),
	}
	_, b.realClock = c.clock.(clock.RealClock)
	return b
}

// BreakerPermit is a call that a [Breaker] let through, to report the
// call's outcome on with [BreakerPermit.Done] or [BreakerPermit.Release].
// Report each permit once: a permit reported again, or its zero value,
// does nothing. A permit is a small value; it must not be reported from two
// goroutines at once.
type BreakerPermit struct {
	b     *Breaker
	gen   uint32
	probe bool
}

// Done reports how the call ended: err is the call's error, and ctx the
// caller's context under which the call was made. nil, or a [Permanent]
// error, is a success; another error is a failure, unless ctx has ended
// (the caller gave up: the call counts for nothing); the [RetryAfter] hint
// of a failure lengthens the open time of a trip. See [Breaker] for how
// outcomes trip and close it. Done panics if ctx is nil.
func (p *BreakerPermit) Done(ctx context.Context, err error) {
	mustNotBeNil("BreakerPermit.Done", "ctx", ctx == nil)
	if p.b == nil {
		return
	}
	b := p.b
	p.b = nil
	o, hint := classifyOutcome(ctx, err)
	b.finish(p.gen, p.probe, o, hint)
}

// Release reports a call whose outcome says nothing about the downstream:
// it counts for nothing, and a probe frees its place for another.
func (p *BreakerPermit) Release() {
	if b := p.b; b != nil {
		p.b = nil
		b.finish(p.gen, p.probe, outcomeNeutral, 0)
	}
}

// Allow reports whether a call may be made now. It returns a permit to
// report the call's outcome on, or, without calling anything, an error
// that errors.Is matches with [ErrBreakerOpen]: while the breaker is open,
// a [*RetryAfterError] whose Delay is the time until a probe may go
// through; while it is half-open with all its probes out, ErrBreakerOpen
// itself, with no hint, since no time is known. It never blocks.
func (b *Breaker) Allow() (BreakerPermit, error) {
	w := b.word.Load()
	if BreakerState(w&3) == BreakerClosed {
		return BreakerPermit{b: b, gen: uint32(w >> 2)}, nil
	}
	return b.allowSlow(w)
}

// allowSlow is Allow when the breaker is not closed.
func (b *Breaker) allowSlow(w uint64) (BreakerPermit, error) {
	now := b.now()
	if BreakerState(w&3) == BreakerOpen {
		if until := time.Duration(b.openUntil.Load()); now < until {
			return BreakerPermit{}, b.refuse(until - now)
		}
	}
	b.mu.Lock()
	w = b.word.Load()
	switch BreakerState(w & 3) {
	case BreakerClosed:
		b.mu.Unlock()
		return BreakerPermit{b: b, gen: uint32(w >> 2)}, nil
	case BreakerOpen:
		if until := time.Duration(b.openUntil.Load()); now < until {
			b.mu.Unlock()
			return BreakerPermit{}, b.refuse(until - now)
		}
		w = b.setStateLocked(BreakerHalfOpen)
	}
	if b.inFlight >= b.probes {
		b.mu.Unlock()
		b.deliver()
		return BreakerPermit{}, b.refuse(0)
	}
	b.inFlight++
	b.mu.Unlock()
	b.deliver()
	return BreakerPermit{b: b, gen: uint32(w >> 2), probe: true}, nil
}

// refuse counts a refusal and returns its error, with a hint of wait if
// wait > 0. The hint allocates: a refusal is not the path to make cheap.
func (b *Breaker) refuse(wait time.Duration) error {
	b.rejected.Add(1)
	if b.metrics != nil {
		b.metrics.IncRejected()
	}
	if wait <= 0 {
		return ErrBreakerOpen
	}
	return &RetryAfterError{Delay: wait, Err: ErrBreakerOpen}
}

// Rejected returns the number of calls the breaker has refused since it
// was created: the calls of Allow that returned an error, which include
// the attempts it refused for [Retry] and the others that take it through
// [WithPacer]. It is for metrics read when they are collected, as
// [BreakerMetrics] is for metrics pushed as they happen.
func (b *Breaker) Rejected() uint64 { return b.rejected.Load() }

// Transitions returns how many times the breaker has changed into state to
// since it was created: Transitions(BreakerOpen) counts its trips, failed
// probes included, and Transitions(BreakerClosed) its recoveries (the
// closed state it starts in is not counted). A state that is not one of
// the three gives 0. Like [Breaker.Rejected], it is for metrics read when
// they are collected; a change is counted when the breaker makes it, before
// it reaches [WithBreakerStateChange]'s function.
func (b *Breaker) Transitions(to BreakerState) uint64 {
	if int(to) >= len(b.entered) {
		return 0
	}
	return b.entered[to].Load()
}

// State returns the breaker's state now: an open breaker whose open time
// has passed becomes half-open here, as it would at the next call.
func (b *Breaker) State() BreakerState {
	w := b.word.Load()
	s := BreakerState(w & 3)
	if s != BreakerOpen || b.now() < time.Duration(b.openUntil.Load()) {
		return s
	}
	b.mu.Lock()
	w = b.word.Load()
	if BreakerState(w&3) == BreakerOpen && b.now() >= time.Duration(b.openUntil.Load()) {
		w = b.setStateLocked(BreakerHalfOpen)
	}
	b.mu.Unlock()
	b.deliver()
	return BreakerState(w & 3)
}

// finish counts the outcome of a call let through in generation gen.
func (b *Breaker) finish(gen uint32, probe bool, o outcome, hint time.Duration) {
	if probe {
		b.finishProbe(gen, o, hint)
		return
	}
	if o == outcomeNeutral {
		return
	}
	now := b.now()
	w := b.word.Load()
	if uint32(w>>2) != gen {
		if o != outcomeSuccess && hint > 0 {
			b.extend(now, hint)
		}
		return // let through before a change of state
	}
	if o == outcomeSuccess {
		b.window.succeeded(now)
		if b.failures.Load() != 0 { // a load first: no write to a shared line per success
			b.failures.Store(0)
		}
		return
	}
	ok, failed := b.window.failed(now)
	inRow := b.failures.Add(1)
	if (b.consecutive > 0 && inRow >= b.consecutive) ||
		(ok+failed >= b.minRequests && float64(failed) >= b.ratio*float64(ok+failed)) {
		b.trip(w, now, hint)
	}
}

// finishProbe counts the outcome of a probe let through in generation gen.
func (b *Breaker) finishProbe(gen uint32, o outcome, hint time.Duration) {
	var now time.Duration
	if o != outcomeSuccess && o != outcomeNeutral {
		now = b.now()
	}
	b.mu.Lock()
	w := b.word.Load()
	if uint32(w>>2) != gen || BreakerState(w&3) != BreakerHalfOpen {
		b.mu.Unlock()
		if o != outcomeSuccess && o != outcomeNeutral && hint > 0 {
			b.extend(now, hint)
		}
		return
	}
	b.inFlight--
	switch o {
	case outcomeNeutral:
	case outcomeSuccess:
		if b.succeeded++; b.succeeded >= b.probes {
			b.trips = 0
			b.failures.Store(0)
			b.window.reset()
			b.setStateLocked(BreakerClosed)
		}
	default:
		b.openLocked(now, hint)
	}
	b.mu.Unlock()
	b.deliver()
}

// trip opens the breaker, if it is still in the closed state of word w.
func (b *Breaker) trip(w uint64, now, hint time.Duration) {
	b.mu.Lock()
	if b.word.Load() != w {
		b.mu.Unlock()
		return // tripped by a concurrent failure
	}
	b.openLocked(now, hint)
	b.mu.Unlock()
	b.deliver()
}

// openLocked opens the breaker at now for the next wait of its schedule,
// or hint if later.
func (b *Breaker) openLocked(now, hint time.Duration) {
	b.trips++
	d := b.schedule.Delay(b.trips)
	if hint > 0 {
		d = max(d, min(hint, DefaultMaxRetryAfter))
	}
	b.openUntil.Store(int64(addDuration(now, d)))
	b.setStateLocked(BreakerOpen)
}

// extend lengthens the open time to now+hint, if the breaker is open and
// that is later.
func (b *Breaker) extend(now, hint time.Duration) {
	until := addDuration(now, min(hint, DefaultMaxRetryAfter))
	b.mu.Lock()
	if BreakerState(b.word.Load()&3) == BreakerOpen && int64(until) > b.openUntil.Load() {
		b.openUntil.Store(int64(until))
	}
	b.mu.Unlock()
}

// setStateLocked moves the breaker to state to, in a new generation, and
// queues the change for delivery. It returns the new word.
func (b *Breaker) setStateLocked(to BreakerState) uint64 {
	w := b.word.Load()
	from := BreakerState(w & 3)
	w = (w>>2+1)<<2 | uint64(to)
	if to == BreakerHalfOpen {
		b.inFlight, b.succeeded = 0, 0
	}
	b.word.Store(w)
	b.entered[to].Add(1)
	if b.onChange != nil || b.metrics != nil {
		b.pending = append(b.pending, breakerChange{from, to})
	}
	return w
}

// now returns the time since the breaker's epoch, never negative.
func (b *Breaker) now() time.Duration {
	var d time.Duration
	if b.realClock {
		d = time.Since(b.epoch)
	} else {
		d = b.clk.Since(b.epoch)
	}
	return max(d, 0)
}
