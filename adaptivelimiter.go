package backoff

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of [NewAdaptiveLimiter], changed with [WithMinLimit],
// [WithMaxLimit] and [WithInitialLimit].
const (
	DefaultMinLimit     = 1
	DefaultMaxLimit     = 1000
	DefaultInitialLimit = 20
)

// AdaptiveLimiter is a concurrency limit learned from the latency of the
// calls it admits and from the overload signals their callers report: how
// many calls to one downstream may be in flight at once, when nobody can say
// how many it can serve.
//
// A caller takes a [Permit] with [AdaptiveLimiter.Acquire] (which waits for
// a slot) or [AdaptiveLimiter.TryAcquire] (which does not), makes its call,
// and ends the permit once: [Permit.Record] for a call that succeeded (its
// latency is a sample), [Permit.Drop] for an overload signal (a 429 or 503,
// a timeout, a [RetryAfter] error), after which the limit falls at once, or
// [Permit.Release] for an outcome that says nothing about the downstream.
//
// # How the limit moves
//
// The limiter keeps two figures: the no-load latency, which it measures at a
// reduced concurrency, and the limit. After every window of 16 samples it
// compares the window's mean latency with the no-load latency: when the
// downstream queues, latency grows in proportion to the calls in flight
// beyond its capacity, so their ratio says how far the limit is above it.
// The target is the limit scaled by that ratio (at most halved), plus a
// headroom of its square root, so that the limit keeps finding out whether
// more would be served; the limit moves a quarter of the way to the target,
// so that one noisy window does not swing it. It settles where the calls in
// flight exceed the downstream's concurrency by about the headroom: the
// downstream stays busy, and its queue stays short. It grows only while at
// least half the limit was in use. A dropped call cuts the limit by a tenth
// at once, at most once per no-load latency (the calls in flight when it
// fell report the same overload). This is the gradient law of Netflix's
// concurrency-limits, with the baseline below in place of its minimum
// latency.
//
// The no-load latency is measured, never inferred from the latency under
// load: every 30 s of the clock, the limiter admits at most half its limit
// until the calls in flight have fallen to that level, and takes the mean
// latency of the next calls it admits as the no-load latency, which may go
// up as well as down. The first measurement, right after construction, runs
// at the initial limit; so choose one the downstream can serve without
// queueing, or the limit falls to where it belongs only after the second. So a long
// overload cannot raise it (the failure of latency baselines that are a
// minimum or an average of recent samples: every sample of a long incident
// includes queueing, and the limit stops falling), and a downstream that
// became faster or slower is re-learned within 30 s. A measurement costs a
// few round trips at half the limit.
//
// [AdaptiveLimiter.Limit] reports the learned limit; while the no-load
// latency is being measured, fewer calls than that are admitted.
//
// Time is read from the clock of [WithClock]. Acquiring and ending a permit
// allocate nothing (a waiting Acquire, nothing in steady state). An
// AdaptiveLimiter is safe for concurrent use by multiple goroutines. Its
// zero value is not usable (its methods panic): use [NewAdaptiveLimiter].
type AdaptiveLimiter struct {
	clock              clock.WithDelayedExecution
	epoch              time.Time
	minLimit, maxLimit int
	waiters            sync.Pool // of *limiterWaiter

	mu       sync.Mutex
	limit    float64 // in [minLimit, maxLimit]
	inflight int
	queue    []*limiterWaiter // Acquires waiting, first at queue[head]
	head     int
	// The window being gathered: samples of calls admitted since the last
	// update, and the most calls in flight at once meanwhile.
	winSum   time.Duration
	winCount int
	winPeak  int
	noLoad   time.Duration // the no-load latency; 0 until first measured
	lastDrop time.Duration // when a Drop last cut the limit
	probe    limiterProbe
}

// limiterProbe is the state of a measurement of the no-load latency.
type limiterProbe struct {
	active    bool
	measuring bool          // the calls in flight have fallen to limit
	seq       uint32        // the measurement's number, from 1; permits carry it
	limit     int           // the concurrency the measurement runs at
	sum       time.Duration // of the latencies of the permits that carry seq
	count     int
	next      time.Duration // when the next measurement starts
}

