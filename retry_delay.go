package backoff

import (
	"strconv"
	"time"
)

// JitterKind selects how [Retry] randomises its waits, with [WithJitterKind].
// Jitter spreads the retries of many clients that failed together, so that
// they do not all come back at the same instant and fail again. The zero
// value is [ProportionalJitter].
//
// Each kind starts from the wait the Schedule gives: b = Duration·Factor^(k-1)
// capped at Cap. Only ProportionalJitter reads Schedule.Jitter; the others
// decide the spread themselves and ignore it.
type JitterKind int

const (
	// ProportionalJitter waits b plus a random part of up to Jitter·b:
	// [Jitter](b, Schedule.Jitter), Kubernetes' jitter and the default. The
	// wait lies in [b, b + Jitter·b), so with Cap > 0 it can exceed Cap by up
	// to Jitter·Cap; with Jitter ≤ 0 there is no jitter at all. Use it to
	// match Kubernetes' timing, or when the waits must not be shorter than
	// the schedule (a server asked for at least that long).
	ProportionalJitter JitterKind = iota

	// FullJitter waits a random duration in [0, b). It spreads clients the
	// most and, for many clients contending for one resource, finishes the
	// work soonest with the fewest calls (the finding of AWS's "Exponential
	// Backoff and Jitter"), at the price of sometimes retrying at once. Use
	// it for many clients hitting one overloaded service. The wait never
	// exceeds Cap.
	FullJitter

	// EqualJitter waits b/2 plus a random duration in [0, b/2): never less
	// than half the schedule, so a client never retries at once, with half
	// the spread of FullJitter. Use it when an immediate retry would be
	// wasteful but clients still need spreading. The wait never exceeds Cap.
	EqualJitter

	// DecorrelatedJitter waits a random duration between Duration and Factor
	// times the previous wait (the first time, Factor·Duration), capped at
	// Cap: each wait grows from the last one actually drawn, not from the
	// attempt count, so clients that collided once drift apart for good. With
	// Factor 3 it is AWS's "decorrelated jitter"; with Factor ≤ 1 it waits
	// Duration every time. Use it for long-running retry loops where
	// clients should not resynchronise. The wait never exceeds Cap (and is
	// Cap when Duration is above Cap).
	DecorrelatedJitter

	numJitterKinds // the number of kinds, for validation
)

// String returns the kind's name, such as "FullJitter".
func (k JitterKind) String() string {
	switch k {
	case ProportionalJitter:
		return "ProportionalJitter"
	case FullJitter:
		return "FullJitter"
	case EqualJitter:
		return "EqualJitter"
	case DecorrelatedJitter:
		return "DecorrelatedJitter"
	}
	return "JitterKind(" + strconv.Itoa(int(k)) + ")"
}

// WithJitterKind makes [Retry] jitter its waits as k says; the default is
// [ProportionalJitter], Kubernetes' jitter. It concerns Retry only:
// [Schedule.Step] and [ExponentialBackoff] always jitter proportionally, as
// in Kubernetes. A k that is not one of the JitterKind constants makes it
// panic.
func WithJitterKind(k JitterKind) Option {
	if k < 0 || k >= numJitterKinds {
		badArgument("WithJitterKind", "k must be one of the JitterKind constants", k)
	}
	return func(c *config) { c.retry.jitter = k }
}

// delaySequence computes Retry's waits. Unlike Schedule.Step, reaching the
// cap does not end it, and a factor ≤ 1 means constant waits.
type delaySequence struct {
	kind    JitterKind
	initial time.Duration // Schedule.Duration, ≥ 0
	factor  float64       // > 1, or 1 for constant waits
	jitter  float64       // for ProportionalJitter
	limit   time.Duration // Schedule.Cap; ≤ 0: none
	base    time.Duration // the capped exponential wait for the next retry
	prev    time.Duration // DecorrelatedJitter: the last wait drawn
}

func newDelaySequence(s Schedule, kind JitterKind) delaySequence {
	initial := max(s.Duration, 0)
	factor := 1.0
	if s.Factor > 1 { // false for NaN
		factor = s.Factor
	}
	return delaySequence{
		kind:    kind,
		initial: initial,
		factor:  factor,
		jitter:  s.Jitter,
		limit:   s.Cap,
		base:    clampDuration(initial, s.Cap),
		prev:    initial,
	}
}

// next returns the wait before the next retry and advances the sequence. It
// never returns a negative wait, never overflows, and never exceeds the cap
// except by ProportionalJitter's jitter.
func (q *delaySequence) next() time.Duration {
	b := q.base
	if q.factor > 1 {
		q.base = clampDuration(scaleDuration(b, q.factor), q.limit)
	}
	switch q.kind {
	case FullJitter:
		return randDuration(b)
	case EqualJitter:
		half := b / 2
		return b - half + randDuration(half)
	case DecorrelatedJitter:
		hi := max(scaleDuration(q.prev, q.factor), q.initial)
		d := clampDuration(q.initial+randDuration(hi-q.initial), q.limit)
		q.prev = d
		return d
	default:
		return Jitter(b, q.jitter)
	}
}
