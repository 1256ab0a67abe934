package backoff

import (
	"context"
	"errors"
	"k8s.io/utils/clock"
	"time"
)

// ErrOverloaded is the overload signal a caller wraps into an attempt's
// error (fmt.Errorf("%w: 503", backoff.ErrOverloaded)) to tell a [Pacer]
// that the downstream asked it to slow down: an HTTP 429 or 503, a gRPC
// RESOURCE_EXHAUSTED, a queue that refused work. An error that carries a
// [RetryAfter] hint is such a signal too; package httpretry marks 429 and
// 503 answers with it.
var ErrOverloaded = errors.New("backoff: downstream overloaded")

// A Pacer paces the attempts of a call and learns from their outcomes:
// [Retry] and [RetryValue] (with [WithPacer]), httpretry's Transport (the
// same option) and [RunWorkers] (the same option) ask it before each
// attempt and tell it how the attempt ended. The package's pacers are:
//
//   - *[Limiter]: a fixed rate; each attempt waits for a token.
//   - *[AdaptiveRate]: a rate learned from throttling; each attempt waits
//     for the rate; an overload signal is Throttled (with the RetryAfter
//     hint, if any), a success Succeeded.
//   - *[AdaptiveLimiter]: a concurrency limit learned from latency; each
//     attempt holds a [Permit] for its duration, waiting for one if the
//     limit is reached; a success (or a [Permanent] error: the downstream
//     answered) is Recorded, an overload signal, a timeout or a network
//     error Dropped, anything else Released.
//   - *[Throttler]: client-side throttling; an attempt it rejects fails at
//     once with [ErrThrottled], without reaching the downstream; the
//     outcome is Recorded as accepted unless it was an overload signal, a
//     timeout or a network error.
//   - *[Breaker]: a circuit breaker; an attempt it refuses fails at once
//     with [ErrBreakerOpen], without reaching the downstream, carrying the
//     time until a probe may go through as a [RetryAfter] hint, which
//     [Retry] waits; the outcome is counted as the Breaker's doc says.
//
// The outcome of an attempt is read from its error: nil is a success;
// [ErrOverloaded] in the chain, or a [RetryAfter] hint, is an overload
// signal; an error in the chain with a Timeout() bool method (a net.Error,
// context.DeadlineExceeded) is a timeout or a network error. An attempt cut
// short because the caller's context ended says nothing about the
// downstream. Pacing allocates nothing, but for the error of a Breaker's
// refusal while it is open.
//
// Pacer is implemented by the five types above only: its method is
// unexported.
type Pacer interface {
	// startAttempt waits until an attempt may start, or ctx ends, and
	// returns the attempt's pacing; an error is ctx's, ErrThrottled, or a
	// breaker's refusal.
	startAttempt(ctx context.Context) (pacing, error)
}

// WithPacer makes [Retry], [RetryValue], httpretry's Transport and
// [RunWorkers] pace their attempts with p (see [Pacer]). The default is no
// pacing. WithPacer panics if p is nil.
func WithPacer(p Pacer) Option {
	mustNotBeNil("WithPacer", "p", isNilValue(p))
	return valueOption(optionPacer, p)
}

// pacing is one attempt that a Pacer let start: the permit it holds (an
// AdaptiveLimiter's or a Breaker's), or the pacer to report the outcome to.
type pacing struct {
	permit    Permit
	rate      *AdaptiveRate
	throttler *Throttler
	breaker   BreakerPermit
}

// outcome is what an attempt's error says to a pacer.
type outcome uint8

const (
	outcomeNeutral  outcome = iota // says nothing about the downstream: the caller gave up, or fn panicked
	outcomeSuccess                 // the downstream answered (nil, or a Permanent error)
	outcomeOverload                // ErrOverloaded or a RetryAfter hint
	outcomeDrop                    // a timeout or a network error
	outcomeOther                   // any other error: no sample of the load, but no refusal either
)

// classifyOutcome reads what err, the error of an attempt made under ctx,
// says about the downstream's load.
func classifyOutcome(ctx context.Context, err error) (outcome, time.Duration) {
	if err == nil {
		return outcomeSuccess, 0
	}
	if ctx.Err() != nil {
		return outcomeNeutral, 0 // the caller gave up
	}
	permanent, hint, hinted := inspectError(err)
	if hinted || hasRetryAfter(err) || errors.Is(err, ErrOverloaded) {
		return outcomeOverload, hint
	}
	if hasTimeout(err) {
		return outcomeDrop, 0
	}
	if permanent {
		return outcomeSuccess, 0
	}
	return outcomeOther, 0
}

