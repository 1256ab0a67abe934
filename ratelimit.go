package backoff

import (
	"k8s.io/utils/clock"
	"math"
	"strconv"
	"sync"
	"time"
)

// RateLimiter decides how long an item must wait before it is retried. Its
// method set is exactly that of client-go's workqueue.TypedRateLimiter[T], so
// a RateLimiter from this package can be passed wherever client-go's is
// accepted (controller-runtime's controller Options.RateLimiter among them),
// and client-go's limiters can be passed to this package's queues.
type RateLimiter[T comparable] interface {
	// When records a failure of item and returns how long it should wait
	// before it is processed again. It never returns a negative duration.
	When(item T) time.Duration
	// Forget clears what the limiter remembers of item, typically after it
	// was processed successfully. It resets the failure count, not a shared
	// budget such as a token bucket's tokens.
	Forget(item T)
	// NumRequeues returns how many times When was called for item since it
	// was last forgotten.
	NumRequeues(item T) int
}

// packageLimiter is what the queues and the retry budget need to know of the
// limiters of this package, which each states for itself: the clock it
// reads, and the longest delay it returns. Limiters of other packages do
// not implement it, and are taken as they are.
type packageLimiter interface {
	// limiterClock returns the clock the limiter reads, and false if it
	// reads none.
	limiterClock() (clock.PassiveClock, bool)
	// requeueCap returns the longest delay When returns for a failing item,
	// and false if the limiter states none. A budget's queue never delays a
	// refused retry past it (see RateLimitingQueue.AddRateLimited).
	requeueCap() (time.Duration, bool)
}

// A rate-limited queue and its limiter each read a clock: the queue for its
// delays, a token bucket for its refills. Passing a FakeClock to one of them
// only leaves the other on the real clock, and the test that follows makes
// no sense (the bucket refills in real time while the queue's time stands
// still). The way to pass it once is one options slice for both:
//
//	opts := []backoff.Option{backoff.WithClock(fc)}
//	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](opts...), opts...)
//
// and NewRateLimitingQueue checks that the limiters this package built agree
// with the queue, so that a clock passed to one only fails at construction.

// mustShareClock panics if limiter is one of this package's limiters that
// reads a clock, and that clock is not the queue's. Limiters of other
// packages are not checked.
func mustShareClock(where string, limiter any, queueClock clock.PassiveClock) {
	p, ok := limiter.(packageLimiter)
	if !ok {
		return
	}
	lc, ok := p.limiterClock()
	if !ok || sameClock(lc, queueClock) {
		return
	}
	badUse(where, "the limiter reads another clock than the queue (pass the same WithClock to both, e.g. one []Option for both)")
}

// limiterConfig holds the options that the rate limiters read. Its zero value
// is the default: no jitter, no bound on the items remembered.
type limiterConfig struct {
	jitter     float64 // WithRequeueJitter's maxFactor; 0 means none
	maxTracked int     // WithMaxTrackedItems' n; 0 means no bound
	maxKeys    int     // WithMaxKeys' n (keyedlimiter.go); 0 means no bound
}

// WithRequeueJitter makes the per-item limiters
// ([NewItemExponentialFailureRateLimiter], [NewItemFastSlowRateLimiter], and
// so [DefaultControllerRateLimiter]) add a random part to each delay: up to
// maxFactor times the delay, as [Jitter] does, but never past the limiter's
// cap. A delay is thus never shorter than without jitter, and never longer
// than maxDelay (for the item-exponential limiter) or, for the fast-slow
// limiter, than slowDelay while an item is in its fast attempts. A delay that
// is already at the cap is returned as is: items that reach the cap at
// different moments stay spread out, since they keep the phase they had.
//
// Why: when a shared dependency fails, every item of every controller fails
// at once and, with client-go's limiters, retries in lockstep at 5 ms,
// 10 ms, 20 ms …, hitting the recovering dependency with synchronized waves
// (kubernetes#87915, client-go#739). client-go has no jitter here.
//
// [RunWorkers] reads it too: a Result.RequeueAfter of d then requeues the
// item after d plus up to maxFactor·d, so that a fleet of controllers that
// each requeue every item "after 5 minutes" (a periodic resync) do not wake
// in lockstep (argo-cd#29767 asks for the same).
//
// A maxFactor of 0 means no jitter (the default); 0.1 to 1 are typical.
// WithRequeueJitter panics if maxFactor is negative, NaN or infinite.
func WithRequeueJitter(maxFactor float64) Option {
	mustBeFactor("WithRequeueJitter", "maxFactor", maxFactor)
	return floatOption(optionRequeueJitter, maxFactor)
}

