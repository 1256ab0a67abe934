package backoff

import (
	"context"
	"errors"
	"k8s.io/utils/clock"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter paces events with a token bucket: it holds up to burst tokens,
// gains r tokens per second, and each event takes one (or n). It has
// golang.org/x/time/rate's Limiter semantics and method names, so code moves
// by changing the import and the constructor:
//
//   - [Limiter.Allow] and [Limiter.AllowN] take tokens only if they are there
//     now, for callers that drop or refuse what exceeds the rate;
//   - [Limiter.Wait] and [Limiter.WaitN] block until the tokens are earned,
//     for callers that pace themselves;
//   - [Limiter.Reserve] and [Limiter.ReserveN] take tokens at once and say how
//     long to wait for them, for callers that schedule the work themselves.
//
// For the same sequence of calls at the same instants, the answers and
// delays are x/time/rate's to the nanosecond, float64 rounding included. The
// differences:
//
//   - Time comes from the clock given with [WithClock], so a test drives the
//     limiter with a FakeClock, and Wait returns when the clock is stepped.
//     There are no *At forms taking a time.Time: the clock is the time.
//   - If the clock goes backwards, the limiter earns nothing until it passes
//     the latest instant it has seen (x/time/rate earns the re-traversed
//     interval again). A clock read before the limiter was made counts as the
//     moment it was made.
//   - A waiting Wait allocates nothing: it reuses a timer of its own.
//   - Wait reports the context's cause, and the errors are values
//     ([ErrExceedsBurst], [ErrWaitExceedsDeadline]).
//   - A negative n counts as 0 (x/time/rate adds the tokens, past burst).
//   - Cancelling a [Reservation] twice gives its tokens back once.
//
// A Limiter is safe for concurrent use by multiple goroutines. Its zero value
// is not usable (its methods panic): use [NewLimiter].
type Limiter struct {
	clock clock.WithDelayedExecution
	epoch time.Time // the clock's time at construction; instants count from it

	// refusedBefore lets AllowN refuse without the lock: every AllowN(n ≥ 1)
	// at an instant before it is refused by the bucket as it stands. 0 (the
	// zero value) says nothing, since instants are never negative.
	//
	// Why: when a limiter is doing its job, most Allows are refusals, and a
	// refusal changes nothing (take writes only when it grants; AllowN
	// records lastEvent only then). So the question "is this a refusal?"
	// can be answered from one word that changes only when the bucket does,
	// and concurrent refusals share that word's cache line read-only
	// instead of passing the mutex's line between cores. One word, and not
	// a sequence-counted copy of the bucket read without the lock, because
	// the answer for one token is monotonic in the instant (see
	// firstGrantOfOne): the whole float computation folds into the instant
	// it first grants, computed exactly, with take's own arithmetic, by the
	// writer, and a refusal is a clock read and a comparison. The decisions
	// are exactly the locked path's: a refusal here is the answer the
	// locked path gives at that instant with the bucket as it stood when the
	// word was read, and every other call takes the lock.
	//
	// It is written under mu only: AllowN sets it from the bucket it has
	// just decided on; every other change to the bucket, the limit or the
	// burst first resets it to 0 (forgetLocked), since those may make a
	// grant come sooner (Cancel, SetLimit, SetBurst), or, for takes, could
	// in float rounding land an earning a hair above the unsplit one.
	refusedBefore atomic.Int64

	// grantedAt lets AllowN(1) grant without the lock while the bucket
	// refills faster than it is drawn on (a limiter that is not saturated).
	// When it is an instant T ≥ 0, the bucket's state is not in bucket and
	// lastEvent but here: burst−1 tokens earned up to T, the last event at
	// T, as a grant that found the bucket full leaves it. A grant at an
	// instant at least refillAfter later finds it full again, whatever
	// happened in between, and leaves the same form at its own instant: so
	// the grant is a clock read, a comparison and a compare-and-swap of T,
	// the answer and the state being exactly what the locked path computes
	// (see bucketState.refillAfter). Any other call, and a grant that comes
	// sooner, takes the lock and moves the state back into bucket first
	// (claimLocked); a grant under the lock that leaves the form puts it
	// here again (publishLocked). −1 when the state is in bucket.
	//
	// refillAfter changes, under mu, only with the limit and the burst, and
	// only while grantedAt is −1. A grant that read grantedAt before such a
	// change cannot succeed after it: grantedAt is published again only at
	// an instant later than the change's (paramsAt), and it never decreases,
	// so the compare-and-swap sees a different value.
	grantedAt   atomic.Int64
	refillAfter atomic.Int64 // maxDuration when the form cannot be kept
	_           [64]byte     // keeps the mutex's line, written by every locked call, off the fields every call reads

	timers timerPool

	mu        sync.Mutex
	limit     float64       // ≥ 0; InfLimit means no limit
	burst     int           // ≥ 0
	bucket    bucketState   // guarded by mu; stale while grantedAt ≥ 0
	lastEvent time.Duration // the latest reservation's time-to-act; for Cancel
	paramsAt  time.Duration // the instant of the last change of limit or burst
}

// NewLimiter returns a [Limiter] that allows r events per second on average
// and bursts of up to burst events, starting full. It reads the time, and
// waits, through the clock given with [WithClock] (the real clock by
// default), and ignores the other options.
//
// r is events per second: 0.5 is one event every two seconds. [InfLimit] or
// math.Inf(1) means no limit: every event is allowed at once, whatever the
// burst. As with x/time/rate, a zero r allows the burst the limiter starts
// with and nothing after it, and a zero burst allows no event unless r is
// infinite. A negative or NaN r and a negative burst panic, by the package's
// bad-input rule.
func NewLimiter(r float64, burst int, opts ...Option) *Limiter {
	checkLimiterArgs("NewLimiter", r, burst)
	c := newConfig(opts)
	l := &Limiter{clock: c.clock, epoch: c.clock.Now()}
	l.init(r, burst)
	return l
}

func (l *Limiter) init(r float64, burst int) {
	l.timers.clock = l.clock
	l.limit = sanitizeLimit(r)
	l.burst = burst
	l.bucket.tokens = float64(burst)
	l.grantedAt.Store(-1)
	l.refillAfter.Store(int64(refillAfter(l.limit, l.burst)))
}

// now returns the current instant: the time since the limiter was made,
// never negative. Since reads only the monotonic clock of a real clock, one
// system clock read instead of time.Now's two.
func (l *Limiter) now() time.Duration {
	return max(l.clock.Since(l.epoch), 0)
}

// Limit returns the rate, in events per second; [InfLimit] when unlimited.
func (l *Limiter) Limit() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}

