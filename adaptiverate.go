package backoff

import (
	"context"
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// AdaptiveRate is a request rate learned from a downstream's throttling
// answers, for a quota the caller cannot see: a cloud API's requests per
// second, shared with other clients, that answers 429 (or 503) with a
// Retry-After beyond it.
//
// Pace each request with [AdaptiveRate.Wait] (or [AdaptiveRate.Allow], which
// does not wait), and report its answer: [AdaptiveRate.Throttled] for a
// throttling answer, with its Retry-After, and [AdaptiveRate.Succeeded] for
// any other.
//
// # How the rate moves
//
// The rate starts at [DefaultInitialRate] (or the rate of
// [WithInitialRate]) and, until the first throttling answer, every success
// raises it by one request per second: a slow start, as TCP's, that grows
// the rate about e-fold in a second while the quota lets everything through
// (up to four times the rate requests are actually sent at, so that a
// client that sends little does not build up a rate it has never tried).
// While requests queue in [AdaptiveRate.Wait], held back by the rate rather
// than by the client's demand, each success raises it by two, so that many
// goroutines sharing one AdaptiveRate reach their quota's rate before its
// burst has gone unused.
// Starting without a limit (WithInitialRate(InfLimit), as AWS SDKs' adaptive
// mode starts) suits a client alone with its quota, but when many clients
// start together, the few that happen not to be throttled at first keep no
// limit and take the quota from the others, which are then throttled again
// in rounds (see the shared-quota scenario of examples/adaptive).
//
// A throttling answer cuts the rate to 0.8 times the rate that met it, and
// remembers that rate as the ceiling. The rate that met it is the
// lowest of the rate allowed, the rate requests were actually sent at, and,
// when the answer has a Retry-After, the client's successes since the last
// cut over the time until the quota lets it in again (time the client spent
// idle, sending nothing, is not counted; and since a Retry-After comes in
// whole seconds, its last second is not counted either: "1" is what a
// server says whose bucket refills in 50 ms): what the quota really
// granted it, the best estimate of its share that a client with no view of
// the others has. Successes then raise the rate along a cubic curve of the
// time since the cut, as TCP CUBIC grows its window: to 0.95 times the
// ceiling in under a second, then on past it, flat at first and faster the
// longer no throttle comes (back to the ceiling about 5 s after the cut,
// twice it after about 12 s), so that a client spends its time just below
// where the quota was found and probes beyond it gently. Compared with AIMD,
// whose linear growth crosses the quota at full speed every cycle, that is
// fewer throttled requests for the same throughput; compared with AWS SDKs'
// adaptive mode (CUBIC with an absolute scale), the curve is relative to the
// ceiling, so it behaves the same at 2 and at 2,000 requests per second. The
// rate never grows past twice the rate at which requests were actually sent,
// so that an idle client does not build up a rate it has never tried, and
// never falls below one request every 10 s.
//
// A throttling answer to a request sent before the last cut does not cut
// again: the cut has answered it. With many requests in flight (2,000 a
// second at a 200 ms round trip is 400) every one of them meets the quota
// at once, and cutting for each would leave almost nothing of the rate. An
// answer counts as such while the answers to the requests in flight at
// the cut are still coming in (at most a second of sending: a request that
// never gets an answer reported would otherwise keep the count up), during
// the Retry-After hold that the cut began, and within one request interval
// of the cut. A positive Retry-After is honoured whatever the rate: no
// request is allowed before it has passed.
//
// Requests are spaced 1/rate apart, with no burst. Time is read from the
// clock of [WithClock]. An AdaptiveRate is safe for concurrent use by
// multiple goroutines; Allow, Succeeded, Throttled and Quota allocate
// nothing, nor does a waiting Wait while the rate stays put (a change of the
// rate while requests wait allocates the one channel that wakes them all). Its zero value is not usable (its
// methods panic): use [NewAdaptiveRate].
type AdaptiveRate struct {
	clock  clock.WithDelayedExecution
	epoch  time.Time
	timers timerPool

	mu   sync.Mutex
	rate float64       // requests per second; InfLimit for none
	hold time.Duration // no request before it (Retry-After)
	// Request slots are positions on an axis that advances at the rate:
	// slot x is due when the axis reaches x. The axis reads v until the
	// instant vAt (a Retry-After hold freezes it) and advances at the rate
	// from then on. A change of the rate re-anchors the axis at the
	// present, so the slots already given to waiting requests move with
	// it: sooner when the rate rises, later when it is cut. Slots handed
	// out as instants would keep the rate of the moment they were taken,
	// and many goroutines waiting on a client in its slow start would go
	// on waiting at the start's rate for seconds after it had doubled.
	v     float64
	vAt   time.Duration
	nextV float64 // the next free slot
	// The slot of the request that went last, and when: a change of the
	// rate spaces the next one from it.
	lastSentV  float64
	lastSentAt time.Duration
	// Waiters re-read their slot's instant when changed is closed: on a
	// cut, a hold, or a rise of more than rateSignalStep since the last
	// time they were told (at the rate signalled). changed is made by the
	// first waiter after each signal: a waiter allocates nothing while the
	// rate stays put.
	waiting   int
	changed   chan struct{}
	signalled float64
	// quotaUntil is when the quota the server last reported resets (see
	// Quota): until then the rate is the reported one, and successes do
	// not raise it.
	quotaUntil time.Duration
	quotaLeft  float64 // the units the report left, less those taken since
	// slowStart is true until the first cut: a success adds one request
	// per second to the rate.
	slowStart bool
	// The cubic curve: the rate at the last cut, when it was, and how long
	// the curve takes to climb back to it.
	ceiling float64
	cutAt   time.Duration
	climb   float64 // seconds
	// The measured send rate, smoothed over buckets of rateBucket.
	sent         float64
	sentBucket   time.Duration // start of the bucket being counted
	sentInBucket float64
	succeeded    float64 // successes since the last cut, or since the client was last idle
	// countedFrom is when the client last came back from being idle (it
	// asked for no slot for rateIdle past the one it could have had):
	// succeeded counts from the later of it and the last cut, so that idle
	// time does not water down the estimate of the client's share.
	countedFrom time.Duration
	// Answers to requests sent before the last cut do not cut again (see
	// staleLocked): the requests given a slot and the answers reported,
	// ever; the answers still to come from the requests in flight at the
	// cut; and the end of the Retry-After hold the cut began.
	sentTotal, answered uint64
	staleLeft           uint64
	cutHold             time.Duration
	// Steering (adaptiveratesteer.go): while steered the rate is set by
	// Steer, not by the law; onThrottled hears of each throttling answer
	// that is not stale. The counters feed Stats.
	steered                      bool
	onThrottled                  func(retryAfter time.Duration)
	succeededTotal, throttledAll uint64
	waited                       uint64
}

// DefaultInitialRate is the rate, in requests per second, that an
// [AdaptiveRate] starts at unless [WithInitialRate] says otherwise.
const DefaultInitialRate = 5

// The constants of the control law; see AdaptiveRate's doc.
const (
	rateBeta       = 0.8   // a cut's factor
	ratePlateau    = 0.95  // where the curve flattens, in multiples of the ceiling
	rateCubicScale = 0.4   // the curve's scale, in multiples of the ceiling per second³
	rateProbeScale = 0.002 // the share of the scale past the plateau
	rateSmoothing  = 0.8   // the weight of the latest bucket in the measured rate
	rateMin        = 0.1   // requests per second
	rateBucket     = 500 * time.Millisecond
	rateIdle       = time.Second // a client that asks for no slot this long past its own is idle
	rateSignalStep = 0.05        // a rise of the rate that moves waiting requests, relative
)

// WithInitialRate sets the rate, in requests per second, that an
// [AdaptiveRate] starts at: [DefaultInitialRate] by default. [InfLimit] (or
// math.Inf(1)) starts with no limit until the first throttling answer. It
// panics if r is not positive or is NaN. Other constructors ignore it.
func WithInitialRate(r float64) Option {
	if !(r > 0) {
		badArgument("WithInitialRate", "r must be a positive number of requests per second", r)
	}
	return floatOption(optionInitialRate, sanitizeLimit(r))
}

// NewAdaptiveRate returns an [AdaptiveRate] at the rate of [WithInitialRate]
// ([DefaultInitialRate] by default), in its slow start. It reads the time,
// and waits, through the clock of [WithClock] (the real clock by default),
// and ignores the other options.
func NewAdaptiveRate(opts ...Option) *AdaptiveRate {
	c := newConfig(opts)
	r := &AdaptiveRate{clock: c.clock, epoch: c.clock.Now(), rate: DefaultInitialRate, slowStart: true}
	if c.limits.initialRate != 0 {
		r.rate = c.limits.initialRate
	}
	r.timers.clock = c.clock
	r.onThrottled = c.limits.onThrottled
	return r
}

func (r *AdaptiveRate) now() time.Duration { return max(r.clock.Since(r.epoch), 0) }

// Rate returns the current rate in requests per second: [InfLimit] for no
// limit, which only [WithInitialRate] gives, until the first throttling
// answer.
func (r *AdaptiveRate) Rate() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rate
}

