package backoff

import (
	"flag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAddDuration(t *testing.T) {
	tests := []struct {
		name string
		a, b time.Duration
		want time.Duration
	}{
		{"small", time.Second, 2 * time.Second, 3 * time.Second},
		{"negative is zero", -time.Second, time.Second, time.Second},
		{"saturates", maxDuration - 1, 2, maxDuration},
		{"max plus max", maxDuration, maxDuration, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, addDuration(tt.a, tt.b))
		})
	}
}

func TestShiftDuration(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		n    int
		want time.Duration
	}{
		{"5ms·2^17 exact", 5 * time.Millisecond, 17, 655360 * time.Millisecond},
		{"zero shift", time.Second, 0, time.Second},
		{"negative shift", time.Second, -3, time.Second},
		{"zero base", 0, 10, 0},
		{"zero base, shift past the width", 0, 63, 0},
		{"negative base", -time.Second, 1, 0},
		{"largest that fits", 1, 62, 1 << 62},
		{"one past fits", 1, 63, maxDuration},
		{"huge shift", 1, 1 << 30, maxDuration},
		{"quarter of max, third step", maxDuration / 4, 2, maxDuration - 3},
		{"quarter of max overflows", maxDuration/4 + 1, 2, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, shiftDuration(tt.d, tt.n))
		})
	}
}

func TestScaleDuration(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		f    float64
		want time.Duration
	}{
		{"double", time.Second, 2, 2 * time.Second},
		{"fraction", time.Second, 0.5, 500 * time.Millisecond},
		{"zero factor", time.Second, 0, 0},
		{"negative factor", time.Second, -1, 0},
		{"NaN factor", time.Second, math.NaN(), 0},
		{"Inf factor", time.Second, math.Inf(1), maxDuration},
		{"negative duration", -time.Second, 2, 0},
		{"saturates", maxDuration / 2, 3, maxDuration},
		{"max times one", maxDuration, 1, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, scaleDuration(tt.d, tt.f))
		})
	}
}

func TestClampDuration(t *testing.T) {
	assert.Equal(t, time.Duration(0), clampDuration(-time.Second, time.Minute))
	assert.Equal(t, time.Minute, clampDuration(time.Hour, time.Minute))
	assert.Equal(t, time.Hour, clampDuration(time.Hour, 0), "limit 0 means no limit")
	assert.Equal(t, time.Second, clampDuration(time.Second, time.Minute))
}

func TestRandDuration(t *testing.T) {
	for _, n := range []time.Duration{0, -time.Second, math.MinInt64} {
		assert.Zero(t, randDuration(n), "randDuration(%v)", n)
	}
	assert.Zero(t, randDuration(1), "the only value in [0, 1)")
	for range 100 {
		d := randDuration(time.Second)
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.Less(t, d, time.Second)
	}
}

func TestNewConfig(t *testing.T) {
	assert.Equal(t, clock.RealClock{}, newConfig(nil).clock, "the real clock by default")

	start := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	fc := testingclock.NewFakeClock(start)
	other := testingclock.NewFakeClock(start)
	c := newConfig([]Option{WithClock(other), {}, WithClock(fc)})
	assert.Same(t, fc, c.clock, "zero options are skipped and the last option wins")

	assert.PanicsWithValue(t, "backoff: WithClock: c must not be nil, got <nil>", func() { WithClock(nil) })
	// A typed nil passes c == nil and used to crash on first use.
	var nilFake *testingclock.FakeClock
	assert.PanicsWithValue(t, "backoff: WithClock: c must not be nil, got <nil>", func() { WithClock(nilFake) })
}

func TestNewConfigWithoutOptionsDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() { _ = newConfig(nil) })
	assert.Zero(t, allocs)
}