// Burst returns the most tokens the limiter holds, which is the most events
// it allows at once.
func (l *Limiter) Burst() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.burst
}

// Tokens returns the tokens available now: at most the burst, and negative
// while reservations wait for tokens they have taken.
func (l *Limiter) Tokens() float64 {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claimLocked()
	return l.bucket.tokensAt(now, l.limit, l.burst)
}

// SetLimit changes the rate from now on: tokens earned so far are kept (up
// to the burst), and later ones are earned at r. Reservations already made
// keep their times. r is read as in [NewLimiter], except that a negative or
// NaN r, being a value that arrives at call time, counts as 0 instead of
// panicking.
func (l *Limiter) SetLimit(r float64) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claimLocked()
	l.forgetLocked()
	l.bucket.settle(now, l.limit, l.burst)
	l.limit = sanitizeLimit(r)
	l.paramsChangedLocked()
}

// SetBurst changes the burst from now on. The tokens held are not cut at
// once: they are capped at the new burst from the next call on, as with
// x/time/rate. A negative burst counts as 0.
func (l *Limiter) SetBurst(burst int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claimLocked()
	l.forgetLocked()
	l.bucket.settle(now, l.limit, l.burst)
	l.burst = max(burst, 0)
	l.paramsChangedLocked()
}

// paramsChangedLocked follows a change of the limit or the burst, made with
// the state in bucket (see grantedAt).
func (l *Limiter) paramsChangedLocked() {
	l.paramsAt = l.bucket.last
	l.refillAfter.Store(int64(refillAfter(l.limit, l.burst)))
}

// Allow reports whether an event may happen now, and if so takes its token.
// It is shorthand for AllowN(1). It never blocks.
func (l *Limiter) Allow() bool { return l.AllowN(1) }