// The constants of the control law; see AdaptiveLimiter's doc.
const (
	adaptiveWindowSamples = 16               // samples per window
	adaptiveProbeSamples  = 32               // samples per no-load measurement
	adaptiveProbeEvery    = 30 * time.Second // between measurements
	adaptiveMaxCut        = 0.5              // the smallest scale of one window's update
	adaptiveSmoothing     = 0.25             // the share of a window's target taken at once
	adaptiveDropFactor    = 0.9              // a Drop's cut
)

// limitsConfig holds the options that AdaptiveLimiter and AdaptiveRate
// read. 0 is the default.
type limitsConfig struct {
	min, max, initial int
	initialRate       float64
}

// WithMinLimit sets the lowest limit of an [AdaptiveLimiter]:
// [DefaultMinLimit] by default. It panics if n < 1.
func WithMinLimit(n int) Option {
	mustBeLimit("WithMinLimit", n)
	return countOption(optionMinLimit, n)
}

// WithMaxLimit sets the highest limit of an [AdaptiveLimiter]:
// [DefaultMaxLimit] by default. It panics if n < 1.
func WithMaxLimit(n int) Option {
	mustBeLimit("WithMaxLimit", n)
	return countOption(optionMaxLimit, n)
}

// WithInitialLimit sets the limit an [AdaptiveLimiter] starts with:
// [DefaultInitialLimit] by default, raised or lowered into the limiter's
// range. It panics if n < 1.
func WithInitialLimit(n int) Option {
	mustBeLimit("WithInitialLimit", n)
	return countOption(optionInitialLimit, n)
}

func mustBeLimit(where string, n int) {
	if n < 1 {
		badArgument(where, "n must be at least 1", n)
	}
}

// NewAdaptiveLimiter returns an [AdaptiveLimiter] that starts at the limit
// of [WithInitialLimit] and stays within [WithMinLimit] and [WithMaxLimit].
// It reads the time through the clock of [WithClock] (the real clock by
// default) and ignores the other options. A minimum above the maximum
// panics, by the package's bad-input rule.
func NewAdaptiveLimiter(opts ...Option) *AdaptiveLimiter {
	c := newConfig(opts)
	lo, hi, initial := DefaultMinLimit, DefaultMaxLimit, DefaultInitialLimit
	if c.limits.min > 0 {
		lo = c.limits.min
	}
	if c.limits.max > 0 {
		hi = c.limits.max
	}
	if c.limits.initial > 0 {
		initial = c.limits.initial
	}
	if lo > hi {
		badArgument("NewAdaptiveLimiter", "the minimum limit must not exceed the maximum ("+strconv.Itoa(hi)+")", lo)
	}
	l := &AdaptiveLimiter{clock: c.clock, epoch: c.clock.Now(), minLimit: lo, maxLimit: hi}
	l.limit = float64(min(max(initial, lo), hi))
	l.startProbeLocked()
	l.probe.limit = int(l.limit) // the first measurement runs at the initial limit
	return l
}

// now returns the time since the limiter was made, never negative.
func (l *AdaptiveLimiter) now() time.Duration { return max(l.clock.Since(l.epoch), 0) }

// Limit returns the learned limit: at most this many calls are in flight at
// once (fewer while the no-load latency is measured).
func (l *AdaptiveLimiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// Inflight returns the number of permits acquired and not yet ended.
func (l *AdaptiveLimiter) Inflight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight
}

// TryAcquire returns a permit if a call may start now, and false otherwise
// (also when Acquires are waiting: they come first). It never blocks and
// allocates nothing.
func (l *AdaptiveLimiter) TryAcquire() (Permit, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head < len(l.queue) {
		return Permit{}, false
	}
	return l.admitLocked(now)
}