func TestNewConfigAppliesEveryOption(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	expiry := func(time.Time, time.Time, time.Duration) bool { return true }
	onPanic := func(any) {}
	notify := func(int, error, time.Duration) {}
	retryable := func(error) bool { return false }
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	metrics := NopQueueMetrics{}
	fairKey := func(string) string { return "" }
	budget := NewRetryBudget(0.1, 1, time.Second, WithClock(fc))
	budgetMetrics := &countingBudgetMetrics{}
	name := strings.Repeat("q", 3)
	c := newConfig([]Option{
		WithClock(fc), WithExpiry(expiry), WithRequeueJitter(0.25), WithMaxTrackedItems(7), WithMaxKeys(9),
		WithPanicHandler(onPanic), WithMaxElapsedTime(time.Minute), WithNotify(notify), WithRetryable(retryable),
		WithJitterKind(EqualJitter), WithMaxRetryAfter(0), WithName(name), WithLogger(logger), WithMetrics(metrics),
		WithFairness(fairKey), WithMaxReadyWait(time.Hour), WithRetryBudget(budget), WithRetryBudgetMetrics(budgetMetrics),
	})
	assert.Same(t, fc, c.clock)
	assert.NotNil(t, c.backoff.expiry)
	assert.Equal(t, limiterConfig{jitter: 0.25, maxTracked: 7, maxKeys: 9}, c.limiter)
	assert.NotNil(t, c.loop.onPanic)
	assert.Equal(t, time.Minute, c.retry.maxElapsed)
	assert.NotNil(t, c.retry.notify)
	assert.False(t, c.retry.retryable(nil))
	assert.Equal(t, EqualJitter, c.retry.jitter)
	assert.True(t, c.retry.ignoreHints, "WithMaxRetryAfter(0) ignores hints")
	assert.Equal(t, "qqq", c.queue.name)
	assert.Same(t, logger, c.queue.logger)
	assert.Equal(t, metrics, c.queue.metrics)
	assert.NotNil(t, c.queue.priority.fairKey)
	assert.Equal(t, time.Hour, c.queue.priority.maxReadyWait)
	assert.Same(t, budget, c.budget.budget)
	assert.Same(t, budgetMetrics, c.budget.metrics)

	c = newConfig([]Option{WithMaxRetryAfter(time.Second)})
	assert.Equal(t, time.Second, c.retry.maxRetryAfter)
	assert.False(t, c.retry.ignoreHints)
}

func TestNewConfigWithOptionsDoesNotAllocate(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	notify := func(int, error, time.Duration) {}
	allocs := testing.AllocsPerRun(100, func() {
		_ = newConfig([]Option{WithClock(fc), WithMaxElapsedTime(time.Second), WithNotify(notify), WithName("q")})
	})
	assert.Zero(t, allocs)
}

func TestJitterBounds(t *testing.T) {
	const d = time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		got := Jitter(d, 0.5)
		assert.GreaterOrEqual(t, got, d)
		assert.Less(t, got, d+d/2)
		seen[got] = true
	}
	assert.Greater(t, len(seen), 900, "jitter should actually vary")
}

func TestJitterNoSpread(t *testing.T) {
	for _, f := range []float64{0, -1, math.NaN()} {
		assert.Equal(t, time.Second, Jitter(time.Second, f), "maxFactor %v means no jitter", f)
	}
}

func TestJitterClampsAndSaturates(t *testing.T) {
	assert.Equal(t, time.Duration(0), Jitter(-time.Second, 1), "negative d is treated as 0")
	assert.Equal(t, time.Duration(0), Jitter(0, 1))
	got := Jitter(time.Duration(math.MaxInt64/2), math.Inf(1))
	assert.Equal(t, time.Duration(math.MaxInt64), got, "saturates instead of overflowing")
	assert.GreaterOrEqual(t, Jitter(time.Duration(math.MaxInt64), 10), time.Duration(0))
}

func BenchmarkJitter(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		_ = Jitter(time.Second, 0.1)
	}
}