// AllowN reports whether n events may happen now, and if so takes their n
// tokens; otherwise it takes nothing. It is false whenever n exceeds the
// burst (unless the limit is infinite). A negative n counts as 0. It never
// blocks and allocates nothing; while the bucket is empty, a refusal takes
// no lock, so refusals from many goroutines do not contend; and while the
// bucket is full again at every call (a limiter that is not saturated),
// AllowN(1) takes no lock either, only a compare-and-swap.
func (l *Limiter) AllowN(n int) bool {
	now := l.now()
	if n == 1 {
		for t := l.grantedAt.Load(); t >= 0; t = l.grantedAt.Load() {
			if int64(now) < t {
				// A concurrent grant read the clock after this call did and
				// published first. Its instant was read before this Load,
				// so a second read is not earlier than it.
				if now = l.now(); int64(now) < t {
					break
				}
			}
			if int64(now)-t < l.refillAfter.Load() {
				break
			}
			if l.grantedAt.CompareAndSwap(t, int64(now)) {
				return true // see grantedAt
			}
		}
	}
	if n > 0 && int64(now) < l.refusedBefore.Load() {
		return false // see refusedBefore
	}
	n = max(n, 0)
	l.mu.Lock()
	l.claimLocked()
	// reserveLocked(now, n, 0) without building the Reservation: Allow is
	// the hot path (see BenchmarkLimiterAllow in bench/).
	ok := l.limit == InfLimit
	if !ok {
		if _, ok = l.bucket.take(now, n, l.limit, l.burst, 0); ok {
			l.lastEvent = now // the time-to-act of a grant with no wait
			l.noteFirstGrantLocked()
			l.publishLocked()
		} else if l.refusedBefore.Load() == 0 {
			// Unchanged bucket, so a word already set still holds.
			l.noteFirstGrantLocked()
		}
	}
	l.mu.Unlock()
	return ok
}

// claimLocked moves the bucket's state into bucket and lastEvent, if it is
// in grantedAt, before a call under the lock reads or changes it.
func (l *Limiter) claimLocked() {
	if l.grantedAt.Load() < 0 {
		return // only the lock's holder sets it from −1
	}
	t := time.Duration(l.grantedAt.Swap(-1))
	l.bucket = bucketState{tokens: float64(l.burst) - 1, last: t}
	l.lastEvent = t
}

// publishLocked moves the bucket's state into grantedAt after a grant under
// the lock, if the grant left it in the form grantedAt holds.
func (l *Limiter) publishLocked() {
	s := l.bucket
	if s.tokens == float64(l.burst)-1 && l.lastEvent == s.last && s.last > l.paramsAt &&
		l.refillAfter.Load() < int64(maxDuration) {
		l.grantedAt.Store(int64(s.last))
	}
}

// noteFirstGrantLocked sets refusedBefore for the bucket as it is now.
func (l *Limiter) noteFirstGrantLocked() {
	t := l.bucket.firstGrantOfOne(l.limit, l.burst)
	if l.refusedBefore.Load() != int64(t) {
		l.refusedBefore.Store(int64(t)) // stores only on change: readers keep their copy of the line
	}
}

// forgetLocked resets refusedBefore before a change to the bucket, the
// limit or the burst that does not set it again.
func (l *Limiter) forgetLocked() {
	if l.refusedBefore.Load() != 0 {
		l.refusedBefore.Store(0)
	}
}

// Reserve is shorthand for ReserveN(1).
func (l *Limiter) Reserve() Reservation { return l.ReserveN(1) }

// ReserveN takes n tokens now, however long the limiter needs to earn them,
// and returns a [Reservation] that says how long the caller must wait before
// its n events may happen. The caller either waits [Reservation.Delay] or
// gives the tokens back with [Reservation.Cancel]. The reservation is not OK,
// and takes nothing, when n exceeds the burst (unless the limit is
// infinite). A negative n counts as 0. ReserveN never blocks and allocates
// nothing.
func (l *Limiter) ReserveN(n int) Reservation {
	now := l.now()
	l.mu.Lock()
	r, _ := l.reserveLocked(now, n, maxDuration)
	l.mu.Unlock()
	return r
}

// reserveLocked is x/time/rate's reserveN at instant now. It also returns
// the wait, which the reservation's time-to-act holds only up to saturation.
func (l *Limiter) reserveLocked(now time.Duration, n int, maxWait time.Duration) (Reservation, time.Duration) {
	l.claimLocked()
	n = max(n, 0)
	if l.limit == InfLimit {
		// The limit recorded is 0, as x/time/rate records it, which matters
		// only if the limit is lowered before the reservation is cancelled.
		return Reservation{owner: l, ok: true, tokens: n, timeToAct: now}, 0
	}
	wait, ok := l.bucket.take(now, n, l.limit, l.burst, maxWait)
	if !ok {
		return Reservation{owner: l, limit: l.limit}, wait
	}
	l.forgetLocked()
	r := Reservation{owner: l, ok: true, tokens: n, limit: l.limit, timeToAct: addInstant(now, wait)}
	l.lastEvent = r.timeToAct
	return r, wait
}

