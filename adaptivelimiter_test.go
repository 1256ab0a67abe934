package backoff_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// takeAll takes every permit TryAcquire grants.
func takeAll(l *backoff.AdaptiveLimiter) []backoff.Permit {
	var ps []backoff.Permit
	for {
		p, ok := l.TryAcquire()
		if !ok {
			return ps
		}
		ps = append(ps, p)
	}
}

// waves drives l with n waves of a demand of demand calls to a downstream
// that serves capacity calls at once in base: each wave takes what l
// admits, steps the clock by the wave's latency (base, times the calls in
// flight over capacity when they exceed it), and records every call.
func waves(l *backoff.AdaptiveLimiter, clk *testingclock.FakeClock, n, demand, capacity int, base time.Duration) {
	for range n {
		var ps []backoff.Permit
		for len(ps) < demand {
			p, ok := l.TryAcquire()
			if !ok {
				break
			}
			ps = append(ps, p)
		}
		latency := base
		if len(ps) > capacity {
			latency = base * time.Duration(len(ps)) / time.Duration(capacity)
		}
		clk.Step(latency)
		for i := range ps {
			ps[i].Record()
		}
	}
}

func TestAdaptiveLimiterStartsAtItsInitialLimit(t *testing.T) {
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(testingclock.NewFakeClock(epoch)))
	assert.Equal(t, backoff.DefaultInitialLimit, l.Limit())
	ps := takeAll(l)
	assert.Len(t, ps, backoff.DefaultInitialLimit, "TryAcquire grants the limit, no more")
	assert.Equal(t, backoff.DefaultInitialLimit, l.Inflight())
	for i := range ps {
		ps[i].Release()
	}
	assert.Equal(t, 0, l.Inflight())

	l = backoff.NewAdaptiveLimiter(backoff.WithInitialLimit(500), backoff.WithMaxLimit(8), backoff.WithMinLimit(2))
	assert.Equal(t, 8, l.Limit(), "the initial limit is brought into the range")
	l = backoff.NewAdaptiveLimiter(backoff.WithInitialLimit(1), backoff.WithMinLimit(3))
	assert.Equal(t, 3, l.Limit())
}

func TestAdaptiveLimiterPermitEndsOnce(t *testing.T) {
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(testingclock.NewFakeClock(epoch)))
	p, ok := l.TryAcquire()
	require.True(t, ok)
	assert.Equal(t, 1, l.Inflight())
	p.Record()
	p.Release() // a deferred Release after Record does nothing
	p.Drop()
	assert.Equal(t, 0, l.Inflight())

	var zero backoff.Permit
	zero.Release()
	zero.Record()
	assert.Equal(t, 0, l.Inflight(), "the zero Permit holds no slot")

	p, _ = l.TryAcquire()
	copied := p
	p.Release()
	assert.PanicsWithValue(t, "backoff: Permit: a permit was ended twice (through a copy)", copied.Release)
}

func TestAdaptiveLimiterDropLowersTheLimit(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(50))
	waves(l, clk, 5, 10, 100, 10*time.Millisecond) // learn the no-load latency
	before := l.Limit()
	p, _ := l.TryAcquire()
	q, _ := l.TryAcquire()
	p.Drop()
	after := l.Limit()
	assert.Less(t, after, before, "a drop lowers the limit at once")
	q.Drop()
	assert.Equal(t, after, l.Limit(), "a second drop within a no-load latency is the same overload")
	clk.Step(10 * time.Millisecond)
	p, _ = l.TryAcquire()
	p.Drop()
	assert.Less(t, l.Limit(), after, "a drop a no-load latency later lowers it again")

	l = backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(3), backoff.WithMinLimit(2))
	for range 10 {
		clk.Step(time.Second)
		p, _ := l.TryAcquire()
		p.Drop()
	}
	assert.Equal(t, 2, l.Limit(), "never below the minimum")
}