// Allow is shorthand for AllowN(1).
func (r *AdaptiveRate) Allow() bool { return r.AllowN(1) }

// AllowN reports whether a request of n units may be sent now, and if so
// counts it. It never blocks. A request of n units takes n times a
// request's share of the rate: it goes when one of 1 unit would, and the
// next one n/rate later, so that a rate in units (tokens per second, say)
// paces requests of any size. n ≤ 0 is allowed and takes nothing.
func (r *AdaptiveRate) AllowN(n int) bool {
	if n <= 0 {
		return true
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if now < r.dueLocked(r.nextV) || r.overQuotaLocked(now, float64(n)) {
		return false
	}
	x, at := r.takeLocked(now, float64(n))
	r.sentLocked(x, at, float64(n))
	return true
}

// Wait blocks until a request may be sent, counts it, and returns nil; on a
// FakeClock it returns when the clock is stepped to that instant. Requests
// that wait are served in the order they called Wait, and a change of the
// rate while they wait moves them with it: sooner when it rises, later when
// it is cut or a Retry-After holds them. It returns ctx's error at once if
// ctx is already done, and if ctx ends while it waits (its slot is then
// given back if no later request has been given the next one). While it
// waits it holds one timer of the clock. Wait is shorthand for WaitN(ctx, 1).
func (r *AdaptiveRate) Wait(ctx context.Context) error { return r.WaitN(ctx, 1) }

// WaitN is Wait for a request of n units (see AllowN). n ≤ 0 returns nil at
// once, unless ctx is done.
func (r *AdaptiveRate) WaitN(ctx context.Context, n int) error {
	mustNotBeNil("AdaptiveRate.Wait", "ctx", ctx == nil)
	if ctx.Err() != nil {
		return contextError(ctx)
	}
	if n <= 0 {
		return nil
	}
	units := float64(n)
	now := r.now()
	r.mu.Lock()
	if r.overQuotaLocked(now, units) {
		r.holdLocked(now, r.quotaUntil)
	}
	x, at := r.takeLocked(now, units)
	if at <= now {
		r.sentLocked(x, at, units)
		r.mu.Unlock()
		return nil
	}
	r.waiting++
	r.waited++
	for {
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		err := r.timers.sleepOrSignal(ctx, at-now, changed)
		now = r.now()
		r.mu.Lock()
		if err != nil {
			r.waiting--
			if r.nextV == x+units {
				r.nextV = x // nobody has been given the slot after ours: free it
			}
			r.quotaLeft += units
			r.sentTotal-- // the request is not sent
			r.mu.Unlock()
			return contextError(ctx)
		}
		// The timer or a signal: the slot's instant may have moved since.
		if at = r.dueLocked(x); at <= now {
			r.waiting--
			r.sentLocked(x, at, units)
			r.mu.Unlock()
			return nil
		}
	}
}

// takeLocked gives the next slot, of n units, due at or after now, and
// returns its start and the instant it is due.
func (r *AdaptiveRate) takeLocked(now time.Duration, n float64) (float64, time.Duration) {
	if now-r.dueLocked(r.nextV) > rateIdle {
		r.succeeded, r.countedFrom = 0, now
	}
	if r.rate == InfLimit {
		// Every slot is due at once: the axis stays at the latest one, for
		// the idle test above.
		r.vAt = max(now, r.hold)
	}
	// No burst: a slot that the axis has passed unused is lost.
	x := max(r.nextV, r.axisLocked(now))
	r.nextV = x + n
	at := max(r.dueLocked(x), now)
	r.quotaLeft -= n
	// The measured rate counts the request when it goes (sentLocked):
	// counting it now, at an instant seconds ahead when many requests
	// wait, would skew the rate measured up to then.
	r.sentTotal++
	return x, at
}

// axisLocked returns the axis' reading at now (see AdaptiveRate's fields).
func (r *AdaptiveRate) axisLocked(now time.Duration) float64 {
	if now <= r.vAt || r.rate == InfLimit {
		return r.v
	}
	return r.v + (now-r.vAt).Seconds()*r.rate
}

// dueLocked returns the instant at which slot x is due: when the axis
// reaches it, and not before the Retry-After hold. Without a limit every
// slot is due at once.
func (r *AdaptiveRate) dueLocked(x float64) time.Duration {
	at := r.vAt
	if r.rate != InfLimit && x > r.v {
		at = addInstant(at, slotsDuration(x-r.v, r.rate))
	}
	return max(at, r.hold)
}

// slotsDuration is the time n ≥ 0 slots take at rate, saturating; for one
// slot it is exactly rateInterval(rate).
func slotsDuration(n, rate float64) time.Duration {
	d := float64(time.Second) * n / rate
	if d >= float64(maxDuration) {
		return maxDuration
	}
	return time.Duration(d)
}

// holdLocked holds every request until hold, at now: the axis stops until
// then, at the first slot still to be sent (the earliest waiting request's,
// or the next one to be given), which falls due when the hold ends, and
// the slots after it keep their spacing instead of falling due together.
func (r *AdaptiveRate) holdLocked(now, hold time.Duration) {
	if hold <= r.hold {
		return
	}
	if r.rate != InfLimit {
		r.v, r.vAt = max(r.axisLocked(now), r.nextV-float64(r.waiting)), max(r.vAt, now, hold)
	}
	r.hold = hold
	r.signalLocked()
}

// signalLocked tells the waiting requests to read their slots' instants
// again.
func (r *AdaptiveRate) signalLocked() {
	r.signalled = r.rate
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// sentLocked records a request of n units, whose slot starts at x, going at
// instant at: in the measured rate, and as the slot the next ones are
// spaced from.
func (r *AdaptiveRate) sentLocked(x float64, at time.Duration, n float64) {
	r.lastSentV, r.lastSentAt = x, at
	r.measureLocked(at)
	r.sentInBucket += n
}

// measureLocked closes the buckets that have ended by now.
func (r *AdaptiveRate) measureLocked(now time.Duration) {
	if now < r.sentBucket+rateBucket {
		return
	}
	elapsed := now - r.sentBucket
	bucketRate := r.sentInBucket / elapsed.Seconds()
	r.sent = rateSmoothing*bucketRate + (1-rateSmoothing)*r.sent
	r.sentBucket = now
	r.sentInBucket = 0
}

// Throttled reports a throttling answer (a 429 or 503). A positive
// retryAfter holds every request until it has passed; zero or negative means
// none was given. An answer that is not stale is then passed to the function
// of [WithOnThrottled], if any.
func (r *AdaptiveRate) Throttled(retryAfter time.Duration) {
	now := r.now()
	r.mu.Lock()
	stale := r.throttledLocked(now, retryAfter)
	r.mu.Unlock()
	if !stale && r.onThrottled != nil {
		r.onThrottled(retryAfter)
	}
}

// throttledLocked is Throttled under the lock; it reports whether the
// answer was stale.
func (r *AdaptiveRate) throttledLocked(now, retryAfter time.Duration) bool {
	r.throttledAll++
	stale := r.staleLocked(now)
	if retryAfter > 0 {
		r.holdLocked(now, addInstant(now, retryAfter))
	}
	if stale || r.steered {
		return stale
	}
	r.measureLocked(now)
	// The rate that met the answer is the rate requests were sent at, which
	// is below the rate allowed while the client sends less than it may, or
	// was held by a Retry-After.
	base := r.sent
	if since := now - r.sentBucket; base == 0 && since > 0 {
		base = r.sentInBucket / since.Seconds()
	}
	if base == 0 && r.rate != InfLimit {
		base = r.rate // nothing measured yet: the rate allowed met it
	}
	base = min(base, r.rate)
	if since := (now - max(r.cutAt, r.countedFrom)).Seconds() + max(retryAfter-time.Second, 0).Seconds(); retryAfter > 0 && r.succeeded > 0 && since > 0 {
		// What the quota granted this client: its successes since the last
		// cut, over the time until the quota lets it in again. A header in
		// whole seconds says the wait is at most retryAfter, and more than a
		// second less: its last second is left out, or a quota that refills
		// continuously, always answered with "1", would be underestimated
		// by a second's worth at every cut.
		base = min(base, r.succeeded/since)
	}
	r.succeeded = 0
	r.slowStart = false
	base = max(base, rateMin)
	r.ceiling = base
	r.cutAt = max(now, 1)
	r.cutHold = r.hold
	// The requests in flight now were sent at the rate that met the quota:
	// their throttling answers say nothing new. Requests given a slot and
	// never answered (an error that is no answer) would keep the count up
	// for ever, so it is capped at a second of sending.
	r.staleLeft = min(r.sentTotal-min(r.answered, r.sentTotal), uint64(math.Ceil(r.sent))+1)
	r.climb = math.Cbrt((ratePlateau - rateBeta) / rateCubicScale) // 0.72 s
	r.setRateLocked(now, base*rateBeta)
	return false
}

// staleLocked counts an answer at now and reports whether it may answer a
// request sent before the last cut: it comes within one request interval
// of the cut, during the Retry-After hold that the cut began (nothing is
// sent then), or while the answers to the requests in flight at the cut
// are still coming in. A throttling answer to such a request does not cut
// again: the cut has answered it already.
func (r *AdaptiveRate) staleLocked(now time.Duration) bool {
	r.answered++
	stale := r.staleLeft > 0 || now < r.cutHold ||
		r.cutAt != 0 && r.rate != InfLimit && now-r.cutAt < rateInterval(r.rate)
	if r.staleLeft > 0 {
		r.staleLeft--
	}
	return stale
}

// Succeeded reports an answer that was not throttling: the rate grows.
func (r *AdaptiveRate) Succeeded() {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.staleLocked(now)
	r.succeeded++
	r.succeededTotal++
	if r.rate == InfLimit || now < r.quotaUntil || r.steered {
		return
	}
	r.measureLocked(now)
	if r.slowStart {
		// Bounded by the rate requests are sent at, as the curve is below,
		// but by four times it: the measured rate lags a rate that doubles
		// in a second, and twice it would hold back the start itself. A
		// client whose requests queue in Wait is held back by the rate
		// itself, not by its demand: its rate grows twice as fast (e² in a
		// second), so that many goroutines sharing it reach a quota's rate
		// before the quota's burst has gone unused.
		v := r.rate + 1
		if r.waiting > 0 {
			v++
		}
		if r.sent > 0 {
			v = min(v, max(4*r.sent, r.rate))
		}
		r.setRateLocked(now, v)
		return
	}
	t := (now - r.cutAt).Seconds() - r.climb
	c := rateCubicScale
	if t > 0 {
		c *= rateProbeScale
	}
	v := r.ceiling * (ratePlateau + c*t*t*t)
	r.setRateLocked(now, min(v, max(2*r.sent, r.rate)))
}

// rateInterval is the time between two requests at v requests per second
// (v positive and finite).
func rateInterval(v float64) time.Duration { return time.Duration(float64(time.Second) / v) }

// setRateLocked changes the rate at now: the next slot still to be sent,
// a waiting request's or the next one to be given, falls due 1/rate after
// the last one sent, at the new rate, and the slots after it keep that
// spacing. During a hold the slots keep their start, the hold's end.
func (r *AdaptiveRate) setRateLocked(now time.Duration, v float64) {
	v = max(v, rateMin)
	switch {
	case r.rate == InfLimit:
		// Every slot given so far was due at once: the axis starts here.
		r.v, r.vAt = r.nextV, max(now, r.hold)
	case r.waiting == 0 && r.dueLocked(r.nextV) <= now:
		// The next slot is free already: it stays free.
		r.v, r.vAt = r.axisLocked(now), now
	case r.waiting == 0 || now > r.vAt:
		// Anchor the axis at the slot of the request that went last, when
		// it went; a hold still holds the next one (dueLocked). With
		// requests waiting through a hold, the axis keeps its start at the
		// hold's end instead, so that they are spaced from there.
		r.v, r.vAt = r.lastSentV, r.lastSentAt
	}
	old := r.rate
	r.rate = v
	if r.waiting > 0 && (v < old || v > r.signalled*(1+rateSignalStep)) {
		r.signalLocked()
	}
}