// WithMaxTrackedItems bounds how many items the per-item limiters
// ([NewItemExponentialFailureRateLimiter], [NewItemFastSlowRateLimiter], and
// so [DefaultControllerRateLimiter]) remember a failure count for.
//
// Why: a limiter remembers an item from its first failure until Forget. A
// controller that forgets to call Forget after a success (or whose items are
// deleted while failing) leaks one entry per distinct item, forever
// (kubernetes#138743). With a bound, a limiter that is full makes room for a
// new item by dropping the item whose latest failure is the oldest — the
// least recently failed, most likely to be the leak — in O(1). A dropped item
// is as if forgotten: its next When returns the base delay (fastDelay for the
// fast-slow limiter) and NumRequeues returns 0 until then. Choose n well
// above the number of items that can be failing at once, so that only stale
// items are ever dropped.
//
// (The pull request for kubernetes#138743 instead stops tracking new items
// when full and gives each of them the maximum delay, so that a new item's
// first failure can wait 1000 s; dropping the stalest keeps new items on
// their normal schedule.)
//
// An n of 0 means no bound, the default and client-go's behaviour.
// WithMaxTrackedItems panics if n is negative.
func WithMaxTrackedItems(n int) Option {
	if n < 0 {
		badArgument("WithMaxTrackedItems", "n must not be negative", n)
	}
	return countOption(optionMaxTrackedItems, n)
}

// The numbers of [DefaultControllerRateLimiter], which are client-go's: a
// failing item waits 5 ms, 10 ms, 20 ms and so on, doubling up to 655.36 s
// at its 18th failure, then 1000 s from the 19th on; and all items together
// are requeued at 10 per second on average, with bursts of 100.
const (
	// DefaultControllerBaseDelay is the delay after an item's first failure.
	DefaultControllerBaseDelay = 5 * time.Millisecond
	// DefaultControllerMaxDelay caps the delay of an item that keeps failing.
	DefaultControllerMaxDelay = 1000 * time.Second
	// DefaultControllerQPS is the overall requeue rate, in items per second,
	// that the token bucket allows on average.
	DefaultControllerQPS = 10.0
	// DefaultControllerBurst is how many requeues the token bucket allows at
	// once before it starts spacing them 1/DefaultControllerQPS apart.
	DefaultControllerBurst = 100
)

// DefaultControllerRateLimiter returns the rate limiter that Kubernetes
// controllers use unless told otherwise (client-go's
// DefaultTypedControllerRateLimiter, and controller-runtime's default): the
// larger of
//
//   - a per-item exponential delay, [DefaultControllerBaseDelay]·2^failures
//     capped at [DefaultControllerMaxDelay] (5 ms, 10 ms, 20 ms … 655.36 s,
//     then 1000 s for good), from [NewItemExponentialFailureRateLimiter], and
//   - a token bucket shared by all items, [DefaultControllerQPS] per second
//     with bursts of [DefaultControllerBurst], from [NewBucketRateLimiter]:
//     when more than 100 items fail at one instant, the 101st waits 100 ms,
//     the 102nd 200 ms, and so on, whatever their own failure counts.
//
// Every When goes to both parts, so it spends a token even when the item's
// own delay is the longer; Forget resets the item's failure count (the
// bucket's tokens are shared and stay spent); NumRequeues is the item's
// failure count.
//
// The options reach both parts: the clock (read by the bucket),
// [WithRequeueJitter] and [WithMaxTrackedItems] (read by the exponential
// part). Without options the delays are exactly client-go's.
//
// The result behaves exactly as
//
//	NewMaxOfRateLimiter[T](
//		NewItemExponentialFailureRateLimiter[T](DefaultControllerBaseDelay, DefaultControllerMaxDelay, opts...),
//		NewBucketRateLimiter[T](DefaultControllerQPS, DefaultControllerBurst, opts...),
//	)
//
// but holds both parts under one lock, which makes a When and a Forget
// together cost well under half of client-go's. It is safe for concurrent
// use, and its When and Forget allocate nothing.
func DefaultControllerRateLimiter[T comparable](opts ...Option) RateLimiter[T] {
	c := newConfig(opts)
	l := &defaultControllerRateLimiter[T]{
		delays: doublingDelays{
			baseDelay: DefaultControllerBaseDelay,
			maxDelay:  DefaultControllerMaxDelay,
			jitter:    c.limiter.jitter,
		},
		clock: c.clock,
		epoch: c.clock.Now(),
	}
	l.failures.init(c.limiter.maxTracked)
	l.bucket.init(DefaultControllerQPS, DefaultControllerBurst)
	return l
}