// finish reports the outcome of the attempt to its pacer.
func (p *pacing) finish(o outcome, retryAfter time.Duration) {
	switch {
	case p.permit.l != nil:
		switch o {
		case outcomeSuccess:
			p.permit.Record()
		case outcomeOverload, outcomeDrop:
			p.permit.Drop()
		default:
			p.permit.Release()
		}
	case p.rate != nil:
		switch o {
		case outcomeSuccess:
			p.rate.Succeeded()
		case outcomeOverload:
			p.rate.Throttled(retryAfter)
		}
	case p.throttler != nil:
		// Record(false) counts nothing: only an acceptance is recorded.
		p.throttler.Record(o == outcomeSuccess || o == outcomeOther)
	case p.breaker.b != nil:
		b := p.breaker
		p.breaker = BreakerPermit{}
		b.b.finish(b.gen, b.probe, o, retryAfter)
	}
}

// hasRetryAfter reports whether err's chain holds a *RetryAfterError, of
// any delay: a server's hint to slow down, even one without a usable wait.
// It walks the chain as errors.As does, without its allocation.
func hasRetryAfter(err error) bool {
	return walkChain(err, func(e error) bool {
		_, ok := e.(*RetryAfterError)
		return ok
	})
}

// hasTimeout reports whether err's chain holds an error with a Timeout
// method: a net.Error (a timeout, a refused or reset connection) or
// context.DeadlineExceeded.
func hasTimeout(err error) bool {
	return walkChain(err, func(e error) bool {
		_, ok := e.(interface{ Timeout() bool })
		return ok
	})
}

// walkChain reports whether match holds for an error of err's chain,
// depth first through Unwrap() []error.
func walkChain(err error, match func(error) bool) bool {
	for err != nil {
		if match(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walkChain(e, match) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// pacedAttempt runs fn as one attempt paced by p: it waits for p, runs fn,
// and reports fn's outcome, even if fn panics. A wait that ends with ctx
// returns ctx's error and started false, without calling fn; a Throttler's
// rejection returns ErrThrottled, and a Breaker's refusal its error, with
// started true and without calling fn (an attempt that failed at once).
// With a timeout > 0, fn runs under a context that also ends timeout after
// p admits the attempt, on clk.
func pacedAttempt(ctx context.Context, p Pacer, fn func(context.Context) error, clk clock.WithDelayedExecution, timeout time.Duration) (err error, started bool) {
	pc, err := p.startAttempt(ctx)
	if err != nil {
		return err, ctx.Err() == nil
	}
	o, hint := outcomeNeutral, time.Duration(0)
	defer func() { pc.finish(o, hint) }() // a panic in fn frees the permit, as neutral
	if timeout > 0 {
		actx := withAttemptTimeout(ctx, clk, timeout)
		err = fn(actx)
		actx.release()
	} else {
		err = fn(ctx)
	}
	o, hint = classifyOutcome(ctx, err)
	return err, true
}

// startAttempt waits for one token.
func (l *Limiter) startAttempt(ctx context.Context) (pacing, error) {
	return pacing{}, l.Wait(ctx)
}

// startAttempt waits for the rate.
func (r *AdaptiveRate) startAttempt(ctx context.Context) (pacing, error) {
	if err := r.Wait(ctx); err != nil {
		return pacing{}, err
	}
	return pacing{rate: r}, nil
}

// startAttempt waits for a permit.
func (l *AdaptiveLimiter) startAttempt(ctx context.Context) (pacing, error) {
	p, err := l.Acquire(ctx)
	if err != nil {
		return pacing{}, err
	}
	return pacing{permit: p}, nil
}

// startAttempt asks whether the attempt may go out.
func (t *Throttler) startAttempt(context.Context) (pacing, error) {
	if !t.Allow() {
		return pacing{}, ErrThrottled
	}
	return pacing{throttler: t}, nil
}

// startAttempt asks whether the attempt may go out.
func (b *Breaker) startAttempt(context.Context) (pacing, error) {
	p, err := b.Allow()
	if err != nil {
		return pacing{}, err
	}
	return pacing{breaker: p}, nil
}
