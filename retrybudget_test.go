package backoff_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// budgetOp is one step of a budget's history: a request, a retry asked for,
// or a move of the clock (possibly backwards).
type budgetOp struct {
	kind budgetOpKind
	step time.Duration // for budgetStep
}

type budgetOpKind uint8

const (
	budgetRequest budgetOpKind = iota
	budgetRetry
	budgetStep
)

// budgetEvent is a request or an allowed retry, at the time the budget saw it:
// the latest time it had read from its clock, since a clock that goes
// backwards leaves the budget where it was.
type budgetEvent struct {
	at    time.Time
	retry bool
}

// checkBudget plays ops on a new budget and checks, against an exact log of
// what it counted, the guarantee documented on RetryBudget, with t the latest
// time the budget has read from the clock (each of its calls reads it) and
// b = max(window/10, 1ns): every retry allowed at t keeps the retries of
// (t-window, t], itself included, within ratio·requests of (t-window, t] +
// floor; every refusal at t would break that bound with the requests of
// (t-window+2b, t] and the retries of (t-window-2b, t]; and, at the end,
// every window that starts just before an allowed retry holds at most ratio ×
// the requests of it and of the window before it, plus the floor. It also
// checks that Snapshot agrees with the decisions.
func checkBudget(t *testing.T, ratio, perSecond float64, window time.Duration, ops []budgetOp) {
	t.Helper()
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(ratio, perSecond, window, backoff.WithClock(fc))
	floor := perSecond * window.Seconds()
	slack := 2 * max(window/10, 1)
	latest := epoch
	var log []budgetEvent // in order of time: latest never goes back
	count := func(from, to time.Time) (requests, retries int) {
		first := sort.Search(len(log), func(i int) bool { return log[i].at.After(from) })
		for _, e := range log[first:] {
			if e.at.After(to) {
				break
			}
			if e.retry {
				retries++
			} else {
				requests++
			}
		}
		return requests, retries
	}
	refused := int64(0)
	// read is what a call of the budget does first: read the clock.
	read := func() {
		if now := fc.Now(); now.After(latest) {
			latest = now
		}
	}
	for i, op := range ops {
		if op.kind != budgetStep {
			read()
		}
		switch op.kind {
		case budgetRequest:
			b.RecordRequest()
			log = append(log, budgetEvent{at: latest})
		case budgetRetry:
			if b.TryRetry() {
				log = append(log, budgetEvent{at: latest, retry: true})
				requests, retries := count(latest.Add(-window), latest)
				if float64(retries) > ratio*float64(requests)+floor {
					t.Fatalf("op %d at %v: %d retries in the window, more than %v×%d requests + %v",
						i, latest.Sub(epoch), retries, ratio, requests, floor)
				}
			} else {
				refused++
				requests, _ := count(latest.Add(-window+slack), latest)
				_, retries := count(latest.Add(-window-slack), latest)
				if float64(retries+1) <= ratio*float64(requests)+floor {
					t.Fatalf("op %d at %v: refused with %d retries and %d requests in the window (ratio %v, floor %v)",
						i, latest.Sub(epoch), retries, requests, ratio, floor)
				}
			}
		case budgetStep:
			fc.Step(op.step)
		}
		// Snapshot takes back the retries the budget has set aside for the
		// next decisions (see leaseSize): checking it after every
		// op would hide what those do across ops and across window moves.
		if i%5 != 4 && i != len(ops)-1 {
			continue
		}
		read()
		s := b.Snapshot()
		if s.Refused != refused {
			t.Fatalf("op %d: Snapshot().Refused = %d, want %d", i, s.Refused, refused)
		}
		if got := s.Balance >= 1; got != (ratio*float64(s.Requests)+floor-float64(s.Retries) >= 1) {
			t.Fatalf("op %d: Snapshot %+v: Balance disagrees with its counts", i, s)
		}
	}
	for _, e := range log {
		if !e.retry {
			continue
		}
		start := e.at.Add(-1) // the window (start, start+window] begins with this retry
		_, retries := count(start, start.Add(window))
		requests, _ := count(start.Add(-window), start.Add(window))
		if float64(retries) > ratio*float64(requests)+floor {
			t.Fatalf("window from %v: %d retries, more than %v×%d requests of it and the window before + %v",
				e.at.Sub(epoch), retries, ratio, requests, floor)
		}
	}
}