// defaultControllerRateLimiter is what
// NewMaxOfRateLimiter(NewItemExponentialFailureRateLimiter(…),
// NewBucketRateLimiter(…)) would be, with the same results, fused so that a
// When takes one lock instead of two and makes no interface calls: the
// default limiter is the one nearly every controller runs, and its When and
// Forget are on the path of every requeue. The bucket is guarded by the
// failure counts' lock.
type defaultControllerRateLimiter[T comparable] struct {
	failures failureCounts[T]
	bucket   tokenBucket // guarded by failures.mu
	delays   doublingDelays
	clock    clock.PassiveClock
	epoch    time.Time
}

func (l *defaultControllerRateLimiter[T]) When(item T) time.Duration {
	now := l.clock.Since(l.epoch) // outside the lock; see BucketRateLimiter.When
	l.failures.mu.Lock()
	n := l.failures.recordLocked(item)
	wait := l.bucket.takeLocked(now)
	l.failures.mu.Unlock()
	return max(l.delays.after(n), wait)
}

func (l *defaultControllerRateLimiter[T]) Forget(item T) {
	l.failures.forget(item)
}

func (l *defaultControllerRateLimiter[T]) NumRequeues(item T) int {
	return l.failures.count(item)
}

func (l *defaultControllerRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) {
	return l.clock, true
}

func (l *defaultControllerRateLimiter[T]) requeueCap() (time.Duration, bool) {
	return l.delays.maxDelay, true
}

// ItemExponentialFailureRateLimiter delays each item by baseDelay·2^n, where
// n is how many times When was called for that item since it was last
// forgotten: the first failure waits baseDelay, the second twice that, and so
// on, up to maxDelay, which every later failure waits. It is the per-item half
// of [DefaultControllerRateLimiter].
//
// The delays are client-go's (workqueue.ItemExponentialFailureRateLimiter),
// with these differences:
//
//   - They are computed in integers, so 5 ms·2^17 is 655.36 s to the
//     nanosecond, and they saturate at maxDelay whatever the failure count and
//     base. client-go computes in float64 and converts back: with a baseDelay
//     of math.MaxInt64/4 its third delay is negative, which a queue takes as
//     "now".
//   - The constructor rejects a baseDelay of 0 (a hot requeue loop) and a
//     maxDelay below baseDelay (see [NewItemExponentialFailureRateLimiter]).
//   - [WithRequeueJitter] spreads the delays of items that fail together, and
//     [WithMaxTrackedItems] bounds the memory of items never forgotten.
//   - When, Forget and NumRequeues allocate nothing once the item is known,
//     and When costs less than half of client-go's.
//
// An ItemExponentialFailureRateLimiter is safe for concurrent use. Its zero
// value is not usable (When panics): use
// [NewItemExponentialFailureRateLimiter].
type ItemExponentialFailureRateLimiter[T comparable] struct {
	failures failureCounts[T]
	delays   doublingDelays
}

// doublingDelays is the delay arithmetic of
// ItemExponentialFailureRateLimiter, shared with the default limiter: a delay
// that doubles with each failure, up to a maximum.
type doublingDelays struct {
	baseDelay time.Duration
	maxDelay  time.Duration
	jitter    float64 // WithRequeueJitter's maxFactor; 0 for none
}

// after returns the delay after n earlier failures.
func (s doublingDelays) after(n int) time.Duration {
	d := min(shiftDuration(s.baseDelay, n), s.maxDelay)
	return jitterBelow(d, s.maxDelay, s.jitter)
}