// Acquire returns a permit once a call may start, waiting in line behind
// earlier Acquires while the limit is reached. It returns at once with ctx's
// error if ctx is already done, and with ctx's error (which matches
// context.Cause(ctx) under errors.Is) if ctx ends while it waits; no permit
// is then held. Acquire starts no goroutine and uses no timer: a waiting
// Acquire wakes when a permit ends or the limit rises.
func (l *AdaptiveLimiter) Acquire(ctx context.Context) (Permit, error) {
	mustNotBeNil("AdaptiveLimiter.Acquire", "ctx", ctx == nil)
	if ctx.Err() != nil {
		return Permit{}, contextError(ctx)
	}
	now := l.now()
	l.mu.Lock()
	if l.head == len(l.queue) {
		if p, ok := l.admitLocked(now); ok {
			l.mu.Unlock()
			return p, nil
		}
	}
	w, _ := l.waiters.Get().(*limiterWaiter)
	if w == nil {
		w = &limiterWaiter{ready: make(chan struct{}, 1)}
	}
	l.queue = append(l.queue, w)
	l.mu.Unlock()
	select {
	case <-w.ready:
		p := w.permit
		l.putWaiter(w)
		return p, nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	waiting := l.removeWaiterLocked(w)
	l.mu.Unlock()
	if !waiting {
		// A permit was handed over as ctx ended: give it back.
		<-w.ready
		p := w.permit
		p.Release()
	}
	l.putWaiter(w)
	return Permit{}, contextError(ctx)
}

// limiterWaiter is an Acquire in line; ready receives once it holds permit.
type limiterWaiter struct {
	ready  chan struct{}
	permit Permit
}

func (l *AdaptiveLimiter) putWaiter(w *limiterWaiter) {
	w.permit = Permit{}
	l.waiters.Put(w)
}

// removeWaiterLocked takes w out of the line and reports whether it was
// still in it.
func (l *AdaptiveLimiter) removeWaiterLocked(w *limiterWaiter) bool {
	for i := l.head; i < len(l.queue); i++ {
		if l.queue[i] == w {
			copy(l.queue[i:], l.queue[i+1:])
			l.queue[len(l.queue)-1] = nil
			l.queue = l.queue[:len(l.queue)-1]
			return true
		}
	}
	return false
}

// admitLimitLocked is the number of calls that may be in flight now.
func (l *AdaptiveLimiter) admitLimitLocked() int {
	if l.probe.active {
		return l.probe.limit
	}
	return int(l.limit)
}

// admitLocked admits a call at now if there is room.
func (l *AdaptiveLimiter) admitLocked(now time.Duration) (Permit, bool) {
	if !l.probe.active && now >= l.probe.next {
		l.startProbeLocked()
	}
	if l.inflight >= l.admitLimitLocked() {
		return Permit{}, false
	}
	l.inflight++
	l.winPeak = max(l.winPeak, l.inflight)
	p := Permit{l: l, start: now}
	if l.probe.measuring {
		p.probe = l.probe.seq
	}
	return p, true
}

// wakeLocked hands the free slots to waiting Acquires, first come first.
func (l *AdaptiveLimiter) wakeLocked(now time.Duration) {
	for l.head < len(l.queue) {
		p, ok := l.admitLocked(now)
		if !ok {
			break
		}
		w := l.queue[l.head]
		l.queue[l.head] = nil
		l.head++
		w.permit = p
		w.ready <- struct{}{}
	}
	if l.head == len(l.queue) {
		l.queue, l.head = l.queue[:0], 0
	} else if l.head > len(l.queue)/2 {
		n := copy(l.queue, l.queue[l.head:])
		clear(l.queue[n:])
		l.queue, l.head = l.queue[:n], 0
	}
}

// The ways a Permit ends.
const (
	permitRelease = iota
	permitRecord
	permitDrop
)

// end ends the permit p of this limiter at now.
func (l *AdaptiveLimiter) end(p *Permit, how int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight <= 0 {
		badUse("Permit", "a permit was ended twice (through a copy)")
	}
	l.inflight--
	switch how {
	case permitRecord:
		l.sampleLocked(p, now-p.start, now)
	case permitDrop:
		l.dropLocked(now)
	}
	if l.probe.active && !l.probe.measuring && l.inflight <= l.probe.limit {
		l.probe.measuring = true
	}
	l.wakeLocked(now)
}

// sampleLocked takes the latency of a successful call admitted at
// p.start.
func (l *AdaptiveLimiter) sampleLocked(p *Permit, latency, now time.Duration) {
	if l.probe.active {
		if p.probe != l.probe.seq {
			return // admitted before the measurement: its latency may include queueing
		}
		l.probe.sum += latency
		l.probe.count++
		if l.probe.count >= adaptiveProbeSamples {
			l.noLoad = max(l.probe.sum/time.Duration(l.probe.count), 1)
			l.probe.active, l.probe.measuring = false, false
			l.probe.next = now + adaptiveProbeEvery
			l.resetWindowLocked()
		}
		return
	}
	if p.probe != 0 {
		return // measured at the reduced limit: not a sample of the limit's latency
	}
	l.winSum += latency
	l.winCount++
	if l.winCount < adaptiveWindowSamples {
		return
	}
	mean := l.winSum / time.Duration(l.winCount)
	// The gradient: when the downstream queues, mean/noLoad is the calls in
	// flight over the calls it serves at once.
	scale := min(max(float64(l.noLoad)/float64(max(mean, 1)), adaptiveMaxCut), 1)
	target := l.limit*scale + math.Sqrt(l.limit)
	if 2*l.winPeak < int(l.limit) {
		// The callers did not use the limit: latency says nothing about a
		// higher one.
		target = min(target, l.limit)
	}
	l.setLimitLocked(l.limit + adaptiveSmoothing*(target-l.limit))
	l.resetWindowLocked()
}

// dropLocked cuts the limit for an overload signal, once per no-load
// latency: calls in flight when the limit fell report the overload that the
// cut answers.
func (l *AdaptiveLimiter) dropLocked(now time.Duration) {
	if l.lastDrop != 0 && now-l.lastDrop < l.noLoad {
		return
	}
	l.lastDrop = max(now, 1)
	l.setLimitLocked(l.limit * adaptiveDropFactor)
	l.resetWindowLocked()
}

func (l *AdaptiveLimiter) setLimitLocked(v float64) {
	l.limit = min(max(v, float64(l.minLimit)), float64(l.maxLimit))
}

func (l *AdaptiveLimiter) resetWindowLocked() {
	l.winSum, l.winCount, l.winPeak = 0, 0, l.inflight
}

// startProbeLocked starts a measurement of the no-load latency at half the
// limit.
func (l *AdaptiveLimiter) startProbeLocked() {
	l.probe.seq++
	if l.probe.seq == 0 {
		l.probe.seq = 1 // 0 marks the permits that measure nothing
	}
	l.probe.active = true
	l.probe.limit = max(int(l.limit)/2, l.minLimit)
	l.probe.measuring = l.inflight <= l.probe.limit
	l.probe.sum, l.probe.count = 0, 0
}

// A Permit is a slot of an [AdaptiveLimiter], from [AdaptiveLimiter.Acquire]
// or [AdaptiveLimiter.TryAcquire]. End it exactly once, with
// [Permit.Record], [Permit.Drop] or [Permit.Release]; ending it clears it,
// so a later call on the same variable does nothing, and
//
//	p, err := l.Acquire(ctx)
//	if err != nil { ... }
//	defer p.Release() // does nothing once Record or Drop has ended p
//
// is safe. Ending a copy of an ended Permit counts the slot free twice: a
// bug, which panics if it takes the count of calls in flight below zero.
//
// A Permit is a small value; ending it allocates nothing. Its zero value
// holds no slot, and ending it does nothing.
type Permit struct {
	l     *AdaptiveLimiter
	start time.Duration // when it was admitted, on the limiter's clock
	probe uint32        // the no-load measurement it is part of; 0 for none
}

// Record ends the permit of a call that succeeded: its latency, from the
// permit's grant to now, is a sample of the downstream's latency.
func (p *Permit) Record() { p.finish(permitRecord) }

// Drop ends the permit of a call that met an overload signal (a 429 or 503
// answer, a timeout, a [RetryAfter] error): the limit falls.
func (p *Permit) Drop() { p.finish(permitDrop) }

// Release ends the permit without a sample, for a call whose outcome says
// nothing about the downstream's load (one cancelled by its caller, an error
// of the caller's own).
func (p *Permit) Release() { p.finish(permitRelease) }

func (p *Permit) finish(how int) {
	l := p.l
	if l == nil {
		return
	}
	p.l = nil
	l.end(p, how)
}