// decodeBudgetOps turns fuzz bytes into ops: the low two bits of a byte pick
// the kind, and a step takes the next two bytes as a signed number of
// hundredths of the window.
func decodeBudgetOps(data []byte, window time.Duration) []budgetOp {
	var ops []budgetOp
	for len(data) > 0 {
		c := data[0]
		data = data[1:]
		switch c % 4 {
		case 0, 1:
			ops = append(ops, budgetOp{kind: budgetRequest})
		case 2:
			ops = append(ops, budgetOp{kind: budgetRetry})
		default:
			var n int16
			if len(data) >= 2 {
				n = int16(binary.LittleEndian.Uint16(data))
				data = data[2:]
			}
			ops = append(ops, budgetOp{kind: budgetStep, step: window / 100 * time.Duration(n)})
		}
	}
	return ops
}

// TestRetryBudgetWindowInvariant is the property test: random histories of
// requests, retries and clock steps (a tenth of them backwards), with random
// ratios, floors and windows.
func TestRetryBudgetWindowInvariant(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	rng := rand.New(rand.NewPCG(22, 1))
	runs := 60
	if longTests() {
		runs = 600 // the long mode (CI runs it without -race)
	}
	for run := 0; run < runs; run++ {
		ratio := []float64{0, 0.1, 0.5, 1, 3}[rng.IntN(5)]
		perSecond := []float64{0, 0.1, 1, 10}[rng.IntN(4)]
		window := []time.Duration{time.Second, 10 * time.Second, 7 * time.Millisecond, 19}[rng.IntN(4)]
		ops := make([]budgetOp, 400)
		for i := range ops {
			switch r := rng.IntN(10); {
			case r < 5:
				ops[i] = budgetOp{kind: budgetRequest}
			case r < 8:
				ops[i] = budgetOp{kind: budgetRetry}
			default:
				step := time.Duration(rng.Int64N(int64(window)/4 + 1))
				if rng.IntN(10) == 0 {
					step = -step * 4
				}
				ops[i] = budgetOp{kind: budgetStep, step: step}
			}
		}
		checkBudget(t, ratio, perSecond, window, ops)
	}
}

// FuzzRetryBudget checks the window invariant over fuzzed histories.
func FuzzRetryBudget(f *testing.F) {
	f.Add(uint8(10), uint8(0), int64(10*time.Second), []byte{0, 0, 0, 2, 2, 3, 10, 0, 2, 0, 2})
	f.Add(uint8(100), uint8(5), int64(time.Second), []byte{0, 2, 2, 2, 3, 0xff, 0xff, 2, 3, 200, 0, 2})
	f.Add(uint8(0), uint8(200), int64(19), []byte{2, 2, 3, 1, 0, 2, 3, 0, 0x80, 2})
	f.Fuzz(func(t *testing.T, ratioPct, perSecondTenths uint8, window int64, data []byte) {
		if window <= 0 || window > int64(time.Hour) || len(data) > 2000 {
			t.Skip()
		}
		checkBudget(t, float64(ratioPct)/100, float64(perSecondTenths)/10, time.Duration(window),
			decodeBudgetOps(data, time.Duration(window)))
	})
}

func TestRetryBudgetAllowsRatioOfRequestsPlusFloor(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0.1, 0.5, 10*time.Second, backoff.WithClock(fc))
	for range 100 {
		b.RecordRequest()
	}
	allowed := 0
	for b.TryRetry() {
		allowed++
	}
	assert.Equal(t, 15, allowed, "10% of 100 requests plus 0.5/s × 10 s")
	assert.False(t, b.TryRetry(), "a refusal spends nothing, and so does not make room")
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 100, Retries: 15, Refused: 2, Balance: 0}, b.Snapshot())

	fc.Step(5 * time.Second)
	assert.False(t, b.TryRetry(), "half a window later, the retries are still in it")
	fc.Step(6 * time.Second)
	s := b.Snapshot()
	assert.Equal(t, int64(0), s.Requests, "a window later, the requests have left it")
	assert.Equal(t, int64(0), s.Retries)
	assert.InDelta(t, 5.0, s.Balance, 1e-9, "only the floor is left")
}