// NewItemExponentialFailureRateLimiter returns an
// [ItemExponentialFailureRateLimiter] whose delays start at baseDelay and
// double with each failure of an item, up to maxDelay. It reads
// [WithRequeueJitter] and [WithMaxTrackedItems] and ignores the other
// options; it never reads the clock.
//
// A baseDelay ≤ 0 or a negative maxDelay panics, and so does a maxDelay
// below baseDelay. client-go accepts a baseDelay of 0, which makes every
// delay 0, so that a failing item is requeued at once, for ever, in a hot
// loop; it accepts the latter too and returns maxDelay for every failure,
// which is rarely what the caller meant: the usual cause is swapped
// arguments, or a maxDelay of 0 meant as "no limit".
func NewItemExponentialFailureRateLimiter[T comparable](baseDelay, maxDelay time.Duration, opts ...Option) *ItemExponentialFailureRateLimiter[T] {
	const where = "NewItemExponentialFailureRateLimiter"
	mustBePositive(where, "baseDelay", baseDelay)
	mustNotBeNegative(where, "maxDelay", maxDelay)
	if maxDelay < baseDelay {
		badArgument(where, "maxDelay must not be less than baseDelay "+baseDelay.String(), maxDelay)
	}
	c := newConfig(opts).limiter
	l := &ItemExponentialFailureRateLimiter[T]{
		delays: doublingDelays{baseDelay: baseDelay, maxDelay: maxDelay, jitter: c.jitter},
	}
	l.failures.init(c.maxTracked)
	return l
}

// When counts a failure of item and returns baseDelay·2^n capped at
// maxDelay, n being the failures counted before this one (so the first When
// returns baseDelay). With [WithRequeueJitter] the delay is drawn from
// [d, min(d + maxFactor·d, maxDelay)]. It never blocks, never returns a
// negative duration, and never more than maxDelay.
func (l *ItemExponentialFailureRateLimiter[T]) When(item T) time.Duration {
	return l.delays.after(l.failures.record(item))
}

// Forget clears item's failure count, so that its next When returns
// baseDelay again. Call it when the item was processed successfully.
func (l *ItemExponentialFailureRateLimiter[T]) Forget(item T) {
	l.failures.forget(item)
}

// NumRequeues returns how many times When was called for item since it was
// last forgotten (or dropped by [WithMaxTrackedItems]).
func (l *ItemExponentialFailureRateLimiter[T]) NumRequeues(item T) int {
	return l.failures.count(item)
}

func (l *ItemExponentialFailureRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) {
	return nil, false
}

func (l *ItemExponentialFailureRateLimiter[T]) requeueCap() (time.Duration, bool) {
	return l.delays.maxDelay, true
}

// jitterBelow returns d plus up to maxFactor·d of jitter, but no more than
// ceiling; a d already at or above ceiling, or a maxFactor of 0, leaves d
// unchanged.
func jitterBelow(d, ceiling time.Duration, maxFactor float64) time.Duration {
	if maxFactor == 0 || d >= ceiling {
		return d
	}
	return min(Jitter(d, maxFactor), ceiling)
}

// ItemFastSlowRateLimiter delays each item by fastDelay for its first
// maxFastAttempts failures, then by slowDelay for every later failure, until
// the item is forgotten. Two steps are easier to follow in logs than an
// exponential series, and suit work that either succeeds on a quick retry or
// needs an outside change (a missing dependency, a quota) to succeed at all.
//
// The delays are client-go's (workqueue.ItemFastSlowRateLimiter), with these
// differences: the constructor rejects a slowDelay below fastDelay (see
// [NewItemFastSlowRateLimiter]); [WithRequeueJitter] spreads the delays of
// items that fail together; [WithMaxTrackedItems] bounds the memory of items
// never forgotten; and When, Forget and NumRequeues allocate nothing once the
// item is known.
//
// An ItemFastSlowRateLimiter is safe for concurrent use. Its zero value is
// not usable (When panics): use [NewItemFastSlowRateLimiter].
type ItemFastSlowRateLimiter[T comparable] struct {
	failures        failureCounts[T]
	fastDelay       time.Duration
	slowDelay       time.Duration
	maxFastAttempts int
	jitter          float64
}

// NewItemFastSlowRateLimiter returns an [ItemFastSlowRateLimiter] that
// returns fastDelay for the first maxFastAttempts failures of an item and
// slowDelay after that. It reads [WithRequeueJitter] and
// [WithMaxTrackedItems] and ignores the other options; it never reads the
// clock.
//
// Zero delays are allowed (0 means "retry at once"), and so is a
// maxFastAttempts of 0 (every delay is slowDelay), as in client-go. A
// negative delay or maxFastAttempts panics, and so does a slowDelay below
// fastDelay, which client-go accepts but which contradicts the names and
// usually means swapped arguments.
func NewItemFastSlowRateLimiter[T comparable](fastDelay, slowDelay time.Duration, maxFastAttempts int, opts ...Option) *ItemFastSlowRateLimiter[T] {
	const where = "NewItemFastSlowRateLimiter"
	mustNotBeNegative(where, "fastDelay", fastDelay)
	mustNotBeNegative(where, "slowDelay", slowDelay)
	if slowDelay < fastDelay {
		badArgument(where, "slowDelay must not be less than fastDelay "+fastDelay.String(), slowDelay)
	}
	if maxFastAttempts < 0 {
		badArgument(where, "maxFastAttempts must not be negative", maxFastAttempts)
	}
	c := newConfig(opts).limiter
	l := &ItemFastSlowRateLimiter[T]{
		fastDelay:       fastDelay,
		slowDelay:       slowDelay,
		maxFastAttempts: maxFastAttempts,
		jitter:          c.jitter,
	}
	l.failures.init(c.maxTracked)
	return l
}

