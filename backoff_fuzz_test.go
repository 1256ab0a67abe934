package backoff_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// FuzzBackoffNext drives a Backoff with arbitrary parameters through a
// sequence of operations on a few ids while the fake clock jumps forward and
// backward. The constructor may panic only for the documented bad input;
// afterwards nothing panics, and every id's delay is 0 (no entry) or within
// [initial, max], its attempt count positive exactly when it has a delay.
func FuzzBackoffNext(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Minute), 0.0, []byte{0, 0, 0, 1, 0, 2, 0, 3, 4, 5})
	f.Add(int64(5*time.Second), int64(60*time.Second), 0.5, []byte{0, 8, 16, 1, 9, 0, 2, 6, 7})
	f.Add(int64(1), int64(math.MaxInt64), 1e300, []byte{0, 0, 0, 0, 1, 1, 2, 0})
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), 1.0, []byte{0, 1, 0, 2, 0, 3})
	f.Add(int64(0), int64(time.Minute), 0.0, []byte{0})
	f.Add(int64(time.Minute), int64(time.Second), 0.1, []byte{0})
	f.Add(int64(time.Second), int64(time.Minute), math.NaN(), []byte{0})
	f.Add(int64(time.Second), int64(time.Minute), math.Inf(1), []byte{0})
	f.Add(int64(time.Second), int64(-1), -1.0, []byte{0})
	f.Fuzz(func(t *testing.T, initialNs, maxNs int64, jitter float64, ops []byte) {
		initial, maxDelay := time.Duration(initialNs), time.Duration(maxNs)
		valid := initial > 0 && maxDelay >= initial && jitter >= 0 && !math.IsInf(jitter, 0) && !math.IsNaN(jitter)
		fc := testingclock.NewFakeClock(epoch)
		b, msg := construct(initial, maxDelay, jitter, backoff.WithClock(fc))
		if !valid {
			if !strings.HasPrefix(msg, "backoff: NewBackOffWithJitter: ") {
				t.Fatalf("NewBackOffWithJitter(%v, %v, %v): want a panic naming the function, got %q", initial, maxDelay, jitter, msg)
			}
			return
		}
		if msg != "" {
			t.Fatalf("NewBackOffWithJitter(%v, %v, %v) panicked: %s", initial, maxDelay, jitter, msg)
		}

		ids := [4]string{"a", "b", "c", "d"}
		// Clock steps scale with max, so that expiry (2×max) comes into play.
		unit := max(maxDelay/8, 1)
		for _, op := range ops {
			id := ids[op>>6]
			arg := time.Duration(op>>3&7) * unit
			now := fc.Now()
			switch op & 7 {
			case 0:
				b.Next(id, now)
			case 1:
				b.Next(id, now.Add(-arg)) // an event in the past
			case 2:
				fc.Step(arg)
			case 3:
				fc.SetTime(now.Add(-arg)) // the clock goes back
			case 4:
				_ = b.IsInBackOffSince(id, now.Add(-arg))
			case 5:
				_ = b.IsInBackOffSinceUpdate(id, now.Add(arg))
			case 6:
				b.GC()
			case 7:
				b.Reset(id)
			}
			for _, id := range ids {
				d, n := b.Get(id), b.Attempts(id)
				if d != 0 && (d < initial || d > maxDelay) {
					t.Fatalf("Get(%s) = %v, outside [%v, %v]", id, d, initial, maxDelay)
				}
				if (d == 0) != (n == 0) || n < 0 {
					t.Fatalf("Get(%s) = %v with Attempts = %d", id, d, n)
				}
			}
		}
	})
}

// construct calls NewBackOffWithJitter and returns its panic message, if any.
func construct(initial, maxDelay time.Duration, jitter float64, opts ...backoff.Option) (b *backoff.Backoff, msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	return backoff.NewBackOffWithJitter(initial, maxDelay, jitter, opts...), ""
}