// TestRetryBudgetBoundsTheWindowEndingAtEachRetry is the example of the
// RetryBudget doc: the bound holds for the window that ends at each retry,
// and a later window can hold the retries without the requests that paid for
// them.
func TestRetryBudgetBoundsTheWindowEndingAtEachRetry(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0.5, 0, 10*time.Second, backoff.WithClock(fc))
	for range 10 {
		b.RecordRequest()
	}
	fc.Step(9 * time.Second)
	for i := range 5 {
		require.True(t, b.TryRetry(), "retry %d: 10 requests in the window (-1 s, 9 s] pay for 5", i+1)
	}
	require.False(t, b.TryRetry(), "a sixth retry is beyond 0.5 × 10")
	fc.Step(6 * time.Second)
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 0, Retries: 5, Refused: 1, Balance: -5}, b.Snapshot(),
		"the window (5 s, 15 s] holds the 5 retries and none of the requests")
}

func TestRetryBudgetClockSteppedBackwards(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, time.Second, backoff.WithClock(fc))
	for range 10 {
		b.RecordRequest()
	}
	for range 10 {
		require.True(t, b.TryRetry())
	}
	fc.Step(2 * time.Second)
	require.False(t, b.TryRetry(), "the requests have left the window")
	fc.Step(-2 * time.Second)
	assert.False(t, b.TryRetry(), "stepping back does not bring the requests back")
	b.RecordRequest()
	fc.Step(-time.Hour) // before the budget was created
	assert.True(t, b.TryRetry(), "a request made while the clock was back counts once")
	assert.False(t, b.TryRetry())
	fc.Step(time.Hour + 500*time.Millisecond)
	assert.False(t, b.TryRetry(), "until the clock is back where it was, the window stays")
	fc.Step(2 * time.Second)
	assert.True(t, b.Snapshot().Balance == 0, "a window after, nothing is left: %+v", b.Snapshot())
}

func TestRetryBudgetConcurrentDecisionsAreExact(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0.1, 0, time.Minute, backoff.WithClock(fc))
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if (g+i)%2 == 0 {
					b.RecordRequest()
				} else if b.TryRetry() {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	s := b.Snapshot()
	assert.Equal(t, int64(2000), s.Requests)
	assert.Equal(t, allowed.Load(), s.Retries)
	assert.LessOrEqual(t, s.Retries, int64(200), "never more than 10%% of the requests")
	assert.Equal(t, int64(2000), s.Retries+s.Refused, "every retry asked for is either allowed or refused")
}

// budgetMetrics counts the calls of RetryBudgetMetrics.
type budgetMetrics struct{ requests, retries, refused int }

func (m *budgetMetrics) IncRequests() { m.requests++ }
func (m *budgetMetrics) IncRetries()  { m.retries++ }
func (m *budgetMetrics) IncRefused()  { m.refused++ }

func TestRetryBudgetMetrics(t *testing.T) {
	m := &budgetMetrics{}
	b := backoff.NewRetryBudget(0.5, 0, time.Second, backoff.WithClock(testingclock.NewFakeClock(epoch)),
		backoff.WithRetryBudgetMetrics(m))
	b.RecordRequest()
	b.RecordRequest()
	b.TryRetry()
	b.TryRetry()
	assert.Equal(t, budgetMetrics{requests: 2, retries: 1, refused: 1}, *m)
}

func TestNewRetryBudgetBadInput(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ratio     float64
		perSecond float64
		window    time.Duration
		want      string
	}{
		{"negative ratio", -0.1, 1, time.Second, "backoff: NewRetryBudget: ratio must be a finite number ≥ 0, got -0.1"},
		{"NaN ratio", math.NaN(), 1, time.Second, "backoff: NewRetryBudget: ratio must be a finite number ≥ 0, got NaN"},
		{"infinite ratio", math.Inf(1), 1, time.Second, "backoff: NewRetryBudget: ratio must be a finite number ≥ 0, got +Inf"},
		{"negative minPerSecond", 0.1, -1, time.Second, "backoff: NewRetryBudget: minPerSecond must be a finite number ≥ 0, got -1"},
		{"NaN minPerSecond", 0.1, math.NaN(), time.Second, "backoff: NewRetryBudget: minPerSecond must be a finite number ≥ 0, got NaN"},
		{"zero window", 0.1, 1, 0, "backoff: NewRetryBudget: window must be positive, got 0s"},
		{"negative window", 0.1, 1, -time.Second, "backoff: NewRetryBudget: window must be positive, got -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tc.want, func() { backoff.NewRetryBudget(tc.ratio, tc.perSecond, tc.window) })
		})
	}
	assert.PanicsWithValue(t, "backoff: WithRetryBudget: b must not be nil, got <nil>",
		func() { backoff.WithRetryBudget(nil) })
	assert.PanicsWithValue(t, "backoff: WithRetryBudgetMetrics: m must not be nil, got <nil>",
		func() { backoff.WithRetryBudgetMetrics(nil) })
}

