package backoff

import (
	"math"
	"time"
)

// breakerConfig holds the settings of a new [Breaker]. NewBreaker reads
// them from its options with breakerOptions rather than through config, so
// that the config that Retry and the other per-call helpers build on their
// stack for every call does not carry the breaker's settings.
type breakerConfig struct {
	ratio       float64
	minRequests int
	window      time.Duration
	consecutive int
	probes      int
	schedule    Schedule
	onChange    func(from, to BreakerState)
	metrics     BreakerMetrics
}

// breakerOptions applies the breaker's options of opts over the defaults
// that NewBreaker's doc comment states.
func breakerOptions(opts []Option) breakerConfig {
	bc := breakerConfig{
		ratio:       0.5,
		minRequests: 20,
		window:      10 * time.Second,
		consecutive: 5,
		probes:      3,
		schedule:    Schedule{Duration: time.Second, Factor: 2, Jitter: 0.1, Cap: 4 * time.Second},
	}
	for i := range opts {
		o := &opts[i]
		switch o.kind {
		case optionBreakerFailureRatio:
			bc.ratio = math.Float64frombits(uint64(o.n))
			bc.minRequests, _ = o.v.(int)
		case optionBreakerWindow:
			bc.window = time.Duration(o.n)
		case optionBreakerConsecutiveFailures:
			bc.consecutive = int(o.n)
		case optionBreakerProbes:
			bc.probes = int(o.n)
		case optionBreakerOpenSchedule:
			bc.schedule, _ = o.v.(Schedule)
		case optionBreakerStateChange:
			bc.onChange, _ = o.v.(func(from, to BreakerState))
		case optionBreakerMetrics:
			bc.metrics, _ = o.v.(BreakerMetrics)
		}
	}
	return bc
}

// WithBreakerFailureRatio makes a [Breaker] trip when failures are at
// least ratio of the outcomes counted over its window ([WithBreakerWindow]),
// once there are at least minRequests outcomes in it. The default is 0.5
// and 20. A ratio of 1 trips only when every outcome failed. It panics if
// ratio is not in (0, 1] (NaN included) or minRequests < 1.
func WithBreakerFailureRatio(ratio float64, minRequests int) Option {
	if !(ratio > 0 && ratio <= 1) {
		badArgument("WithBreakerFailureRatio", "ratio must be in (0, 1]", ratio)
	}
	if minRequests < 1 {
		badArgument("WithBreakerFailureRatio", "minRequests must be at least 1", minRequests)
	}
	// minRequests is boxed in the Option: an option read once, by a
	// constructor, may allocate.
	return Option{kind: optionBreakerFailureRatio, n: int64(math.Float64bits(ratio)), v: minRequests}
}

// WithBreakerWindow sets the rolling window over which a [Breaker] counts
// outcomes for [WithBreakerFailureRatio]: 10 s by default. The window is
// kept as 10 buckets of d/10 plus the one being filled, so an outcome
// leaves it between d and 1.1·d after it was counted, a tenth at a time,
// and its memory is constant. It panics if d is below 10 ns (negative or
// zero included).
func WithBreakerWindow(d time.Duration) Option {
	mustBePositive("WithBreakerWindow", "d", d)
	if d < breakerBuckets {
		badArgument("WithBreakerWindow", "d must be at least 10ns", d)
	}
	return durationOption(optionBreakerWindow, d)
}

// WithBreakerConsecutiveFailures makes a [Breaker] trip after n failures
// in a row, however far apart in time: the count does not decay, and only
// a success resets it (an outcome that counts for nothing leaves it as it
// is). So a downstream that fails each of the rare calls it gets trips the
// breaker too, which a ratio over a window would never see. The default is
// 5; 0 turns this rule off. It panics if n is negative.
func WithBreakerConsecutiveFailures(n int) Option {
	if n < 0 {
		badArgument("WithBreakerConsecutiveFailures", "n must not be negative", n)
	}
	return countOption(optionBreakerConsecutiveFailures, n)
}