// takeOneLocked is reserveLocked(now, 1, maxDuration) for a caller that
// never cancels (BucketRateLimiter.When): the same arithmetic and the same
// wait, without building a Reservation. It still records the event's time, so
// that a Reservation of the same Limiter cancelled later sees it.
func (l *Limiter) takeOneLocked(now time.Duration) time.Duration {
	l.claimLocked()
	if l.limit == InfLimit {
		return 0
	}
	wait, ok := l.bucket.take(now, 1, l.limit, l.burst, maxDuration)
	if ok {
		l.forgetLocked()
		l.lastEvent = addInstant(now, wait)
	}
	return wait
}

func (l *Limiter) instant() time.Duration { return l.now() }

func (l *Limiter) cancelReservation(r *Reservation, now time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claimLocked()
	if l.limit == InfLimit {
		return
	}
	l.forgetLocked()
	l.bucket.giveBack(r, now, l.limit, l.burst, &l.lastEvent)
}

// A Reservation is the answer of [Limiter.ReserveN] or [KeyedLimiter.Reserve]:
// tokens taken now for events that may happen after [Reservation.Delay].
// It mirrors x/time/rate's Reservation, returned as a value so that
// reserving allocates nothing: keep it in a variable to call Cancel.
//
// A Reservation may be read by several goroutines, but Cancel must not race
// with another Cancel of the same Reservation. Its zero value is a
// reservation that is not OK.
type Reservation struct {
	owner     reservationOwner
	timeToAct time.Duration // the instant the events may happen
	limit     float64       // the limit when the tokens were taken
	tokens    int           // taken, and not yet given back
	ok        bool
}

// reservationOwner is the limiter a Reservation came from.
type reservationOwner interface {
	// instant is the owner's current instant, as its reservations count time.
	instant() time.Duration
	// cancelReservation gives r's tokens back at now.
	cancelReservation(r *Reservation, now time.Duration)
}

// OK reports whether the limiter granted the tokens. A reservation is not OK
// when it asked for more than the burst; its Delay is then the largest
// time.Duration and its Cancel does nothing.
func (r Reservation) OK() bool { return r.ok }

// Delay returns how long from now the caller must wait before the reserved
// events may happen: 0 when they may happen at once, never negative, and the
// largest time.Duration (x/time/rate's InfDuration) when the reservation is
// not OK or the limit is zero. It reads the limiter's clock.
func (r Reservation) Delay() time.Duration {
	if !r.ok || r.timeToAct == maxDuration {
		// A saturated time-to-act stands for "never" (a zero limit).
		return maxDuration
	}
	return max(r.timeToAct-r.owner.instant(), 0)
}

// Cancel gives the reserved tokens back, as far as that is still possible,
// by x/time/rate's rule: nothing once the reservation's time has come, and
// otherwise the tokens minus those that later reservations have already
// counted on, so those are not delayed. A second Cancel, and a Cancel of a
// reservation that is not OK, does nothing.
func (r *Reservation) Cancel() {
	if !r.ok || r.tokens == 0 {
		return
	}
	r.owner.cancelReservation(r, r.owner.instant())
	r.tokens = 0
}

// ErrExceedsBurst is the error of [Limiter.WaitN] when n exceeds the burst:
// the limiter can never hold that many tokens, so waiting would never end.
// x/time/rate returns an error with the same meaning.
var ErrExceedsBurst = errors.New("backoff: n exceeds the limiter's burst")

// ErrWaitExceedsDeadline is the error of a Wait that would have to wait past
// its context's deadline: it returns at once, takes no token, and the
// context is not done yet. x/time/rate returns an error with the same
// meaning. errors.Is(err, context.DeadlineExceeded) holds for it.
var ErrWaitExceedsDeadline error = waitDeadlineError{}

type waitDeadlineError struct{}

func (waitDeadlineError) Error() string {
	return "backoff: the wait would outlast the context's deadline"
}