// TestRetryBudgetRefusalEndsRetryAtOnce: a budget that allows no retry makes
// Retry return after the first attempt, without arming a timer for the hour
// its Schedule asks for, with an error that is both the budget's and fn's.
func TestRetryBudgetRefusalEndsRetryAtOnce(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0, 0, time.Minute, backoff.WithClock(fc))
	calls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Hour, Steps: 5},
		func(context.Context) error { calls++; return errFlaky },
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.Equal(t, 1, calls)
	assert.False(t, fc.HasWaiters(), "a refused retry is not waited for")
	assert.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted)
	assert.ErrorIs(t, err, errFlaky)
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, backoff.RetryError{Attempts: 1, Last: errFlaky, Reason: backoff.ErrRetryBudgetExhausted}, *re)
	assert.Equal(t, "backoff: retry stopped after 1 attempt: retry budget exhausted; last error: flaky", err.Error())
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 1, Refused: 1}, b.Snapshot())

	v, err := backoff.RetryValue(context.Background(), backoff.Schedule{Duration: time.Hour, Steps: 5},
		func(context.Context) (int, error) { return 7, errFlaky },
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.Zero(t, v)
	assert.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted)
	assert.ErrorIs(t, err, errFlaky)
}

// TestRetryBudgetDecidesAtTheSameTimeWithMaxElapsedTime: with
// WithMaxElapsedTime, Retry hands the budget the times it has just read (for
// the request and for the decision) instead of the budget reading the clock
// again; the outcome is the one the budget reaches on its own. The budget was
// created a window before Retry starts, so a request counted at the budget's
// creation would have left the window, and a decision at the time elapsed
// since Retry's start, rather than since the budget's creation, would still
// count the request.
func TestRetryBudgetDecidesAtTheSameTimeWithMaxElapsedTime(t *testing.T) {
	const window = 10 * time.Second
	for _, tc := range []struct {
		name    string
		step    time.Duration // what the first attempt takes
		allowed bool
	}{
		{"request still in the window", window * 95 / 100, true},
		{"request left the window", window * 105 / 100, false},
	} {
		for _, maxElapsed := range []time.Duration{0, time.Hour} {
			t.Run(fmt.Sprintf("%s/max-elapsed=%v", tc.name, maxElapsed), func(t *testing.T) {
				fc := testingclock.NewFakeClock(epoch)
				b := backoff.NewRetryBudget(1, 0, window, backoff.WithClock(fc))
				fc.Step(window)
				calls := 0
				opts := []backoff.Option{backoff.WithClock(fc), backoff.WithRetryBudget(b)}
				if maxElapsed > 0 {
					opts = append(opts, backoff.WithMaxElapsedTime(maxElapsed))
				}
				err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 2},
					func(context.Context) error {
						if calls++; calls == 1 {
							fc.Step(tc.step)
							return errFlaky
						}
						return nil
					}, opts...)
				if tc.allowed {
					require.NoError(t, err)
					assert.Equal(t, 2, calls)
					assert.Equal(t, int64(1), b.Snapshot().Retries)
				} else {
					require.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted)
					assert.Equal(t, 1, calls)
					assert.Equal(t, int64(1), b.Snapshot().Refused)
				}
			})
		}
	}
}

// TestRetryBudgetSuccessSpendsNoRetry: a first attempt that succeeds records
// a request and nothing else; retries that the budget allows go ahead.
func TestRetryBudgetRetryWithinBudget(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, time.Minute, backoff.WithClock(fc))
	require.NoError(t, backoff.Retry(context.Background(), backoff.Schedule{Steps: 5},
		func(context.Context) error { return nil }, backoff.WithClock(fc), backoff.WithRetryBudget(b)))
	calls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 5},
		func(context.Context) error {
			if calls++; calls < 3 {
				return errFlaky
			}
			return nil
		}, backoff.WithClock(fc), backoff.WithRetryBudget(b))
	require.NoError(t, err, "two requests pay for two retries")
	assert.Equal(t, 3, calls)
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 2, Retries: 2}, b.Snapshot())
}

func TestRetryBudgetOnError(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0, 0.1, 10*time.Second, backoff.WithClock(fc)) // a floor of one retry
	calls := 0
	err := backoff.OnError(backoff.Schedule{Steps: 5}, nil,
		func() error { calls++; return errFlaky }, backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.Equal(t, 2, calls, "the first call and the one retry of the floor")
	assert.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted)
	assert.ErrorIs(t, err, errFlaky)
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 2, re.Attempts)
}