func TestAdaptiveLimiterFollowsTheDownstreamsCapacity(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(10))
	const base = 50 * time.Millisecond
	waves(l, clk, 600, 1000, 40, base)
	grown := l.Limit()
	assert.GreaterOrEqual(t, grown, 40, "with demand and no queueing, the limit grows to the capacity")
	assert.LessOrEqual(t, grown, 80, "and stops near it")

	waves(l, clk, 600, 1000, 10, base) // the capacity falls to a quarter
	fallen := l.Limit()
	assert.GreaterOrEqual(t, fallen, 10)
	assert.LessOrEqual(t, fallen, 20, "the limit follows it down")

	// Overload, 2 minutes of it; 10 in the long mode (BACKOFF_LONG=1),
	// which is seconds under the race detector.
	overload := 2400
	if longTests() {
		overload = 12000
	}
	waves(l, clk, overload, 1000, 10, base)
	assert.LessOrEqual(t, l.Limit(), fallen*11/10+1, "and stays down")

	waves(l, clk, 600, 1000, 40, base)
	assert.GreaterOrEqual(t, l.Limit(), 40, "and comes back up with the capacity")
}

// TestAdaptiveLimiterAfterItsFirstMeasurement: once the first measurement
// of the no-load latency is over, permits are admitted and ended without
// the lock. The limit holds there, a limit the callers fill grows, and the
// next measurement starts at the very instant it is due, at half the limit.
func TestAdaptiveLimiterAfterItsFirstMeasurement(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(2))
	waves(l, clk, 32, 1, 1000, 10*time.Millisecond) // the first measurement: 32 calls, one at a time
	measured := clk.Now()
	ps := takeAll(l)
	assert.Len(t, ps, 2, "the limit holds without the lock")
	for i := range ps {
		ps[i].Release()
	}
	// Callers fill the limit at the no-load latency, in waves of 2 calls:
	// every window of 16 samples ends with a wave, so the calls in flight
	// at once come only from what admitting them recorded.
	waves(l, clk, 60, 2, 1000, 10*time.Millisecond)
	grown := l.Limit()
	assert.Greater(t, grown, 2, "a limit the callers fill grows")
	clk.SetTime(measured.Add(30 * time.Second))
	assert.Len(t, takeAll(l), grown/2, "the next measurement starts when due, at half the limit")
}

// TestAdaptiveLimiterIgnoresAMeasuringPermitEndedLate: a permit admitted
// during a measurement of the no-load latency and ended after it is not a
// sample of the limit's latency, even on the path that takes no lock.
func TestAdaptiveLimiterIgnoresAMeasuringPermitEndedLate(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(16))
	late, ok := l.TryAcquire() // part of the first measurement
	require.True(t, ok)
	waves(l, clk, 32, 1, 1000, 10*time.Millisecond) // the measurement ends without it
	clk.Step(10 * time.Second)
	late.Record()
	waves(l, clk, 16, 1, 1000, 10*time.Millisecond) // a window of samples at the no-load latency
	assert.Equal(t, 16, l.Limit(), "the late permit's 10 s is not in the window (it would cut the limit)")
}

func TestAdaptiveLimiterDoesNotGrowUnused(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(20))
	waves(l, clk, 2000, 5, 1000, 10*time.Millisecond)
	assert.Equal(t, 20, l.Limit(), "a limit callers do not use says nothing about a higher one")
}

// TestAdaptiveLimiterGrowsWhenHalfItsLimitIsUsed: the "at least half"
// rule is inclusive: callers that keep exactly half the limit in flight
// against an idle downstream let it grow.
func TestAdaptiveLimiterGrowsWhenHalfItsLimitIsUsed(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(20))
	waves(l, clk, 200, 10, 1000, 10*time.Millisecond)
	assert.Greater(t, l.Limit(), 20, "half the limit was in use, at the no-load latency")
}

