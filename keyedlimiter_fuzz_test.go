package backoff_test

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// FuzzKeyedLimiter runs a random sequence of forward clock steps, AllowN,
// Reserve (cancelled at once or not), SetKeyLimit and ClearKeyLimit (which
// give a full bucket a full bucket under the new burst), and floods
// of new keys on a KeyedLimiter, and on one Limiter per key, and requires
// the same answers: dropping a refilled key, growing and rebuilding the
// table never changes what a key is told. (The clock only moves forward
// here: a key dropped while full forgets its latest instant, so after a
// backward step it may earn again an interval its Limiter would not.)
func FuzzKeyedLimiter(f *testing.F) {
	f.Add([]byte{0, 3, 0, 3, 0, 3, 5, 40, 1, 3, 0, 200, 0, 3, 2, 9, 5, 40, 0, 3})
	f.Add([]byte{3, 1, 0, 1, 1, 2, 2, 1, 4, 1, 0, 1, 5, 255, 1, 90, 0, 1, 3, 70})
	f.Add([]byte{5, 100, 5, 100, 1, 0, 5, 100, 0, 7, 2, 7, 1, 255, 0, 7})
	limits := []float64{0, 0.5, 3, 7.3, 10, 1000, backoff.InfLimit}
	f.Fuzz(func(t *testing.T, ops []byte) {
		clk := clocktesting.NewFakeClock(epoch)
		k := backoff.NewKeyedLimiter[int](10, 3, backoff.WithClock(clk))
		model := map[int]*backoff.Limiter{}
		of := func(key int) *backoff.Limiter {
			l, ok := model[key]
			if !ok {
				l = backoff.NewLimiter(10, 3, backoff.WithClock(clk))
				model[key] = l
			}
			return l
		}
		fresh := 1000 // the next key a flood adds
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, int(ops[i+1])
			key := arg % 16
			switch op {
			case 0:
				n := arg / 16 % 5
				if got, want := k.AllowN(key, n), of(key).AllowN(n); got != want {
					t.Fatalf("op %d: AllowN(%d, %d) = %v, Limiter %v", i/2, key, n, got, want)
				}
			case 1:
				clk.Step(time.Duration(arg) * 3 * time.Millisecond)
			case 2, 3:
				rk, rl := k.Reserve(key), of(key).Reserve()
				if rk.OK() != rl.OK() || rk.Delay() != rl.Delay() {
					t.Fatalf("op %d: Reserve(%d) = %v %v, Limiter %v %v", i/2, key, rk.OK(), rk.Delay(), rl.OK(), rl.Delay())
				}
				if op == 3 {
					rk.Cancel()
					rl.Cancel()
				}
			case 4:
				lim, burst := limits[arg/16%len(limits)], arg/16%5
				if arg&0x80 != 0 {
					k.ClearKeyLimit(key)
					lim, burst = 10, 3
				} else {
					k.SetKeyLimit(key, lim, burst)
				}
				if l := of(key); l.Tokens() >= float64(l.Burst()) {
					// A full bucket starts full under its new burst.
					model[key] = backoff.NewLimiter(lim, burst, backoff.WithClock(clk))
				} else {
					l.SetLimit(lim)
					l.SetBurst(burst)
				}
			case 5:
				// New keys, each taking a token: the table grows, and
				// drops the refilled keys when it does.
				for range arg % 64 {
					if !k.Allow(fresh) || !of(fresh).Allow() {
						t.Fatalf("op %d: a new key %d is refused", i/2, fresh)
					}
					fresh++
				}
			}
		}
		for key, l := range model {
			if got, want := k.AllowN(key, 1), l.AllowN(1); got != want {
				t.Fatalf("at the end: AllowN(%d, 1) = %v, Limiter %v", key, got, want)
			}
		}
	})
}