// TestRetryBudgetSharedByRetryAndQueue: two Retry loops and a queue spend from
// one budget, in this order, with ratio 1 (one retry per request): the queue's
// hand-out and each Retry's first attempt are requests; the first loop's
// retries leave room for one more, which the second loop takes, and the
// queue's retry is refused, but not dropped.
func TestRetryBudgetSharedByRetryAndQueue(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, 10*time.Second, backoff.WithClock(fc))
	q := backoff.NewRateLimitingQueue[string](
		backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Minute),
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	defer q.ShutDown()
	q.Add("x")
	item, _ := get(t, q.Get, fc) // request 1

	failing := func(context.Context) error { return errFlaky }
	s := backoff.Schedule{Steps: 3}
	err := backoff.Retry(context.Background(), s, failing, backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted, "request 2 and retries 1 and 2")
	err = backoff.Retry(context.Background(), s, failing, backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted, "request 3 and retry 3; retry 4 refused")
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 2, re.Attempts)

	q.AddRateLimited(item) // refused: retry 4 does not fit either
	q.Done(item)
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 3, Retries: 3, Refused: 2}, b.Snapshot())
	at, ok := q.NextReadyAt()
	require.True(t, ok, "the refused item waits")
	// With no floor, only new requests can make room: the item comes back a
	// window later, plus up to one window.
	assert.False(t, at.Before(epoch.Add(10*time.Second)), "ready at %v", at.Sub(epoch))
	assert.True(t, at.Before(epoch.Add(20*time.Second)), "ready at %v", at.Sub(epoch))
	fc.SetTime(at)
	item, _ = get(t, q.Get, fc)
	assert.Equal(t, "x", item)
	q.Done(item)
}

// TestRetryBudgetQueueRefusedRetriesWaitWithinTheCap: with a budget that
// refuses every retry, failed items are requeued, each at its own time: when
// the budget would allow a retry plus a spread of up to one window, but
// never later than the limiter's cap; at ShutDownWithDrain none is lost.
func TestRetryBudgetQueueRefusedRetriesWaitWithinTheCap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limiter  backoff.RateLimiter[int]
		from, to time.Duration // the range of the ready times
	}{
		{"budget's time", backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Hour), 10 * time.Second, 20 * time.Second},
		{"limiter's cap", backoff.NewWithMaxWaitRateLimiter[int](backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Hour), 3*time.Second), 3 * time.Second, 3 * time.Second},
		{"limiter's delay", backoff.NewItemFastSlowRateLimiter[int](time.Minute, time.Minute, 1), time.Minute, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(epoch)
			b := backoff.NewRetryBudget(0, 0, 10*time.Second, backoff.WithClock(fc))
			q := backoff.NewRateLimitingQueue(tc.limiter, backoff.WithClock(fc), backoff.WithRetryBudget(b))
			const n = 100
			for i := range n {
				q.Add(i)
			}
			for range n {
				item, _ := q.Get()
				q.AddRateLimited(item)
				q.Done(item)
			}
			assert.Equal(t, int64(n), b.Snapshot().Refused)
			q.ShutDownWithDrain()
			waiting := q.TakeWaiting()
			require.Len(t, waiting, n, "no refused item is lost")
			distinct := map[time.Time]bool{}
			for _, w := range waiting {
				d := w.ReadyAt.Sub(epoch)
				assert.True(t, d >= tc.from && d <= tc.to, "ready after %v, want in [%v, %v]", d, tc.from, tc.to)
				distinct[w.ReadyAt] = true
			}
			if tc.from != tc.to {
				assert.Greater(t, len(distinct), n/2, "refused items come back at different times")
			}
		})
	}
}

