package backoff_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
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
		// next decisions (see retrybudget_lease.go): checking it after every
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
	rng := rand.New(rand.NewPCG(22, 1))
	for run := 0; run < 150; run++ {
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
	assert.PanicsWithValue(t, "backoff: WithRetryBudget: budget must not be nil, got <nil>",
		func() { backoff.WithRetryBudget(nil) })
	assert.PanicsWithValue(t, "backoff: WithRetryBudgetMetrics: metrics must not be nil, got <nil>",
		func() { backoff.WithRetryBudgetMetrics(nil) })
}