// optionTable says which constructors and helpers read each option: the one
// table of the package's options. Option's doc comment shows it, and
// TestOptionTable keeps the two equal and fails for an option or a function
// taking options that the table leaves out. After changing it, rewrite the
// doc with
//
//	go test -run TestOptionTable -update-option-table
var optionTable = []struct {
	options []string
	readers []string
	note    string
}{
	{[]string{"WithClock"}, []string{
		"NewBackOff", "NewBackOffWithJitter", "NewLimiter", "NewKeyedLimiter", "NewBucketRateLimiter",
		"DefaultControllerRateLimiter", "NewQueue", "NewDelayingQueue", "NewRateLimitingQueue", "NewRetryBudget",
		"NewExponentialBackoffManager", "NewJitteredBackoffManager", "Retry", "RetryValue", "OnError",
		"ExponentialBackoff", "ExponentialBackoffWithContext", "PollUntilContextCancel", "PollUntilContextTimeout",
		"Forever", "Until", "UntilWithContext", "NonSlidingUntil", "NonSlidingUntilWithContext", "JitterUntil",
		"JitterUntilWithContext", "NewAdaptiveLimiter", "NewAdaptiveRate", "NewThrottler", "NewBreaker",
	}, "BackoffUntil and BackoffUntilWithContext wait on their manager's clock"},
	{[]string{"WithExpiry"}, []string{"NewBackOff", "NewBackOffWithJitter"}, ""},
	{[]string{"WithRequeueJitter"}, []string{
		"NewItemExponentialFailureRateLimiter", "NewItemFastSlowRateLimiter", "DefaultControllerRateLimiter", "RunWorkers",
	}, "RunWorkers for Result.RequeueAfter"},
	{[]string{"WithMaxTrackedItems"}, []string{
		"NewItemExponentialFailureRateLimiter", "NewItemFastSlowRateLimiter", "DefaultControllerRateLimiter",
	}, ""},
	{[]string{"WithMaxKeys"}, []string{"NewKeyedLimiter"}, ""},
	{[]string{"WithPanicHandler"}, []string{
		"Forever", "Until", "UntilWithContext", "NonSlidingUntil", "NonSlidingUntilWithContext", "JitterUntil",
		"JitterUntilWithContext", "BackoffUntil", "BackoffUntilWithContext",
	}, ""},
	{[]string{"WithJitterKind", "WithMaxElapsedTime", "WithMaxRetryAfter", "WithMinAttemptTime", "WithAttemptTimeout", "WithNotify", "WithRetryable", "WithMaxElapsedTimeSinceFirstFailure"},
		[]string{"Retry", "RetryValue"}, "not OnError, whose waits are ExponentialBackoff's"},
	{[]string{"WithRetryBudget"}, []string{"Retry", "RetryValue", "OnError", "NewRateLimitingQueue"}, ""},
	{[]string{"WithRetryBudgetMetrics"}, []string{"NewRetryBudget"}, ""},
	{[]string{"WithName", "WithLogger", "WithMetrics", "WithFairness", "WithMaxReadyWait"},
		[]string{"NewQueue", "NewDelayingQueue", "NewRateLimitingQueue"},
		"the name and the logger are used by RunWorkers' logs"},
	{[]string{"WithMinLimit", "WithMaxLimit", "WithInitialLimit"}, []string{"NewAdaptiveLimiter"}, ""},
	{[]string{"WithInitialRate"}, []string{"NewAdaptiveRate"}, ""},
	{[]string{"WithOnThrottled"}, []string{"NewAdaptiveRate"}, ""},
	{[]string{"WithPacer"}, []string{"Retry", "RetryValue", "RunWorkers"}, "and httpretry's Transport, through Retry"},
	{[]string{"WithItemTimeout"}, []string{"RunWorkers"}, ""},
	{[]string{"WithBreakerFailureRatio", "WithBreakerWindow", "WithBreakerProbes", "WithBreakerOpenSchedule",
		"WithBreakerStateChange", "WithBreakerMetrics", "WithBreakerConsecutiveFailures"}, []string{"NewBreaker"}, ""},
	{[]string{"WithHedge", "WithMaxHedges", "WithHedgeDelay"}, []string{"Retry", "RetryValue"}, "httpretry's Transport does not hedge"},
	{[]string{"WithHedgeRelease"}, []string{"RetryValue"}, ""},
}

var updateOptionTable = flag.Bool("update-option-table", false, "rewrite Option's doc comment from optionTable")