// TestAdaptiveLimiterMeasuresAtItsMinimumAtLeast: a measurement of the
// no-load latency admits half the limit, but never fewer calls than the
// minimum limit: at a limit of 1, one call still goes through while it
// runs, and at a minimum of 4 and a limit of 5, four do. (The maximum
// holds the limit where it started.)
func TestAdaptiveLimiterMeasuresAtItsMinimumAtLeast(t *testing.T) {
	for _, tc := range []struct{ min, initial int }{{1, 1}, {4, 5}} {
		clk := testingclock.NewFakeClock(epoch)
		l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(tc.initial), backoff.WithMinLimit(tc.min), backoff.WithMaxLimit(tc.initial))
		waves(l, clk, 40, tc.initial, 1000, 10*time.Millisecond) // the first measurement
		clk.Step(time.Minute)                                    // the next one is due
		ps := takeAll(l)
		assert.Len(t, ps, tc.min, "min %d, limit %d: admitted while measuring", tc.min, tc.initial)
		for i := range ps {
			ps[i].Release()
		}
	}
}

func TestAdaptiveLimiterRelearnsTheNoLoadLatency(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(10))
	waves(l, clk, 300, 1000, 20, 100*time.Millisecond)
	before := l.Limit()
	require.GreaterOrEqual(t, before, 20)
	// The downstream becomes twice as slow, with the same concurrency: the
	// limit falls at first, and comes back once the no-load latency is
	// measured again.
	waves(l, clk, 20, 1000, 20, 200*time.Millisecond)
	assert.Less(t, l.Limit(), before)
	waves(l, clk, 400, 1000, 20, 200*time.Millisecond) // 80 s
	assert.GreaterOrEqual(t, l.Limit(), 20)
}

func TestAdaptiveLimiterAcquireWaitsForASlot(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(2))
	ps := takeAll(l)
	require.Len(t, ps, 2)
	got := make(chan backoff.Permit)
	go func() {
		p, err := l.Acquire(context.Background())
		assert.NoError(t, err)
		got <- p
	}()
	_, ok := l.TryAcquire()
	assert.False(t, ok)
	ps[0].Record()
	p := <-got
	assert.Equal(t, 2, l.Inflight(), "the slot was handed over")
	p.Release()
	ps[1].Release()
	assert.Equal(t, 0, l.Inflight())
}

func TestAdaptiveLimiterAcquireEndsWithItsContext(t *testing.T) {
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(testingclock.NewFakeClock(epoch)), backoff.WithInitialLimit(1))
	p, _ := l.TryAcquire()
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error)
	go func() {
		_, err := l.Acquire(ctx)
		done <- err
	}()
	cancel(cause)
	err := <-done
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, cause)
	assert.Equal(t, 1, l.Inflight(), "the cancelled Acquire holds nothing")
	p.Release()
	assert.Equal(t, 0, l.Inflight())

	_, err = l.Acquire(ctx)
	assert.ErrorIs(t, err, context.Canceled, "a done context fails at once")
	assert.Equal(t, 0, l.Inflight())
}

func TestAdaptiveLimiterBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"WithMinLimit(0)", func() { backoff.WithMinLimit(0) }, "backoff: WithMinLimit: n must be at least 1, got 0"},
		{"WithMaxLimit(-1)", func() { backoff.WithMaxLimit(-1) }, "backoff: WithMaxLimit: n must be at least 1, got -1"},
		{"WithInitialLimit(0)", func() { backoff.WithInitialLimit(0) }, "backoff: WithInitialLimit: n must be at least 1, got 0"},
		{"min > max", func() { backoff.NewAdaptiveLimiter(backoff.WithMinLimit(9), backoff.WithMaxLimit(3)) },
			"backoff: NewAdaptiveLimiter: the minimum limit must not exceed the maximum (3), got 9"},
		{"nil ctx", func() {
			//lint:ignore SA1012 the nil context is the bad input under test
			backoff.NewAdaptiveLimiter().Acquire(nil) //nolint:staticcheck
		}, "backoff: AdaptiveLimiter.Acquire: ctx must not be nil, got <nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.PanicsWithValue(t, tc.want, tc.f) })
	}
}