// WithBreakerOpenSchedule sets how long a [Breaker] stays open: after the
// k-th trip since it last closed (a failed probe re-trips it), for
// s.Delay(k) (see [Schedule.Delay]: s.Duration·s.Factor^(k-1), at most
// s.Cap, stretched by up to s.Jitter; s.Steps is not read), or for a
// failure's Retry-After hint if that is later. The default is
// Schedule{Duration: 1s, Factor: 2, Jitter: 0.1, Cap: 4s}: 1 s, 2 s, then
// 4 s, each up to 10% longer. It panics if s.Duration ≤ 0, and on the
// schedules [Retry] refuses (an infinite s.Factor without s.Cap, an
// s.Jitter above [MaxRetryJitter]). Its copy of s makes it allocate.
func WithBreakerOpenSchedule(s Schedule) Option {
	if s.Duration <= 0 {
		badArgument("WithBreakerOpenSchedule", "s.Duration must be positive", s.Duration)
	}
	if problem, got := retryScheduleProblem(s); problem != "" {
		badArgument("WithBreakerOpenSchedule", problem, got)
	}
	return valueOption(optionBreakerOpenSchedule, s)
}

// WithBreakerProbes sets how many probe calls a half-open [Breaker] lets
// through at once: 3 by default. n successful probes close it; a failed one
// opens it again. It panics if n < 1.
func WithBreakerProbes(n int) Option {
	if n < 1 {
		badArgument("WithBreakerProbes", "n must be at least 1", n)
	}
	return countOption(optionBreakerProbes, n)
}

// WithBreakerStateChange makes a [Breaker] call fn with each change of its
// state. Every change reaches fn once, in the order they happened, and
// never two calls at once; fn runs with no lock of the breaker held, on the
// goroutine whose call changed the state or on one that is already calling
// fn, so it delays that call. fn may call the breaker (State, Allow); a
// change it causes reaches fn after it returns. If fn panics, the panic
// propagates to that call, and the next change delivers the changes left.
// It panics if fn is nil.
func WithBreakerStateChange(fn func(from, to BreakerState)) Option {
	mustNotBeNil("WithBreakerStateChange", "fn", fn == nil)
	return valueOption(optionBreakerStateChange, fn)
}

// BreakerMetrics receives what a [Breaker] does, for a metrics library;
// pass it with [WithBreakerMetrics]. The state itself is the to of the
// latest change (the breaker starts closed), or [Breaker.State].
type BreakerMetrics interface {
	// ObserveStateChange counts a change of state. It is called like
	// [WithBreakerStateChange]'s function: once per change, in order, never
	// concurrently with itself, with no lock held.
	ObserveStateChange(from, to BreakerState)
	// IncRejected counts a call the breaker refused. It is called on the
	// refused caller's goroutine, with no lock held, possibly concurrently.
	IncRejected()
}

// WithBreakerMetrics makes a [Breaker] report its changes of state and its
// refusals to m (see [BreakerMetrics]). The default is no reporting. It
// panics if m is nil, a typed nil included.
func WithBreakerMetrics(m BreakerMetrics) Option {
	mustNotBeNil("WithBreakerMetrics", "m", isNilValue(m))
	return valueOption(optionBreakerMetrics, m)
}

// deliver hands the pending changes of state to onChange and metrics, in
// order, with no lock held, unless another goroutine is doing so already:
// that one delivers them after its own. So changes are delivered once each,
// in order, never concurrently, and a function that calls back into the
// breaker (and changes its state) does not deadlock: its change waits in
// pending until it returns.
func (b *Breaker) deliver() {
	if b.onChange == nil && b.metrics == nil {
		return
	}
	b.mu.Lock()
	if b.delivering || len(b.pending) == 0 {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	b.mu.Unlock()
	delivered := false
	defer func() {
		if !delivered { // a function panicked: the next change delivers the rest
			b.mu.Lock()
			b.delivering = false
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.delivering = false
			b.mu.Unlock()
			delivered = true
			return
		}
		c := b.pending[0]
		b.pending = append(b.pending[:0], b.pending[1:]...)
		b.mu.Unlock()
		if b.metrics != nil {
			b.metrics.ObserveStateChange(c.from, c.to)
		}
		if b.onChange != nil {
			b.onChange(c.from, c.to)
		}
	}
}
