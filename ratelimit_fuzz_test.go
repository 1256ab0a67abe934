package backoff_test

import (
	"encoding/binary"
	"math"
	"math/big"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// abs64 maps any int64 to a non-negative one (MinInt64 to MaxInt64).
func abs64(v int64) int64 {
	if v < 0 {
		return -(v + 1)
	}
	return v
}

// FuzzItemExponential checks, for any base and cap and up to 5,000 failures,
// that every delay is exactly min(base·2^n, max) computed in big integers
// (so in [0, max] and non-decreasing), and with jitter that it stays within
// [that, min(that·(1+f), max)].
func FuzzItemExponential(f *testing.F) {
	f.Add(int64(5*time.Millisecond), int64(1000*time.Second), uint16(25), uint8(0))
	f.Add(int64(math.MaxInt64/4), int64(math.MaxInt64), uint16(5), uint8(0))
	f.Add(int64(math.MaxInt64-1), int64(math.MaxInt64), uint16(3), uint8(100))
	f.Add(int64(1), int64(math.MaxInt64), uint16(4000), uint8(50))
	f.Add(int64(0), int64(0), uint16(10), uint8(255))
	f.Add(int64(3), int64(time.Hour), uint16(70), uint8(1))
	f.Fuzz(func(t *testing.T, a, b int64, failures uint16, jitter uint8) {
		// The constructor rejects a base of 0 (a hot requeue loop).
		base, maxDelay := time.Duration(max(min(abs64(a), abs64(b)), 1)), time.Duration(max(abs64(a), abs64(b), 1))
		n := int(failures % 5000)
		factor := float64(jitter) / 64 // 0 to about 4
		plain := backoff.NewItemExponentialFailureRateLimiter[int](base, maxDelay)
		jittered := backoff.NewItemExponentialFailureRateLimiter[int](base, maxDelay, backoff.WithRequeueJitter(factor))
		bigMax := big.NewInt(int64(maxDelay))
		want := new(big.Int)
		prev := time.Duration(0)
		for i := range n {
			want.Lsh(big.NewInt(int64(base)), uint(i))
			if want.Cmp(bigMax) > 0 {
				want.Set(bigMax)
			}
			d := plain.When(0)
			if int64(d) != want.Int64() || d < prev {
				t.Fatalf("base %v max %v failure %d: got %v, want %v (previous %v)", base, maxDelay, i, d, want, prev)
			}
			prev = d
			j := jittered.When(0)
			// The jitter is at most factor·d; the slack covers float64 rounding.
			if j < d || j > maxDelay || float64(j-d) > float64(d)*factor*(1+1e-9)+1 {
				t.Fatalf("base %v max %v failure %d factor %v: jittered %v outside [%v, min(%v·(1+f), max)]",
					base, maxDelay, i, factor, j, d, d)
			}
		}
		if plain.NumRequeues(0) != n {
			t.Fatalf("NumRequeues %d, want %d", plain.NumRequeues(0), n)
		}
	})
}

// FuzzBucket drives a bucket with any limit and burst through a sequence of
// calls and clock steps, forwards and backwards, and checks that it never
// panics on a valid configuration, never returns a negative delay, never
// shortens the delay between two calls at one instant, and returns 0 at once
// when unlimited.
func FuzzBucket(f *testing.F) {
	step := func(ds ...int64) []byte {
		var out []byte
		for _, d := range ds {
			out = binary.LittleEndian.AppendUint64(out, uint64(d))
		}
		return out
	}
	f.Add(10.0, 100, uint8(150), step(0, int64(time.Second), -int64(time.Hour), int64(time.Hour)))
	f.Add(3.0, 2, uint8(3), step(1, 333333333, 0, -1, 7))
	f.Add(1e-300, 1, uint8(4), step(math.MaxInt64, math.MinInt64))
	f.Add(math.MaxFloat64, 1, uint8(2), step(math.MaxInt64, math.MaxInt64, 1))
	f.Add(math.Inf(1), 1, uint8(10), step(5))
	f.Add(0.001, math.MaxInt, uint8(1), step(1, 2, 3))
	f.Fuzz(func(t *testing.T, limit float64, burst int, callsPerStep uint8, steps []byte) {
		if !(limit > 0) || burst < 1 {
			defer func() {
				if recover() == nil {
					t.Fatalf("limit %v burst %d: want a panic", limit, burst)
				}
			}()
			backoff.NewBucketRateLimiter[int](limit, burst)
			return
		}
		clk := clocktesting.NewFakeClock(epoch)
		l := backoff.NewBucketRateLimiter[int](limit, burst, backoff.WithClock(clk))
		calls := int(callsPerStep)%64 + 1
		for len(steps) > 0 {
			var s int64
			if len(steps) >= 8 {
				s = int64(binary.LittleEndian.Uint64(steps))
				steps = steps[8:]
			} else {
				s, steps = int64(steps[0]), nil
			}
			clk.SetTime(clk.Now().Add(time.Duration(s)))
			prev := time.Duration(-1)
			for range calls {
				d := l.When(0)
				if d < 0 || d < prev {
					t.Fatalf("limit %v burst %d step %v: delay %v after %v", limit, burst, time.Duration(s), d, prev)
				}
				if math.IsInf(limit, 1) && d != 0 {
					t.Fatalf("unlimited bucket waited %v", d)
				}
				prev = d
			}
		}
	})
}