// When counts a failure of item and returns fastDelay if it is one of the
// item's first maxFastAttempts failures, slowDelay otherwise. With
// [WithRequeueJitter], a fast delay is drawn from
// [fastDelay, min(fastDelay·(1+maxFactor), slowDelay)] — a fast retry never
// waits longer than a slow one — and a slow delay from
// [slowDelay, slowDelay·(1+maxFactor)), saturating at the largest
// time.Duration. It never blocks and never returns a negative duration.
func (l *ItemFastSlowRateLimiter[T]) When(item T) time.Duration {
	if l.failures.record(item) < l.maxFastAttempts {
		return jitterBelow(l.fastDelay, l.slowDelay, l.jitter)
	}
	return jitterBelow(l.slowDelay, maxDuration, l.jitter)
}

// Forget clears item's failure count, so that its next When returns
// fastDelay again (unless maxFastAttempts is 0).
func (l *ItemFastSlowRateLimiter[T]) Forget(item T) {
	l.failures.forget(item)
}

// NumRequeues returns how many times When was called for item since it was
// last forgotten (or dropped by [WithMaxTrackedItems]).
func (l *ItemFastSlowRateLimiter[T]) NumRequeues(item T) int {
	return l.failures.count(item)
}

func (l *ItemFastSlowRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) {
	return nil, false
}

func (l *ItemFastSlowRateLimiter[T]) requeueCap() (time.Duration, bool) {
	return l.slowDelay, true
}

// MaxOfRateLimiter combines rate limiters: each When asks every one of them,
// in order, and returns the longest delay, so that an item waits for the
// strictest of them. Every limiter sees every When, so each keeps its own
// count (and a token bucket spends a token even when another limiter's delay
// is longer). NumRequeues is the largest count of any of them, and Forget
// forgets the item in all of them.
//
// It behaves as client-go's workqueue.MaxOfRateLimiter, except that a
// negative delay from a limiter of another package counts as 0 instead of
// being returned, and the constructor copies the limiters and rejects nil
// ones and an empty list.
//
// A MaxOfRateLimiter is safe for concurrent use if its limiters are, and adds
// no allocation of its own. Its zero value has no limiters: When returns 0.
type MaxOfRateLimiter[T comparable] struct {
	limiters []RateLimiter[T]
}

// NewMaxOfRateLimiter returns a [MaxOfRateLimiter] over limiters. It panics
// if a limiter is nil (a typed nil included), or if there is none: client-go's returns 0 from every
// When then, so a queue would requeue a failing item at once, in a hot loop.
func NewMaxOfRateLimiter[T comparable](limiters ...RateLimiter[T]) *MaxOfRateLimiter[T] {
	if len(limiters) == 0 {
		badArgument("NewMaxOfRateLimiter", "limiters must hold at least one limiter", 0)
	}
	for i, l := range limiters {
		mustNotBeNil("NewMaxOfRateLimiter", "limiters["+strconv.Itoa(i)+"]", isNilValue(l))
	}
	return &MaxOfRateLimiter[T]{limiters: append([]RateLimiter[T](nil), limiters...)}
}

// When calls When on every limiter and returns the longest delay, or 0 if
// all of them return 0 or less. It blocks only if a limiter's When does.
func (l *MaxOfRateLimiter[T]) When(item T) time.Duration {
	var d time.Duration
	for _, rl := range l.limiters {
		d = max(d, rl.When(item))
	}
	return d
}

// Forget calls Forget on every limiter.
func (l *MaxOfRateLimiter[T]) Forget(item T) {
	for _, rl := range l.limiters {
		rl.Forget(item)
	}
}

// NumRequeues returns the largest NumRequeues of the limiters, or 0.
func (l *MaxOfRateLimiter[T]) NumRequeues(item T) int {
	n := 0
	for _, rl := range l.limiters {
		n = max(n, rl.NumRequeues(item))
	}
	return n
}

