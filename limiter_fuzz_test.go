package backoff_test

import (
	"math"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// bucketModel is the reference for FuzzLimiter: a token bucket written as
// plainly as possible, in time.Time, with the arithmetic x/time/rate uses and
// a latest instant that never moves back.
type bucketModel struct {
	limit, tokens float64
	burst         int
	last          time.Time
}

func (m *bucketModel) advance(now time.Time) float64 {
	tokens := m.tokens
	if now.After(m.last) {
		tokens += now.Sub(m.last).Seconds() * m.limit
	}
	return math.Min(tokens, float64(m.burst))
}

func (m *bucketModel) settle(now time.Time) {
	m.tokens = m.advance(now)
	if now.After(m.last) {
		m.last = now
	}
}

// reserve returns the wait for n tokens at now and takes them if the wait
// is at most maxWait.
func (m *bucketModel) reserve(now time.Time, n int, maxWait time.Duration) (time.Duration, bool) {
	if m.limit == backoff.InfLimit {
		return 0, true
	}
	left := m.advance(now) - float64(n)
	var wait time.Duration
	if left < 0 {
		if m.limit == 0 {
			wait = math.MaxInt64
		} else if w := -left / m.limit * 1e9; w >= math.MaxInt64 {
			wait = math.MaxInt64
		} else {
			wait = time.Duration(w)
		}
	}
	if n > m.burst || wait > maxWait {
		return wait, false
	}
	m.tokens = left
	if now.After(m.last) {
		m.last = now
	}
	return wait, true
}

// FuzzLimiter runs a random sequence of clock steps (forward and back),
// AllowN, ReserveN, SetLimit and SetBurst on a Limiter and on bucketModel,
// and requires the same answers; and, for Allow alone, that what was
// admitted never exceeds burst + rate × the time the clock advanced past
// its latest instant (no interval is earned twice).
func FuzzLimiter(f *testing.F) {
	f.Add([]byte{2, 2, 2, 2, 0, 10, 2, 3, 1, 40, 2, 2, 0, 90, 3, 3})
	f.Add([]byte{4, 0, 2, 2, 5, 9, 0, 255, 2, 2, 2, 3, 1, 1, 1, 200, 0, 7})
	f.Add([]byte{0, 1, 2, 1, 2, 1, 2, 1, 1, 3, 0, 3, 2, 1})
	limits := []float64{0, 0.5, 3, 7.3, 10, 1000, backoff.InfLimit}
	f.Fuzz(func(t *testing.T, ops []byte) {
		clk := clocktesting.NewFakeClock(epoch)
		l := backoff.NewLimiter(10, 3, backoff.WithClock(clk))
		m := &bucketModel{limit: 10, burst: 3, tokens: 3, last: epoch}
		// Admission bound, checked while the limit and burst are the
		// initial ones and only Allow takes tokens.
		bounded, admitted, highWater := true, 0, epoch
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, int(ops[i+1])
			now := clk.Now()
			switch op {
			case 0:
				clk.Step(time.Duration(arg) * 7 * time.Millisecond)
			case 1:
				clk.Step(-time.Duration(arg) * 5 * time.Millisecond)
			case 2:
				n := arg % 5
				_, want := m.reserve(now, n, 0)
				if got := l.AllowN(n); got != want {
					t.Fatalf("op %d: AllowN(%d) = %v, model %v", i/2, n, got, want)
				}
				if want {
					admitted += n
				}
			case 3:
				n := arg % 5
				wait, ok := m.reserve(now, n, math.MaxInt64)
				r := l.ReserveN(n)
				if r.OK() != ok || (ok && r.Delay() != wait) {
					t.Fatalf("op %d: ReserveN(%d) = %v %v, model %v %v", i/2, n, r.OK(), r.Delay(), ok, wait)
				}
				bounded = false
			case 4:
				lim := limits[arg%len(limits)]
				m.settle(now)
				m.limit = lim
				l.SetLimit(lim)
				bounded = false
			case 5:
				b := arg % 6
				m.settle(now)
				m.burst = b
				l.SetBurst(b)
				bounded = false
			}
			if clk.Now().After(highWater) {
				highWater = clk.Now()
			}
			if bounded {
				limit := 10 * highWater.Sub(epoch).Seconds()
				if float64(admitted) > 3+limit+1e-9 {
					t.Fatalf("op %d: admitted %d > burst 3 + %v earned", i/2, admitted, limit)
				}
			}
		}
		if got, want := l.Tokens(), m.advance(clk.Now()); got != want && m.limit != backoff.InfLimit {
			t.Fatalf("Tokens = %v, model %v", got, want)
		}
	})
}