func (waitDeadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// Wait is shorthand for WaitN(ctx, 1).
func (l *Limiter) Wait(ctx context.Context) error { return l.WaitN(ctx, 1) }

// WaitN blocks until n events may happen, taking their tokens, and returns
// nil; on a FakeClock it returns when the clock is stepped to that instant.
// It returns at once, without taking tokens, with [ErrExceedsBurst] if n
// exceeds the burst (and the limit is not infinite), with ctx's error if ctx
// is already done, and with [ErrWaitExceedsDeadline] if ctx has a deadline
// sooner than the tokens would be earned (as x/time/rate does: nobody waits
// for a wait that is bound to fail). If ctx ends while it waits, WaitN gives
// the tokens back (see [Reservation.Cancel]) and returns ctx's error, which
// also matches context.Cause(ctx) under errors.Is when a cause was given. A
// negative n counts as 0.
//
// WaitN starts no goroutine; while it waits it holds one timer of the clock,
// which it stops before returning. It allocates nothing in steady state:
// timers are reused.
func (l *Limiter) WaitN(ctx context.Context, n int) error {
	now := l.now()
	l.mu.Lock()
	tooMany := n > l.burst && l.limit != InfLimit
	l.mu.Unlock()
	if tooMany {
		return ErrExceedsBurst
	}
	if ctx.Err() != nil {
		return contextError(ctx)
	}
	maxWait := waitLimit(ctx, l.epoch, now)
	l.mu.Lock()
	r, wait := l.reserveLocked(now, n, maxWait)
	l.mu.Unlock()
	if !r.ok {
		return ErrWaitExceedsDeadline
	}
	if !l.timers.sleep(ctx, wait) {
		// Directly, not r.Cancel(): a call through the reservation's owner
		// interface would make r escape, one allocation per wait.
		l.cancelReservation(&r, l.now())
		return contextError(ctx)
	}
	return nil
}

// waitLimit is how long a Wait starting at instant now may wait before ctx's
// deadline; the largest time.Duration without a deadline.
func waitLimit(ctx context.Context, epoch time.Time, now time.Duration) time.Duration {
	deadline, ok := ctx.Deadline()
	if !ok {
		return maxDuration
	}
	// epoch carries the real clock's monotonic reading, and so does a
	// deadline from context.WithTimeout: the difference is monotonic.
	return deadline.Sub(epoch.Add(now))
}

// contextError is the error of a Wait that ctx ended: ctx.Err(), wrapped
// with context.Cause(ctx) when the cause says more.
func contextError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return &causeError{err: err, cause: cause}
	}
	return err
}

// causeError is ctx.Err() together with ctx's cause; errors.Is matches both.
type causeError struct{ err, cause error }

func (e *causeError) Error() string   { return e.err.Error() + ": " + e.cause.Error() }
func (e *causeError) Unwrap() []error { return []error{e.err, e.cause} }

// timerPool keeps the clock's timers that waits have finished with.
//
// A Wait that has to wait needs a timer of the injected clock, and
// clock.WithDelayedExecution offers no way to wait on the clock without one
// (a FakeClock releases only its registered waiters). Creating a timer
// allocates with every clock (a real clock's NewTimer allocates a
// time.Timer and its wrapper), so finished timers are kept and Reset for the
// next wait instead. A sync.Pool rather than one timer per limiter, because
// any number of goroutines may wait at once.
type timerPool struct {
	clock clock.WithDelayedExecution
	pool  sync.Pool // of clock.Timer, stopped and drained
}

// sleep waits d, or until ctx ends; it reports whether it waited d.
func (p *timerPool) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t, _ := p.pool.Get().(clock.Timer)
	if t == nil {
		t = p.clock.NewTimer(d)
	} else {
		t.Reset(d)
	}
	select {
	case <-t.C():
		p.pool.Put(t)
		return true
	case <-ctx.Done():
		if !t.Stop() {
			// It fired as ctx ended. A FakeClock's timer channel, and a
			// real one under the pre-Go 1.23 timer semantics, then holds the
			// tick: drain it, or the next Reset would wake at once.
			select {
			case <-t.C():
			default:
			}
		}
		p.pool.Put(t)
		return false
	}
}

// sleepOrSignal waits d, or until signal is closed, or until ctx ends; it
// returns ctx's error in the last case and nil otherwise.
func (p *timerPool) sleepOrSignal(ctx context.Context, d time.Duration, signal <-chan struct{}) error {
	t, _ := p.pool.Get().(clock.Timer)
	if t == nil {
		t = p.clock.NewTimer(d)
	} else {
		t.Reset(d)
	}
	var err error
	select {
	case <-t.C():
		p.pool.Put(t)
		return nil
	case <-signal:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if !t.Stop() {
		// It fired as we were woken otherwise: drain it (see sleep).
		select {
		case <-t.C():
		default:
		}
	}
	p.pool.Put(t)
	return err
}
