package backoff

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

var errBreakerTest = errors.New("down")

// TestBreakerProbesNeverExceedTheLimit: with many goroutines calling at
// once and the clock moving, a half-open breaker never has more than n
// probes out in one half-open period, and once every call is reported no
// probe place is held: the breaker half-opens and closes again.
func TestBreakerProbesNeverExceedTheLimit(t *testing.T) {
	t.Parallel()
	const probes = 3
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	b := NewBreaker(WithClock(clk), WithBreakerFailureRatio(0.2, 5), WithBreakerProbes(probes),
		WithBreakerOpenSchedule(Schedule{Duration: 10 * time.Millisecond}))
	var out sync.Map // generation → *atomic.Int64: its probes out
	var most, admitted atomic.Int64
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				if g == 0 && i%50 == 0 {
					clk.Step(10 * time.Millisecond)
				}
				p, err := b.Allow()
				if err != nil {
					continue
				}
				if p.probe {
					admitted.Add(1)
					v, _ := out.LoadOrStore(p.gen, new(atomic.Int64))
					n := v.(*atomic.Int64).Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					runtime.Gosched() // hold the probe a while
					v.(*atomic.Int64).Add(-1)
				}
				switch (g + i) % 4 {
				case 0:
					p.Done(context.Background(), errBreakerTest)
				case 1:
					p.Done(cancelled, context.Canceled)
				default:
					p.Done(context.Background(), nil)
				}
			}
		}()
	}
	wg.Wait()
	assert.Positive(t, admitted.Load(), "the breaker went half-open")
	assert.LessOrEqual(t, most.Load(), int64(probes), "probes out at once")
	b.mu.Lock()
	state, inFlight := BreakerState(b.word.Load()&3), b.inFlight
	b.mu.Unlock()
	if state == BreakerHalfOpen {
		assert.Zero(t, inFlight, "every probe was reported")
	}
	clk.Step(time.Minute)
	for range probes {
		p, err := b.Allow()
		require.NoError(t, err, "a probe place was leaked")
		p.Done(context.Background(), nil)
	}
	assert.Equal(t, BreakerClosed, b.State())
}

