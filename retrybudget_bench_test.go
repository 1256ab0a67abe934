package backoff_test

import (
	"context"
	"math"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/retrykit/backoff"
)

// budgetBenchClocks are the clocks of the budget benchmarks: the real one,
// and one that always shows the same time and reads it for free, which
// isolates the budget's own cost from the cost of reading the clock
// (time.Since), which varies widely between machines and virtual machines.
var budgetBenchClocks = []struct {
	name  string
	clock clock.WithDelayedExecution
}{
	{"real-clock", clock.RealClock{}},
	{"fixed-clock", stoppedClock{retryBenchClock{now: epoch}}},
}

// stoppedClock is a clock that never moves: Since returns 0 without any
// arithmetic, which is right for the one time a budget asks about, the time
// it was created.
type stoppedClock struct{ retryBenchClock }

func (stoppedClock) Since(time.Time) time.Duration { return 0 }

// BenchmarkRetryBudgetAttempt is BenchmarkRetryAttempt's zero-wait case with
// and without a budget: the difference is what the budget adds to each
// attempt. The budget's floor allows every retry, and its window is short so
// that no bucket saturates on the real clock.
func BenchmarkRetryBudgetAttempt(b *testing.B) {
	run := func(b *testing.B, opts ...backoff.Option) {
		b.ReportAllocs()
		n := 0
		// Steps without Duration: unlimited attempts, no wait (a Schedule with
		// neither means DefaultRetry to Retry).
		err := backoff.Retry(context.Background(), backoff.Schedule{Steps: math.MaxInt}, func(context.Context) error {
			n++
			if n < b.N {
				return errFlaky
			}
			return nil
		}, opts...)
		if err != nil && !(b.N > 1<<24 && n > 1<<24) { // a saturated bucket refuses
			b.Fatal(err)
		}
	}
	newBudget := func(c clock.WithDelayedExecution) *backoff.RetryBudget {
		return backoff.NewRetryBudget(0.1, 1e12, 100*time.Millisecond, backoff.WithClock(c))
	}
	b.Run("none", func(b *testing.B) { run(b) })
	for _, c := range budgetBenchClocks {
		b.Run("budget/"+c.name, func(b *testing.B) {
			run(b, backoff.WithRetryBudget(newBudget(c.clock)))
		})
	}
	// With WithMaxElapsedTime, Retry reads the clock before each retry
	// anyway, and the budget decides at that reading.
	maxElapsed := backoff.WithMaxElapsedTime(time.Hour)
	b.Run("max-elapsed/none", func(b *testing.B) { run(b, maxElapsed) })
	b.Run("max-elapsed/budget/real-clock", func(b *testing.B) {
		run(b, maxElapsed, backoff.WithRetryBudget(newBudget(clock.RealClock{})))
	})
}

// BenchmarkRetryBudgetDecision measures one decision of a budget shared by
// parallel goroutines (run it with -cpu 2): TryRetry when the floor allows
// every retry, TryRetry when the budget refuses every one, RecordRequest, and
// a mix of nine requests to one retry at a ratio of 0.1. On the fixed clock a
// bucket saturates after 16,777,215 retries, and later ones are refused.
func BenchmarkRetryBudgetDecision(b *testing.B) {
	for _, c := range budgetBenchClocks {
		for _, d := range []struct {
			name         string
			ratio, floor float64
			requestEvery int // 1 in requestEvery calls is a retry, the others are requests; 0: only retries
			onlyRequests bool
		}{
			{name: "allowed", ratio: 0.1, floor: 1e12},
			{name: "refused"},
			{name: "request", ratio: 0.1, onlyRequests: true},
			{name: "mixed", ratio: 0.1, floor: 10, requestEvery: 10},
		} {
			b.Run(c.name+"/"+d.name, func(b *testing.B) {
				budget := backoff.NewRetryBudget(d.ratio, d.floor, 100*time.Millisecond, backoff.WithClock(c.clock))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for i := 1; pb.Next(); i++ {
						if d.onlyRequests || (d.requestEvery > 0 && i%d.requestEvery != 0) {
							budget.RecordRequest()
						} else {
							budget.TryRetry()
						}
					}
				})
			})
		}
	}
}
