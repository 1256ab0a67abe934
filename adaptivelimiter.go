package backoff

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
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
// allocate nothing (a waiting Acquire, nothing in steady state), and take
// no lock while no Acquire waits and no measurement runs. An
// AdaptiveLimiter is safe for concurrent use by multiple goroutines. Its
// zero value is not usable (its methods panic): use [NewAdaptiveLimiter].
type AdaptiveLimiter struct {
	// What a permit's fast path reads and writes, side by side so that a
	// permit moves one cache line between cores, not several. Acquiring and
	// ending a permit take no lock while nothing else is going on: no
	// Acquire waits and no measurement runs (the state's locked bit is then
	// clear); the lock orders the rest.
	state     atomic.Uint64 // see stateInflight
	window    atomic.Uint64 // the window being gathered: see windowCountShift
	peak      atomic.Int64  // the most calls in flight at once in the window
	probeNext atomic.Int64  // when the next measurement starts (probe.next)

	clock              clock.WithDelayedExecution
	epoch              time.Time
	minLimit, maxLimit int
	waiters            sync.Pool // of *limiterWaiter

	mu       sync.Mutex
	limit    float64          // in [minLimit, maxLimit]
	queue    []*limiterWaiter // Acquires waiting, first at queue[head]
	head     int
	noLoad   time.Duration // the no-load latency; 0 until first measured
	lastDrop time.Duration // when a Drop last cut the limit
	probe    limiterProbe
}

// The state word: the calls in flight in its low 32 bits, the number of
// calls that may be in flight in the next 31, and its top bit set while
// permits must take the lock (Acquires wait in line, or the no-load latency
// is being measured). Admitting is a compare-and-swap that adds one while
// the bit is clear and the count is below the limit; a lock holder changes
// the limit and the bit with compare-and-swaps that keep the count.
const (
	stateInflight   = 1<<32 - 1
	stateLimitShift = 32
	stateMaxLimit   = 1<<31 - 1 // a higher limit is stored as this one: no caller gets near either
	stateLocked     = 1 << 63
)

// packState returns the state word with the calls in flight of inflight's
// low 32 bits, the limit and the locked bit.
func packState(inflight uint64, limit int, locked bool) uint64 {
	s := inflight&stateInflight | uint64(min(limit, stateMaxLimit))<<stateLimitShift
	if locked {
		s |= stateLocked
	}
	return s
}

// The window word: the number of samples in its top 16 bits, the sum of
// their latencies, in nanoseconds, in the low 48. A sample longer than
// maxSampleLatency counts as that long, so that a full window's sum (16
// samples: a window is updated before it takes a 17th) stays far inside 48
// bits.
const (
	windowCountShift = 48
	windowSumMask    = 1<<windowCountShift - 1
	maxSampleLatency = 1 << 40 // about 18 minutes
)

func windowCount(w uint64) int { return int(w >> windowCountShift) }