// renderOptionTable returns the table as Option's doc comment shows it,
// one line of source per element.
func renderOptionTable() []string {
	const left, width = 24, 77
	lines := []string{"//\tOption" + strings.Repeat(" ", left-len("Option")) + "read by"}
	for _, row := range optionTable {
		words := make([]string, 0, len(row.readers)+1)
		for i, r := range row.readers {
			if i < len(row.readers)-1 {
				r += ","
			}
			words = append(words, r)
		}
		if row.note != "" {
			words = append(words, strings.Fields("("+row.note+")")...)
		}
		var right []string
		line := ""
		for _, w := range words {
			if line != "" && left+len(line)+1+len(w) > width {
				right = append(right, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		right = append(right, line)
		for i := 0; i < max(len(row.options), len(right)); i++ {
			l, r := "", ""
			if i < len(row.options) {
				l = row.options[i]
				if i < len(row.options)-1 {
					l += ","
				}
			}
			if i < len(right) {
				r = right[i]
			}
			// A name longer than the column goes on a line of its own, with
			// no reader beside it (it comes last in its row).
			lines = append(lines, strings.TrimRight("//\t"+l+strings.Repeat(" ", max(left-len(l), 1))+r, " "))
		}
	}
	return lines
}

// TestOptionTable checks optionTable against the code and against Option's
// doc comment: every exported function that returns an Option has a row,
// every exported function or method that takes options is a reader of at
// least WithClock's row or of another, every reader takes options, and the
// doc comment shows the table as renderOptionTable renders it.
func TestOptionTable(t *testing.T) {
	t.Parallel() // self-contained: see TestMain
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	withs := map[string]bool{}  // exported functions returning Option
	takers := map[string]bool{} // exported functions taking ...Option
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() || fn.Recv != nil {
				continue
			}
			if r := fn.Type.Results; r != nil && len(r.List) == 1 && isIdent(r.List[0].Type, "Option") {
				withs[fn.Name.Name] = true
			}
			if p := fn.Type.Params.List; len(p) > 0 {
				if e, ok := p[len(p)-1].Type.(*ast.Ellipsis); ok && isIdent(e.Elt, "Option") {
					takers[fn.Name.Name] = true
				}
			}
		}
	}
	require.NotEmpty(t, withs)
	documented := map[string]bool{}
	read := map[string]bool{}
	for _, row := range optionTable {
		for _, o := range row.options {
			assert.True(t, withs[o], "%s is in the table but is not an exported function returning Option", o)
			assert.False(t, documented[o], "%s has two rows", o)
			documented[o] = true
		}
		for _, r := range row.readers {
			assert.True(t, takers[r], "%s is listed as reading %v but takes no options", r, row.options)
			read[r] = true
		}
	}
	for w := range withs {
		assert.True(t, documented[w], "%s is an option, but the table does not say who reads it", w)
	}
	for f := range takers {
		assert.True(t, read[f], "%s takes options, but the table lists it as reading none", f)
	}

	src, err := os.ReadFile("options.go")
	require.NoError(t, err)
	table := renderOptionTable()
	start, end := optionTableLines(string(src))
	lines := strings.Split(string(src), "\n")
	if start < 0 {
		t.Fatal("options.go has no option table in Option's doc comment (a line starting with //\\tOption)")
	}
	got := strings.Join(lines[start:end], "\n")
	want := strings.Join(table, "\n")
	if got == want {
		return
	}
	if *updateOptionTable {
		out := strings.Join(append(append(append([]string{}, lines[:start]...), table...), lines[end:]...), "\n")
		require.NoError(t, os.WriteFile("options.go", []byte(out), 0o644))
		return
	}
	t.Errorf("Option's doc comment does not show optionTable; run go test -run TestOptionTable -update-option-table\ngot:\n%s\nwant:\n%s", got, want)
}

// optionTableLines returns the lines [start, end) of the option table in
// src, or -1, -1.
func optionTableLines(src string) (int, int) {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if l == "//\tOption" || strings.HasPrefix(l, "//\tOption ") {
			j := i + 1
			for j < len(lines) && strings.HasPrefix(lines[j], "//\t") {
				j++
			}
			return i, j
		}
	}
	return -1, -1
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