// limiterClock reports the clock of the first part that reads one.
func (l *MaxOfRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) {
	for _, rl := range l.limiters {
		if p, ok := rl.(packageLimiter); ok {
			if clk, ok := p.limiterClock(); ok {
				return clk, true
			}
		}
	}
	return nil, false
}

// requeueCap reports no cap: the parts' caps would bound only the parts
// that state one.
func (l *MaxOfRateLimiter[T]) requeueCap() (time.Duration, bool) { return 0, false }

// WithMaxWaitRateLimiter caps the delays of another rate limiter: When
// returns the inner limiter's delay, but no more than maxDelay. Forget and
// NumRequeues are the inner limiter's.
//
// It behaves as client-go's workqueue.WithMaxWaitRateLimiter, except that a
// negative delay from an inner limiter of another package is returned as 0,
// and the constructor rejects a nil limiter and a negative maxDelay.
//
// A WithMaxWaitRateLimiter is safe for concurrent use if the inner limiter
// is, and adds no allocation of its own. Its zero value is not usable (its
// methods panic): use [NewWithMaxWaitRateLimiter].
type WithMaxWaitRateLimiter[T comparable] struct {
	limiter  RateLimiter[T]
	maxDelay time.Duration
}

// NewWithMaxWaitRateLimiter returns a [WithMaxWaitRateLimiter] that caps
// limiter's delays at maxDelay. A maxDelay of 0 makes every delay 0 while the
// inner limiter still counts failures. A nil limiter (a typed nil included)
// or a negative maxDelay panics.
func NewWithMaxWaitRateLimiter[T comparable](limiter RateLimiter[T], maxDelay time.Duration) *WithMaxWaitRateLimiter[T] {
	const where = "NewWithMaxWaitRateLimiter"
	mustNotBeNil(where, "limiter", isNilValue(limiter))
	mustNotBeNegative(where, "maxDelay", maxDelay)
	return &WithMaxWaitRateLimiter[T]{limiter: limiter, maxDelay: maxDelay}
}

// When returns the inner limiter's delay for item, clamped to
// [0, maxDelay]. It blocks only if the inner limiter's When does.
func (l *WithMaxWaitRateLimiter[T]) When(item T) time.Duration {
	return min(max(l.limiter.When(item), 0), l.maxDelay)
}

// Forget calls the inner limiter's Forget.
func (l *WithMaxWaitRateLimiter[T]) Forget(item T) {
	l.limiter.Forget(item)
}

// NumRequeues returns the inner limiter's NumRequeues.
func (l *WithMaxWaitRateLimiter[T]) NumRequeues(item T) int {
	return l.limiter.NumRequeues(item)
}

// limiterClock reports the wrapped limiter's clock.
func (l *WithMaxWaitRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) {
	if p, ok := l.limiter.(packageLimiter); ok {
		return p.limiterClock()
	}
	return nil, false
}

func (l *WithMaxWaitRateLimiter[T]) requeueCap() (time.Duration, bool) { return l.maxDelay, true }

// BucketRateLimiter is a token bucket shared by all items: it bounds how fast
// items are requeued overall, whichever items they are, so that a burst of
// failures (a whole cache resync failing at once, say) cannot flood the
// queue. It holds up to burst tokens and gains limit tokens per second; each
// When takes one token, and when none is left it returns how long until the
// token it took would have been earned. Tokens are taken at once even when
// the caller will wait, so concurrent callers queue up: at one instant, the
// first burst calls return 0 and each later call waits 1/limit longer than
// the one before.
//
// The delays are those of client-go's workqueue.BucketRateLimiter, which is a
// golang.org/x/time/rate Limiter's Reserve().Delay(): the same token
// arithmetic in float64, so that a test ported from client-go sees the same
// values, to the nanosecond, for a clock that only moves forward, rounding
// included: at 10 per second, the 41st token owed is 4.099999999 s away, not
// 4.1 s. The differences:
//
//   - Time comes from the clock given with [WithClock], not time.Now, so the
//     bucket can be tested with a fake clock; and it is read once per When,
//     not twice, and When allocates nothing where x/time/rate allocates a
//     Reservation (see BenchmarkBucketWhen).
//   - If the clock goes backwards, the bucket earns nothing until it passes
//     the latest instant it has seen. x/time/rate moves its reference instant
//     back with the clock, so a clock that steps back and forth (a wall clock
//     corrected by NTP, a fake clock set by hand) earns the same interval
//     twice.
//   - The constructor rejects a zero limit and a burst below 1, which in
//     client-go make every When after the first burst return x/time/rate's
//     InfDuration (about 292 years): the item is parked for good.
//
// Forget does nothing and NumRequeues returns 0, as in client-go: the bucket
// is a shared budget, not a per-item memory.
//
// A BucketRateLimiter is safe for concurrent use and allocates nothing. Its
// zero value is not usable (When panics): use [NewBucketRateLimiter].
type BucketRateLimiter[T comparable] struct {
	// Each When is the wait of a Limiter's ReserveN(1), made without the
	// Reservation's second clock read.
	lim Limiter
}