// TestRetryBudgetQueueConverges runs workers over a queue whose items each
// fail three times, with a 10% budget: every item is processed to success,
// none by two workers at once, within the limiter's cap of each failure.
func TestRetryBudgetQueueConverges(t *testing.T) {
	t.Parallel()
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0.1, 0, 10*time.Second, backoff.WithClock(fc))
	adds := &addCounter{}
	limiter := backoff.NewItemExponentialFailureRateLimiter[int](10*time.Millisecond, 2*time.Second)
	q := backoff.NewRateLimitingQueue[int](limiter, backoff.WithClock(fc), backoff.WithRetryBudget(b), backoff.WithMetrics(adds))
	defer q.ShutDown() // a failed wait below ends the test: let the workers go
	const n, failures, workers = 200, 3, 4
	var mu sync.Mutex
	inFlight := map[int]bool{}
	attempts := map[int]int{}
	succeeded := 0
	settled := make(chan struct{}, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if inFlight[item] {
					t.Errorf("item %d handed out while in flight", item)
				}
				inFlight[item] = true
				attempts[item]++
				fail := attempts[item] <= failures
				if !fail {
					succeeded++
				}
				mu.Unlock()
				if fail {
					q.AddRateLimited(item)
				} else {
					q.Forget(item)
				}
				mu.Lock()
				delete(inFlight, item)
				mu.Unlock()
				q.Done(item)
				settled <- struct{}{}
			}
		}()
	}
	for i := range n {
		q.Add(i)
	}
	// Every item that became queued is handed out once and settled once:
	// when the settled count catches up with the adds, the workers are idle
	// and the clock can move to the next ready time.
	var stepped time.Time // the last time the clock was set to
	for done := int64(0); ; {
		for done < adds.adds.Load() {
			waitFor(t, fmt.Sprintf("a worker to settle item %d of %d queued so far", done+1, adds.adds.Load()), settled, fc)
			done++
		}
		at, ok := q.NextReadyAt()
		if done < adds.adds.Load() {
			continue // NextReadyAt queued items that were due: process them first
		}
		if !ok {
			break
		}
		// Every step queues at least the item due then; the same time twice
		// means it stayed waiting although due (and this loop would spin).
		require.False(t, at.Equal(stepped), "an item due at %v was not queued when the clock reached it", at.Sub(epoch))
		fc.SetTime(at)
		stepped = at
	}
	waitForCall(t, "ShutDownWithDrain to return", q.ShutDownWithDrain, fc)
	waitForCall(t, "the workers to return after the shutdown", wg.Wait, fc)
	assert.Equal(t, n, succeeded, "every item converges")
	for i := range n {
		assert.Equal(t, failures+1, attempts[i], "item %d", i)
	}
	s := b.Snapshot()
	assert.Positive(t, s.Refused, "the budget refused retries")
	assert.LessOrEqual(t, fc.Since(epoch), failures*2*time.Second, "no wait longer than the limiter's cap of 2 s")
	assert.Empty(t, q.TakeWaiting())
}

// addCounter is a QueueMetrics that counts the items that became queued.
type addCounter struct {
	backoff.NopQueueMetrics
	adds atomic.Int64
}

func (c *addCounter) IncAdds() { c.adds.Add(1) }

// TestRetryBudgetQueueRefusedRetryWaitsForTheBudget: a floor of one retry per
// window lets the first retry through; the second waits until the first has
// left the window (the budget counts retries over 11 buckets of 1 s), plus a
// spread of up to one window.
func TestRetryBudgetQueueRefusedRetryWaitsForTheBudget(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0, 0.1, 10*time.Second, backoff.WithClock(fc))
	q := backoff.NewRateLimitingQueue[string](
		backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Hour),
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	for range 2 {
		item, _ := q.Get()
		q.AddRateLimited(item)
		q.Done(item)
	}
	waiting := q.TakeWaiting()
	require.Len(t, waiting, 2)
	assert.Equal(t, epoch.Add(time.Millisecond), waiting[0].ReadyAt, "the allowed retry waits the limiter's delay")
	d := waiting[1].ReadyAt.Sub(epoch)
	assert.True(t, d >= 11*time.Second && d < 21*time.Second, "the refused retry waits %v", d)
}

// TestRetryBudgetWithPriorities: the priority forms of the queue use the
// budget as the plain ones do: an item handed out by GetWithPriority or
// GetContextWithPriority (RunWorkers' way) is a request, and a rate-limited
// AddWithOptions is a retry that the budget may refuse, whatever its
// priority.
func TestRetryBudgetWithPriorities(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, 10*time.Second, backoff.WithClock(fc))
	q := backoff.NewRateLimitingQueue[string](
		backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Minute),
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	defer q.ShutDown()

	q.AddWithOptions(backoff.AddOptions{Priority: 5}, "a", "b")
	a, prio, shutdown := q.GetWithPriority()
	require.False(t, shutdown)
	assert.Equal(t, 5, prio)
	bItem, _, err := q.GetContextWithPriority(context.Background())
	require.NoError(t, err)
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 2, Balance: 2}, b.Snapshot(), "two items handed out, two requests")

	q.AddWithOptions(backoff.AddOptions{RateLimited: true, Priority: 5}, a, bItem)
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, Priority: 5}, "c")
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 2, Retries: 2, Refused: 1}, b.Snapshot(),
		"two retries fit a ratio of 1 over two requests; the third is refused")
	q.Done(a)
	q.Done(bItem)
}

