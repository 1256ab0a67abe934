package bench

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// retryGuard is what a benchmark asks before each retry: our RetryBudget, or
// the counter a user would write without it.
type retryGuard interface {
	RecordRequest()
	TryRetry() bool
}

// mutexWindowBudget is the retry budget a user would write without ours:
// requests and retries counted in a ring of 10 buckets behind one mutex, the
// clock read with time.Now (now, so that a test can use a fake clock), a
// retry allowed while the retries of the 10
// buckets stay within ratio·requests + floor. It has the same window and
// precision as ours (a tenth of the window) and is exact under concurrency
// because the mutex makes decide-and-count one step.
type mutexWindowBudget struct {
	ratio, floor float64
	width        time.Duration
	now          func() time.Time
	origin       time.Time

	mu                sync.Mutex
	head              int64 // the bucket of the latest time seen
	requests, retries [10]int64
}

func newMutexWindowBudget(ratio, perSecond float64, window time.Duration, now func() time.Time) *mutexWindowBudget {
	return &mutexWindowBudget{
		ratio:  ratio,
		floor:  perSecond * window.Seconds(),
		width:  window / 10,
		now:    now,
		origin: now(),
	}
}

// advanceLocked moves the ring to the bucket of now, emptying the buckets it
// passes; a clock that went backwards stays in the head bucket.
func (m *mutexWindowBudget) advanceLocked(now time.Time) int {
	k := int64(now.Sub(m.origin) / m.width)
	for j := max(m.head+1, k-9); j <= k; j++ {
		m.requests[j%10], m.retries[j%10] = 0, 0
	}
	m.head = max(m.head, k)
	return int(m.head % 10)
}

func (m *mutexWindowBudget) RecordRequest() {
	now := m.now()
	m.mu.Lock()
	m.requests[m.advanceLocked(now)]++
	m.mu.Unlock()
}

func (m *mutexWindowBudget) TryRetry() bool {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.advanceLocked(now)
	var requests, retries int64
	for j := range m.requests {
		requests += m.requests[j]
		retries += m.retries[j]
	}
	if float64(retries+1) > m.ratio*float64(requests)+m.floor {
		return false
	}
	m.retries[i]++
	return true
}

// budgetGuards are the guards of BenchmarkRetryBudget, each new one allowing
// every retry (a floor far above any rate) over a 100 ms window.
var budgetGuards = []struct {
	name string
	make func() retryGuard
}{
	{"budget", func() retryGuard { return backoff.NewRetryBudget(0.1, 1e12, 100*time.Millisecond) }},
	{"mutex-window", func() retryGuard { return newMutexWindowBudget(0.1, 1e12, 100*time.Millisecond, time.Now) }},
}

// BenchmarkRetryBudget measures what a retry budget adds, on the real clock,
// against what a user would write without ours (mutexWindowBudget). Every row
// is impl=ours, which is how run.sh selects this library's rows: the rows
// differ by what guards the retries (guard=none, guard=budget,
// guard=mutex-window), in the same run.
//   - op=attempt: one op is one attempt of a Retry call that makes b.N of
//     them, all but the last failing, with no wait, so that what Retry pays
//     once per call (BenchmarkRetry shows the per-call cost) is spread over
//     the attempts and the row shows the cost of an attempt alone; set
//     guard=budget minus guard=none against BenchmarkFloor's op=since, run
//     together. guard=budget passes the budget with
//     WithRetryBudget; guard=mutex-window records the request in the first
//     attempt and asks before each retry from WithRetryable, as a user would
//     plug a counter of their own into Retry. max-elapsed=1h adds
//     WithMaxElapsedTime, with which Retry reads the clock before each retry
//     anyway.
//   - op=decide/mode=parallel: TryRetry from GOMAXPROCS goroutines sharing
//     one guard (b.RunParallel): the cost of one decision, of which the
//     clock read is most (see BenchmarkFloor's op=since).
func BenchmarkRetryBudget(b *testing.B) {
	b.Run("impl=ours", func(b *testing.B) {
		for _, maxElapsed := range []time.Duration{0, time.Hour} {
			prefix := "op=attempt/"
			if maxElapsed > 0 {
				prefix += "max-elapsed=1h/"
			}
			b.Run(prefix+"guard=none", func(b *testing.B) {
				benchmarkGuardedRetry(b, nil, maxElapsed)
			})
			for _, g := range budgetGuards {
				b.Run(prefix+"guard="+g.name, func(b *testing.B) {
					benchmarkGuardedRetry(b, g.make(), maxElapsed)
				})
			}
		}
		for _, g := range budgetGuards {
			b.Run("op=decide/mode=parallel/guard="+g.name, func(b *testing.B) {
				guard := g.make()
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if !guard.TryRetry() {
							b.Error("refused a retry the floor allows")
							return
						}
					}
				})
			})
		}
	})
}

// benchmarkGuardedRetry runs one Retry call of b.N attempts, all but the
// last failing, with no wait, guarded by guard (nil: none).
func benchmarkGuardedRetry(b *testing.B, guard retryGuard, maxElapsed time.Duration) {
	b.ReportAllocs()
	attempts := 0
	fn := func(context.Context) error {
		if attempts++; attempts < b.N {
			return errAttempt
		}
		return nil
	}
	var opts []backoff.Option
	if maxElapsed > 0 {
		opts = append(opts, backoff.WithMaxElapsedTime(maxElapsed))
	}
	switch g := guard.(type) {
	case nil:
	case *backoff.RetryBudget:
		opts = append(opts, backoff.WithRetryBudget(g))
	default:
		inner := fn
		fn = func(ctx context.Context) error {
			if attempts == 0 {
				g.RecordRequest()
			}
			return inner(ctx)
		}
		opts = append(opts, backoff.WithRetryable(func(error) bool { return g.TryRetry() }))
	}
	// Steps without Duration: unlimited attempts, no wait.
	if err := backoff.Retry(context.Background(), backoff.Schedule{Steps: math.MaxInt}, fn, opts...); err != nil {
		b.Fatal(err)
	}
	if attempts != b.N {
		b.Fatalf("%d attempts, want %d", attempts, b.N)
	}
}

// TestBudgetGuardsAgree checks that the hand-written budget decides as ours
// does: with ratio 0.5 and no floor, 4 requests pay for 2 retries, and a
// window later they pay for none.
func TestBudgetGuardsAgree(t *testing.T) {
	const window = 10 * time.Second
	fc := testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	guards := []retryGuard{
		backoff.NewRetryBudget(0.5, 0, window, backoff.WithClock(fc)),
		newMutexWindowBudget(0.5, 0, window, fc.Now),
	}
	for _, g := range guards {
		for range 4 {
			g.RecordRequest()
		}
	}
	for _, g := range guards {
		for i, want := range []bool{true, true, false} {
			if got := g.TryRetry(); got != want {
				t.Fatalf("%T: retry %d allowed = %v, want %v", g, i+1, got, want)
			}
		}
	}
	fc.Step(window + window/10)
	for _, g := range guards {
		g.RecordRequest()
		if g.TryRetry() {
			t.Fatalf("%T: a retry allowed by requests that left the window", g)
		}
	}
}