// NewBucketRateLimiter returns a [BucketRateLimiter] that allows limit
// requeues per second on average and up to burst at once. The bucket starts
// full. It reads the time from the clock given with [WithClock] (the real
// clock by default) and ignores the other options.
//
// A limit of math.Inf(1) means no limiting: every When returns 0 and takes no
// token, as with x/time/rate's Inf. A limit that is zero, negative or NaN
// panics, and so does a burst below 1: neither bounds a rate (client-go
// accepts them and parks items for about 292 years).
func NewBucketRateLimiter[T comparable](limit float64, burst int, opts ...Option) *BucketRateLimiter[T] {
	const where = "NewBucketRateLimiter"
	if !(limit > 0) {
		badArgument(where, "limit must be positive", limit)
	}
	if burst < 1 {
		badArgument(where, "burst must be at least 1", burst)
	}
	c := newConfig(opts)
	l := &BucketRateLimiter[T]{lim: Limiter{clock: c.clock, epoch: c.clock.Now()}}
	l.lim.init(limit, burst)
	return l
}

// When takes a token and returns how long the caller must wait for it: 0
// while the bucket holds a token, otherwise the time the bucket needs to earn
// back what it owes, which grows by 1/limit with every call until time passes.
// The item is ignored. The delay is never negative and saturates at the
// largest time.Duration. When never blocks.
func (l *BucketRateLimiter[T]) When(T) time.Duration {
	// The clock is read before the lock is taken, to keep the lock short;
	// callers racing past each other look like a clock going back by a few
	// nanoseconds, which the bucket handles.
	now := l.lim.now()
	l.lim.mu.Lock()
	wait := l.lim.takeOneLocked(now)
	l.lim.mu.Unlock()
	return wait
}

// Forget does nothing: the bucket's tokens are shared by all items, and
// forgetting one item does not give any back.
func (l *BucketRateLimiter[T]) Forget(T) {}

// NumRequeues returns 0: the bucket does not count per item.
func (l *BucketRateLimiter[T]) NumRequeues(T) int { return 0 }

func (l *BucketRateLimiter[T]) limiterClock() (clock.PassiveClock, bool) { return l.lim.clock, true }

// requeueCap reports no cap: a bucket's delay grows with the backlog.
func (l *BucketRateLimiter[T]) requeueCap() (time.Duration, bool) { return 0, false }

// tokenBucket is a token bucket without a lock or a clock of its own, for
// the default controller limiter, which guards it with the failure counts'
// lock. It is the same arithmetic as [Limiter]'s. The zero value is not
// usable: call init.
type tokenBucket struct {
	limit float64 // tokens earned per second; > 0, InfLimit for no limit
	burst int
	state bucketState
}

func (b *tokenBucket) init(limit float64, burst int) {
	b.limit = sanitizeLimit(limit)
	b.burst = burst
	b.state.tokens = float64(burst)
}

// takeLocked takes one token at instant now and returns how long the caller
// must wait for it.
func (b *tokenBucket) takeLocked(now time.Duration) time.Duration {
	if b.limit == InfLimit {
		return 0
	}
	wait, _ := b.state.take(max(now, 0), 1, b.limit, b.burst, maxDuration)
	return wait
}