// The tests below are aimed at how a RetryBudget allows retries from
// parallel goroutines without a shared write per decision: it sets retries
// aside for the goroutines that are retrying (see leaseSize). Run
// them under -race.

// holdRetries starts n goroutines that each get one retry from b, so that
// each may hold retries set aside for its next ones, and wait. It returns
// once all have their retry; each then asks for one more retry when release
// is closed and sends the answer on the returned channel.
func holdRetries(t *testing.T, b *backoff.RetryBudget, n int, release <-chan struct{}) <-chan bool {
	t.Helper()
	answers := make(chan bool, n)
	var got sync.WaitGroup
	for range n {
		got.Add(1)
		go func() {
			allowed := b.TryRetry()
			got.Done()
			if !allowed {
				answers <- false // the caller's count of allowed retries fails
				return
			}
			<-release
			answers <- b.TryRetry()
		}()
	}
	got.Wait()
	return answers
}

// TestRetryBudgetRefusesOnlyWhenSpentWhileOthersHoldRetries: with retries set
// aside by idle goroutines, a refusal still comes only when the budget is
// really spent, and the idle goroutines then get nothing more.
func TestRetryBudgetRefusesOnlyWhenSpentWhileOthersHoldRetries(t *testing.T) {
	const holders, floor = 32, 1000
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0, floor/10, 10*time.Second, backoff.WithClock(fc))
	release := make(chan struct{})
	answers := holdRetries(t, b, holders, release)

	allowed := holders
	for b.TryRetry() {
		allowed++
		require.LessOrEqual(t, allowed, floor, "more retries than the floor allows")
	}
	assert.Equal(t, floor, allowed, "refused before the floor was spent")
	assert.Equal(t, backoff.RetryBudgetSnapshot{Retries: floor, Refused: 1, Balance: 0}, b.Snapshot())

	close(release)
	for range holders {
		assert.False(t, <-answers, "a retry beyond the floor, from what was set aside")
	}
	assert.Equal(t, int64(1+holders), b.Snapshot().Refused)
}

// TestRetryBudgetSetAsideRetriesEndWithTheirBucket: retries set aside in one
// bucket are not allowed in a later one, where the requests that paid for
// them have left the window.
func TestRetryBudgetSetAsideRetriesEndWithTheirBucket(t *testing.T) {
	const holders = 16
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, time.Second, backoff.WithClock(fc))
	for range 1000 {
		b.RecordRequest()
	}
	release := make(chan struct{})
	answers := holdRetries(t, b, holders, release)

	fc.Step(time.Second + time.Second/10) // the requests' bucket leaves the window
	close(release)
	for range holders {
		assert.False(t, <-answers, "a retry paid for by requests that left the window")
	}
	assert.Equal(t, backoff.RetryBudgetSnapshot{Refused: holders}, b.Snapshot())
}

// TestRetryBudgetSetAsideRetriesAreNotCountedAsMade: when the window moves
// on, the retries set aside and not used are not counted as retries made, in
// the bucket they were set aside in, while that bucket stays in the window.
func TestRetryBudgetSetAsideRetriesAreNotCountedAsMade(t *testing.T) {
	const holders, requests = 16, 1000
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, time.Second, backoff.WithClock(fc))
	for range requests {
		b.RecordRequest()
	}
	release := make(chan struct{})
	answers := holdRetries(t, b, holders, release)

	fc.Step(time.Second / 2) // a later bucket; the requests are still in the window
	allowed := holders
	for b.TryRetry() {
		allowed++
		require.LessOrEqual(t, allowed, requests, "more retries than the requests pay for")
	}
	assert.Equal(t, requests, allowed, "refused before the requests' retries were spent")
	close(release)
	for range holders {
		assert.False(t, <-answers, "a retry beyond the requests' retries, from what was set aside")
	}
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: requests, Retries: requests, Refused: 1 + holders},
		b.Snapshot())
}