// TestAdaptiveLimiterConcurrentPermitsAreCountedOnce runs many goroutines
// that acquire (some with contexts that end), and end their permits every
// way, while the clock moves: no permit is lost or counted twice, so the
// calls in flight return to 0, and never exceed the most the limiter admits.
func TestAdaptiveLimiterConcurrentPermitsAreCountedOnce(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(8), backoff.WithMaxLimit(16))
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 300 {
				var p backoff.Permit
				switch i % 3 {
				case 0:
					var ok bool
					if p, ok = l.TryAcquire(); !ok {
						continue
					}
				case 1:
					ctx, cancel := context.WithCancel(context.Background())
					if rng.IntN(4) == 0 {
						cancel()
					}
					var err error
					p, err = l.Acquire(ctx)
					cancel()
					if err != nil {
						continue
					}
				default:
					var err error
					if p, err = l.Acquire(context.Background()); err != nil {
						t.Error(err)
						return
					}
				}
				if n := l.Inflight(); n > 16 {
					t.Errorf("%d in flight, above the maximum limit", n)
				}
				switch rng.IntN(3) {
				case 0:
					p.Record()
				case 1:
					p.Drop()
				default:
					p.Release()
				}
			}
		}()
	}
	stop := make(chan struct{})
	stepped := make(chan struct{})
	go func() {
		defer close(stepped)
		for {
			select {
			case <-stop:
				return
			default:
				clk.Step(time.Millisecond)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-stepped
	assert.Equal(t, 0, l.Inflight())
	limit := l.Limit()
	assert.GreaterOrEqual(t, limit, backoff.DefaultMinLimit)
	assert.LessOrEqual(t, limit, 16)
}

// FuzzAdaptiveLimiter checks, for any limits and any sequence of
// operations and latencies, that the limit stays in range, at most the
// admitted number of calls are in flight, and ending every permit brings
// the count back to 0.
func FuzzAdaptiveLimiter(f *testing.F) {
	f.Add(1, 1000, 20, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(3, 3, 3, []byte{255, 0, 128, 7})
	f.Add(1, 2, 1, []byte{9, 9, 9, 9, 1, 1, 1, 1, 4, 4, 4})
	f.Fuzz(func(t *testing.T, lo, hi, initial int, ops []byte) {
		if lo < 1 || hi < lo || initial < 1 || hi > 1<<16 {
			t.Skip()
		}
		clk := testingclock.NewFakeClock(epoch)
		l := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithMinLimit(lo), backoff.WithMaxLimit(hi), backoff.WithInitialLimit(initial))
		var held []backoff.Permit
		for _, op := range ops {
			switch op % 5 {
			case 0, 1:
				if p, ok := l.TryAcquire(); ok {
					held = append(held, p)
				}
			case 2:
				clk.Step(time.Duration(op) * time.Millisecond)
			default:
				if len(held) == 0 {
					continue
				}
				i := int(op) % len(held)
				switch op % 5 {
				case 3:
					held[i].Record()
				default:
					held[i].Drop()
				}
				held = append(held[:i], held[i+1:]...)
			}
			if n := l.Limit(); n < lo || n > hi {
				t.Fatalf("limit %d outside [%d, %d]", n, lo, hi)
			}
			if l.Inflight() != len(held) || len(held) > hi {
				t.Fatalf("%d in flight, %d held, max %d", l.Inflight(), len(held), hi)
			}
		}
		for i := range held {
			held[i].Release()
		}
		if l.Inflight() != 0 {
			t.Fatalf("%d in flight after every permit ended", l.Inflight())
		}
	})
}

func BenchmarkAdaptiveLimiterPermit(b *testing.B) {
	l := backoff.NewAdaptiveLimiter(backoff.WithInitialLimit(1000))
	b.ReportAllocs()
	for range b.N {
		p, ok := l.TryAcquire()
		if !ok {
			b.Fatal("no permit")
		}
		p.Record()
	}
}

func BenchmarkAdaptiveLimiterPermitParallel(b *testing.B) {
	l := backoff.NewAdaptiveLimiter(backoff.WithInitialLimit(1000), backoff.WithMinLimit(1000))
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := l.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			p.Record()
		}
	})
}