// failureCounts is the per-item failure memory of the item limiters
// ([ItemExponentialFailureRateLimiter], [ItemFastSlowRateLimiter]).
//
// client-go keeps a map[T]int and touches it three times per When (read,
// read, write), under a deferred unlock. Here the map takes an item to a slot
// of a slab of entries, so that a When for an item already known is one map
// lookup and an increment, and slots are recycled through a free list, so
// that a steady state of failures and Forgets allocates nothing.
//
// One mutex guards everything: sharding the items over several mutexes by
// a hash of the item lost in BenchmarkItemExponentialWhen, since hashing
// costs more than the lock it saves, and any worker may fail any item. The
// workqueue that calls When holds a single lock of its own anyway.
//
// When bounded (WithMaxTrackedItems), the entries also form a recency list,
// newest first, and a new item makes room by dropping the one whose last
// failure is the oldest: O(1), and the item dropped is the one most likely to
// have succeeded without its caller calling Forget, which is what leaks in
// the first place (kubernetes#138743).
//
// Entry 0 of entries is a sentinel, so that slot 0 means "none" in every link
// and the zero value of an entry is unlinked. Slots are int32 to keep entries
// small; that allows 2^31-1 items tracked at once, tens of gigabytes, far
// beyond any workqueue.
type failureCounts[T comparable] struct {
	mu      sync.Mutex
	slots   map[T]int32 // item → its slot in entries
	entries []failureEntry[T]
	free    int32 // first recycled slot, chained through older; 0 if none
	newest  int32 // head of the recency list; 0 if empty or unbounded
	oldest  int32 // tail of the recency list; 0 if empty or unbounded
	limit   int   // most items kept; 0 means no limit
}

// failureEntry is one item's failure count. newer and older link the recency
// list when the store is bounded; older also chains the free list.
type failureEntry[T comparable] struct {
	item         T
	count        int
	newer, older int32
}

// init makes s an empty store that keeps at most maxItems items, or any
// number if maxItems is 0.
func (s *failureCounts[T]) init(maxItems int) {
	s.slots = make(map[T]int32)
	s.entries = make([]failureEntry[T], 1, 8) // slot 0 is the sentinel
	s.limit = maxItems
}

// record counts one more failure of item and returns the count before it: 0
// the first time, or after a forget or an eviction.
func (s *failureCounts[T]) record(item T) int {
	s.mu.Lock()
	n := s.recordLocked(item)
	s.mu.Unlock()
	return n
}

// count returns the failures of item, 0 if it is not tracked.
func (s *failureCounts[T]) count(item T) int {
	s.mu.Lock()
	n := 0
	if i, ok := s.slots[item]; ok {
		n = s.entries[i].count
	}
	s.mu.Unlock()
	return n
}

// forget drops item.
func (s *failureCounts[T]) forget(item T) {
	s.mu.Lock()
	if i, ok := s.slots[item]; ok {
		delete(s.slots, item)
		s.releaseLocked(i)
	}
	s.mu.Unlock()
}

// len returns the number of items tracked, for tests.
func (s *failureCounts[T]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.slots)
}

func (s *failureCounts[T]) recordLocked(item T) int {
	if i, ok := s.slots[item]; ok {
		e := &s.entries[i]
		n := e.count
		if n < math.MaxInt {
			e.count++
		}
		if s.limit > 0 && s.newest != i {
			s.unlinkLocked(i)
			s.pushNewestLocked(i)
		}
		return n
	}
	if s.limit > 0 && len(s.slots) >= s.limit {
		old := s.oldest
		delete(s.slots, s.entries[old].item)
		s.releaseLocked(old)
	}
	i := s.free
	if i != 0 {
		s.free = s.entries[i].older
	} else {
		i = int32(len(s.entries))
		s.entries = append(s.entries, failureEntry[T]{})
	}
	s.entries[i] = failureEntry[T]{item: item, count: 1}
	s.slots[item] = i
	if s.limit > 0 {
		s.pushNewestLocked(i)
	}
	return 0
}

// releaseLocked unlinks slot i, clears it (so that the item it held can be
// collected) and puts it on the free list. The caller has deleted the map
// entry.
func (s *failureCounts[T]) releaseLocked(i int32) {
	if s.limit > 0 {
		s.unlinkLocked(i)
	}
	s.entries[i] = failureEntry[T]{older: s.free}
	s.free = i
}

func (s *failureCounts[T]) unlinkLocked(i int32) {
	e := &s.entries[i]
	if e.newer != 0 {
		s.entries[e.newer].older = e.older
	} else {
		s.newest = e.older
	}
	if e.older != 0 {
		s.entries[e.older].newer = e.newer
	} else {
		s.oldest = e.newer
	}
	e.newer, e.older = 0, 0
}

func (s *failureCounts[T]) pushNewestLocked(i int32) {
	e := &s.entries[i]
	e.newer, e.older = 0, s.newest
	if s.newest != 0 {
		s.entries[s.newest].newer = i
	} else {
		s.oldest = i
	}
	s.newest = i
}