// TestRetryBudgetParallelDecisionsKeepTheirCounts hammers one budget from
// goroutines that request, retry and read snapshots while the clock moves:
// every retry asked for is allowed or refused exactly once, and once the
// window has passed, nothing set aside is left counted.
func TestRetryBudgetParallelDecisionsKeepTheirCounts(t *testing.T) {
	t.Parallel()
	const goroutines, calls = 8, 3000
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0.5, 20, time.Second, backoff.WithClock(fc))
	var allowed, asked atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 22))
			for range calls {
				switch r := rng.IntN(100); {
				case r < 40:
					b.RecordRequest()
				case r < 97:
					asked.Add(1)
					if b.TryRetry() {
						allowed.Add(1)
					}
				case r < 99:
					b.Snapshot() // takes back what is set aside, while others use it
				default:
					fc.Step(time.Duration(rng.IntN(50)) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	s := b.Snapshot()
	assert.Equal(t, asked.Load()-allowed.Load(), s.Refused, "every refusal counted once")
	fc.Step(2 * time.Second)
	s = b.Snapshot()
	assert.Equal(t, int64(0), s.Retries, "retries left counted after the window passed: %+v", s)
	assert.Equal(t, int64(0), s.Requests)
	assert.Equal(t, asked.Load()-allowed.Load(), s.Refused)
}

// readCountingClock is a fake clock that counts the readings of its time
// (Now and Since) made through it.
type readCountingClock struct {
	*testingclock.FakeClock
	reads int
}

func (c *readCountingClock) Now() time.Time {
	c.reads++
	return c.FakeClock.Now()
}

func (c *readCountingClock) Since(t time.Time) time.Duration {
	c.reads++
	return c.FakeClock.Since(t)
}

// TestRetryBudgetOnRetrysClockIsNotReadAgain: with WithMaxElapsedTime and a
// budget on Retry's own clock, Retry reads the clock once at the start and
// once per retry decision, and hands those readings to the budget, which
// reads the clock no more (each attempt takes a second of the clock, so a
// budget that read it again would see another time than Retry's).
func TestRetryBudgetOnRetrysClockIsNotReadAgain(t *testing.T) {
	c := &readCountingClock{FakeClock: testingclock.NewFakeClock(epoch)}
	b := backoff.NewRetryBudget(0, 1, time.Minute, backoff.WithClock(c))
	c.reads = 0
	calls := 0
	var err error
	waitForCall(t, "Retry to return", func() {
		err = backoff.Retry(context.Background(), backoff.Schedule{Steps: 5},
			func(context.Context) error {
				c.Step(time.Second)
				if calls++; calls < 3 {
					return errFlaky
				}
				return nil
			}, backoff.WithClock(c), backoff.WithRetryBudget(b), backoff.WithMaxElapsedTime(time.Hour))
	}, c.FakeClock)
	require.NoError(t, err)
	assert.Equal(t, 3, calls)
	assert.Equal(t, 3, c.reads, "clock readings: Retry's start and one per retry, none by the budget")
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 1, Retries: 2, Balance: 58}, b.Snapshot())
}

// TestRetryBudgetWindowNotAMultipleOfItsBuckets: a window of 21 ns has
// buckets of 2 ns. The budget counts requests over the last 10 buckets and
// retries over 11, so that the retries of any 21 ns stay within what its
// requests pay for: 20 ns later, the retry at 0 still counts (10 buckets
// would have dropped it) and the request at 0 no longer does.
func TestRetryBudgetWindowNotAMultipleOfItsBuckets(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, 21*time.Nanosecond, backoff.WithClock(fc))
	b.RecordRequest()
	require.True(t, b.TryRetry(), "one request pays for one retry")
	fc.Step(20 * time.Nanosecond)
	b.RecordRequest()
	assert.False(t, b.TryRetry(), "the request at 20 ns pays for one retry, and the one at 0 is still counted")
}

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
		if err != nil && !(b.N > 1<<24 && n >= 1<<24) { // a saturated bucket refuses
			b.Fatal(err)
		}
	}
	newBudget := func(c clock.WithDelayedExecution) *backoff.RetryBudget {
		return backoff.NewRetryBudget(0.1, 1e12, 100*time.Millisecond, backoff.WithClock(c))
	}
	b.Run("none", func(b *testing.B) { run(b) })
	// The floor: one read of the real clock as the budget reads it, so that
	// budget/real-clock minus none can be set against it in the same run.
	b.Run("clock-read", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		var d time.Duration
		for i := 0; i < b.N; i++ {
			d += time.Since(start)
		}
		if d < 0 {
			b.Fatal("the clock went back")
		}
	})
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