// FuzzBreakerInvariants drives a breaker of fuzzed parameters with a
// fuzzed sequence of calls, outcomes, held permits and clock steps, and
// checks after each step: changes of state are legal, in order, and agree
// with State; open times are never negative nor beyond their bound;
// refusals carry a positive wait while open and none only while probes
// are out; and the probes the breaker counts out are exactly the ones held.
func FuzzBreakerInvariants(f *testing.F) {
	f.Add(uint8(50), uint8(5), uint8(3), uint8(2), uint16(1000), uint16(100), uint8(32), uint16(400), uint8(10),
		[]byte{1, 1, 1, 1, 1, 4 | 8<<3, 5, 5, 5, 6, 7, 0, 2 | 31<<3, 4 | 31<<3, 5, 0, 6, 6})
	f.Add(uint8(1), uint8(1), uint8(0), uint8(1), uint16(0), uint16(0), uint8(0), uint16(0), uint8(0), []byte{1, 4 << 3, 0, 0, 3, 1})
	f.Add(uint8(99), uint8(49), uint8(7), uint8(4), uint16(65535), uint16(65535), uint8(255), uint16(65535), uint8(99),
		[]byte{5, 5, 5, 5, 7, 7, 7, 7, 4 | 31<<3, 5, 5, 6, 6, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, ratioPct, minReq, consecutive, probes uint8, windowMs, durMs uint16, factor16 uint8, capMs uint16, jitterPct uint8, ops []byte) {
		clk := testingclock.NewFakeClock(time.Unix(0, 0))
		s := Schedule{
			Duration: (time.Duration(durMs) + 1) * time.Millisecond,
			Factor:   float64(factor16) / 16,
			Cap:      time.Duration(capMs) * time.Millisecond,
			Jitter:   float64(jitterPct%100) / 100,
		}
		// The longest open time: the schedule's longest wait (its cap, or
		// what one trip per op reaches) fully jittered, or the longest hint.
		unjittered := s
		unjittered.Jitter = 0
		longest := unjittered.Delay(len(ops) + 1)
		longest = max(addDuration(longest, scaleDuration(longest, s.Jitter)), DefaultMaxRetryAfter)
		n := int(probes%5) + 1
		var b *Breaker
		var last = BreakerClosed
		b = NewBreaker(WithClock(clk), WithBreakerWindow((time.Duration(windowMs)+1)*time.Millisecond),
			WithBreakerFailureRatio(float64(ratioPct%100+1)/100, int(minReq%50)+1),
			WithBreakerConsecutiveFailures(int(consecutive%8)), WithBreakerProbes(n), WithBreakerOpenSchedule(s),
			WithBreakerStateChange(func(from, to BreakerState) {
				if from != last || !legalChange(from, to) {
					t.Fatalf("change %v → %v after %v", from, to, last)
				}
				last = to
				if to == BreakerOpen {
					open := time.Duration(b.openUntil.Load()) - b.now()
					if open < 0 || open > longest {
						t.Fatalf("open for %v, bound %v", open, longest)
					}
				}
			}))
		var held []BreakerPermit
		allow := func() (BreakerPermit, bool) {
			p, err := b.Allow()
			if err == nil {
				return p, true
			}
			if !errors.Is(err, ErrBreakerOpen) {
				t.Fatalf("refusal %v", err)
			}
			var ra *RetryAfterError
			switch {
			case errors.As(err, &ra):
				if ra.Delay <= 0 || ra.Delay > longest || last != BreakerOpen {
					t.Fatalf("refused in state %v with a wait of %v", last, ra.Delay)
				}
			case last != BreakerHalfOpen:
				t.Fatalf("refused without a wait in state %v", last)
			}
			return p, false
		}
		ctx := context.Background()
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		for _, op := range ops {
			arg := int(op >> 3)
			switch op & 7 {
			case 0, 1, 2, 3:
				p, ok := allow()
				if !ok {
					break
				}
				switch op & 7 {
				case 0:
					p.Done(ctx, nil)
				case 1:
					p.Done(ctx, errBreakerTest)
				case 2:
					p.Done(ctx, RetryAfter(time.Duration(arg)*100*time.Millisecond, errBreakerTest))
				case 3:
					p.Done(cancelled, context.Canceled)
				}
			case 4:
				clk.Step(time.Duration(arg) * 50 * time.Millisecond)
			case 5:
				if p, ok := allow(); ok && len(held) < 8 {
					held = append(held, p)
				} else if ok {
					p.Release()
				}
			case 6, 7:
				if len(held) == 0 {
					break
				}
				i := arg % len(held)
				p := held[i]
				held = append(held[:i], held[i+1:]...)
				if op&7 == 6 {
					p.Done(ctx, nil)
				} else {
					p.Done(ctx, errBreakerTest)
				}
			}
			if got := b.State(); got != last {
				t.Fatalf("State %v, last change to %v", got, last)
			}
			b.mu.Lock()
			w, inFlight := b.word.Load(), b.inFlight
			b.mu.Unlock()
			if BreakerState(w&3) == BreakerHalfOpen {
				out := 0
				for _, p := range held {
					if p.probe && p.gen == uint32(w>>2) {
						out++
					}
				}
				if inFlight != out || out > n {
					t.Fatalf("the breaker counts %d probes out, %d are held, limit %d", inFlight, out, n)
				}
			}
		}
	})
}

// legalChange reports whether a breaker may go from one state to the other.
func legalChange(from, to BreakerState) bool {
	switch from {
	case BreakerClosed:
		return to == BreakerOpen
	case BreakerOpen:
		return to == BreakerHalfOpen
	case BreakerHalfOpen:
		return to == BreakerOpen || to == BreakerClosed
	}
	return false
}