// windowSample is what a sample of the given latency adds to the window.
func windowSample(latency time.Duration) uint64 {
	return 1<<windowCountShift | uint64(min(max(latency, 0), maxSampleLatency))
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
	onThrottled       func(retryAfter time.Duration) // AdaptiveRate's (adaptiveratesteer.go)
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
	l.syncStateLocked()
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
func (l *AdaptiveLimiter) Inflight() int { return int(l.state.Load() & stateInflight) }

// TryAcquire returns a permit if a call may start now, and false otherwise
// (also when Acquires are waiting: they come first). It never blocks and
// allocates nothing.
func (l *AdaptiveLimiter) TryAcquire() (Permit, bool) {
	now := l.now()
	if p, ok, decided := l.admitFast(now); decided {
		return p, ok
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head < len(l.queue) {
		return Permit{}, false
	}
	return l.admitLocked(now)
}

// admitFast admits a call at now without the lock. decided is false when
// the lock must decide: Acquires wait, a measurement runs or is due.
func (l *AdaptiveLimiter) admitFast(now time.Duration) (p Permit, ok, decided bool) {
	if now >= time.Duration(l.probeNext.Load()) {
		return Permit{}, false, false
	}
	for {
		s := l.state.Load()
		if s&stateLocked != 0 {
			return Permit{}, false, false
		}
		n := s & stateInflight
		if n >= s>>stateLimitShift {
			return Permit{}, false, true
		}
		if l.state.CompareAndSwap(s, s+1) {
			l.notePeak(int64(n + 1))
			return Permit{l: l, start: now}, true, true
		}
	}
}

// notePeak records n calls in flight in the window's peak.
func (l *AdaptiveLimiter) notePeak(n int64) {
	for {
		peak := l.peak.Load()
		if n <= peak || l.peak.CompareAndSwap(peak, n) {
			return
		}
	}
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
	if p, ok, _ := l.admitFast(now); ok {
		return p, nil
	}
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
	// From here on, permits end under the lock and wake the line; one that
	// ended after the check above and before the state said so left a
	// slot that only this call can hand out.
	l.syncStateLocked()
	l.wakeLocked(now)
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
	l.syncStateLocked()
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

// syncStateLocked writes the admission limit and the locked bit into the
// state word, keeping its count of calls in flight.
func (l *AdaptiveLimiter) syncStateLocked() {
	limit, locked := l.admitLimitLocked(), l.probe.active || l.head < len(l.queue)
	for {
		s := l.state.Load()
		if l.state.CompareAndSwap(s, packState(s, limit, locked)) {
			return
		}
	}
}

// admitLocked admits a call at now if there is room.
func (l *AdaptiveLimiter) admitLocked(now time.Duration) (Permit, bool) {
	if !l.probe.active && now >= l.probe.next {
		l.startProbeLocked()
		l.syncStateLocked()
	}
	for {
		s := l.state.Load()
		n := s & stateInflight
		if n >= uint64(l.admitLimitLocked()) {
			return Permit{}, false
		}
		if l.state.CompareAndSwap(s, s+1) {
			l.notePeak(int64(n + 1))
			p := Permit{l: l, start: now}
			if l.probe.measuring {
				p.probe = l.probe.seq
			}
			return p, true
		}
	}
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
	l.syncStateLocked()
}

// The ways a Permit ends.
const (
	permitRelease = iota
	permitRecord
	permitDrop
)

// end ends the permit p of this limiter at now. A Record or Release of a
// permit that measures nothing takes no lock while the state's locked bit
// is clear: nobody waits for its slot and no measurement needs to see it.
func (l *AdaptiveLimiter) end(p *Permit, how int) {
	now := l.now()
	if how != permitDrop && p.probe == 0 {
		for {
			s := l.state.Load()
			if s&stateLocked != 0 || s&stateInflight == 0 {
				break
			}
			if l.state.CompareAndSwap(s, s-1) {
				if how == permitRecord {
					l.addSample(now-p.start, now)
				}
				return
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		s := l.state.Load()
		if s&stateInflight == 0 {
			badUse("Permit", "a permit was ended twice (through a copy)")
		}
		if l.state.CompareAndSwap(s, s-1) {
			break
		}
	}
	switch how {
	case permitRecord:
		l.sampleLocked(p, now-p.start, now)
	case permitDrop:
		l.dropLocked(now)
	}
	if l.probe.active && !l.probe.measuring && l.Inflight() <= l.probe.limit {
		l.probe.measuring = true
	}
	l.wakeLocked(now)
}

// addSample adds a latency to the window without the lock, unless the
// window is full: the sample that fills it updates the limit, under the
// lock, and a sample that finds it full waits for that.
func (l *AdaptiveLimiter) addSample(latency, now time.Duration) {
	v := windowSample(latency)
	added := false
	for !added {
		w := l.window.Load()
		if windowCount(w) >= adaptiveWindowSamples {
			break
		}
		if added = l.window.CompareAndSwap(w, w+v); added && windowCount(w+v) < adaptiveWindowSamples {
			return
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if added {
		l.updateLocked()
	} else {
		l.addSampleLocked(v)
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
			l.probeNext.Store(int64(l.probe.next))
			l.resetWindowLocked()
		}
		return
	}
	if p.probe != 0 {
		return // measured at the reduced limit: not a sample of the limit's latency
	}
	l.addSampleLocked(windowSample(latency))
}

// addSampleLocked adds the sample v (see windowSample) to the window, and
// updates the limit once the window is full. A full window that cannot be
// updated (a measurement began) drops the sample; the measurement's end
// clears the window.
func (l *AdaptiveLimiter) addSampleLocked(v uint64) {
	for {
		w := l.window.Load()
		if windowCount(w) >= adaptiveWindowSamples {
			if !l.updateLocked() {
				return
			}
			continue
		}
		if l.window.CompareAndSwap(w, w+v) {
			if windowCount(w+v) >= adaptiveWindowSamples {
				l.updateLocked()
			}
			return
		}
	}
}

// updateLocked moves the limit by the full window's mean latency, and
// reports whether it did (not while a measurement runs).
func (l *AdaptiveLimiter) updateLocked() bool {
	if l.probe.active {
		return false
	}
	w := l.window.Load()
	n := windowCount(w)
	if n < adaptiveWindowSamples {
		return true // another holder of the lock updated it
	}
	mean := time.Duration(w&windowSumMask) / time.Duration(n)
	// The gradient: when the downstream queues, mean/noLoad is the calls in
	// flight over the calls it serves at once.
	scale := min(max(float64(l.noLoad)/float64(max(mean, 1)), adaptiveMaxCut), 1)
	target := l.limit*scale + math.Sqrt(l.limit)
	if 2*l.peak.Load() < int64(l.limit) {
		// The callers did not use the limit: latency says nothing about a
		// higher one.
		target = min(target, l.limit)
	}
	l.setLimitLocked(l.limit + adaptiveSmoothing*(target-l.limit))
	l.resetWindowLocked()
	return true
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
	l.syncStateLocked()
}

// resetWindowLocked starts a new window. A sample added without the lock
// as it starts may be lost: a window is a statistic, not a count.
func (l *AdaptiveLimiter) resetWindowLocked() {
	l.window.Store(0)
	l.peak.Store(int64(l.Inflight()))
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
	l.probe.measuring = l.Inflight() <= l.probe.limit
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
// permit's grant to now, is a sample of the downstream's latency (one of
// over 2⁴⁰ ns, about 18 minutes, counts as that long).
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
