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
// raises it by one request per second: a slow start, as TCP's, that doubles
// the rate in about a second while the quota lets everything through (up to
// four times the rate requests are actually sent at, so that a client that
// sends little does not build up a rate it has never tried).
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
// idle, sending nothing, is not counted): what the quota really
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
// multiple goroutines; Allow, Succeeded and Throttled allocate nothing, nor
// does a waiting Wait in steady state. Its zero value is not usable (its
// methods panic): use [NewAdaptiveRate].
type AdaptiveRate struct {
	clock  clock.WithDelayedExecution
	epoch  time.Time
	timers timerPool

	mu   sync.Mutex
	rate float64       // requests per second; InfLimit for none
	next time.Duration // the earliest instant of the next request
	hold time.Duration // no request before it (Retry-After)
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

// Allow reports whether a request may be sent now, and if so counts it. It
// never blocks.
func (r *AdaptiveRate) Allow() bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if now < max(r.next, r.hold) {
		return false
	}
	r.takeLocked(now)
	return true
}

// Wait blocks until a request may be sent, counts it, and returns nil; on a
// FakeClock it returns when the clock is stepped to that instant. Requests
// that wait are served in the order they called Wait. It returns ctx's error
// at once if ctx is already done, and if ctx ends while it waits (its slot
// is then given back if no later request has been given the next one).
// While it waits it holds one timer of the clock.
func (r *AdaptiveRate) Wait(ctx context.Context) error {
	mustNotBeNil("AdaptiveRate.Wait", "ctx", ctx == nil)
	if ctx.Err() != nil {
		return contextError(ctx)
	}
	now := r.now()
	r.mu.Lock()
	at := r.takeLocked(now)
	next := r.next
	r.mu.Unlock()
	if r.timers.sleep(ctx, at-now) {
		return nil
	}
	r.mu.Lock()
	if r.next == next {
		r.next = at // nobody has been given the slot after ours: free it
	}
	r.sentTotal-- // the request is not sent
	r.mu.Unlock()
	return contextError(ctx)
}

// takeLocked gives the next request slot, at or after now, and returns its
// instant.
func (r *AdaptiveRate) takeLocked(now time.Duration) time.Duration {
	if now-max(r.next, r.hold) > rateIdle {
		r.succeeded, r.countedFrom = 0, now
	}
	at := max(r.next, r.hold, now)
	r.next = at
	if r.rate != InfLimit {
		r.next = addInstant(at, rateInterval(r.rate))
	}
	r.countSentLocked(at)
	r.sentTotal++
	return at
}

// countSentLocked counts a request sent at instant at in the measured rate.
func (r *AdaptiveRate) countSentLocked(at time.Duration) {
	r.measureLocked(at)
	r.sentInBucket++
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
// none was given.
func (r *AdaptiveRate) Throttled(retryAfter time.Duration) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	stale := r.staleLocked(now)
	if retryAfter > 0 {
		r.hold = max(r.hold, addInstant(now, retryAfter))
	}
	if stale {
		return
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
	if since := (now - max(r.cutAt, r.countedFrom)).Seconds() + retryAfter.Seconds(); retryAfter > 0 && r.succeeded > 0 {
		// What the quota granted this client: its successes since the last
		// cut, over the time until the quota lets it in again.
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
	if r.rate == InfLimit {
		return
	}
	r.measureLocked(now)
	if r.slowStart {
		// Bounded by the rate requests are sent at, as the curve is below,
		// but by four times it: the measured rate lags a rate that doubles
		// in a second, and twice it would hold back the start itself.
		v := r.rate + 1
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

// setRateLocked changes the rate at now: the next slot moves so that it is
// 1/rate after the last one at the new rate.
func (r *AdaptiveRate) setRateLocked(now time.Duration, v float64) {
	v = max(v, rateMin)
	if r.rate != InfLimit && r.next > now {
		last := r.next - rateInterval(r.rate)
		r.next = max(addInstant(last, rateInterval(v)), now)
	} else if r.rate == InfLimit {
		r.next = max(r.next, now)
	}
	r.rate = v
}
