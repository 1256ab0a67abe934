package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff"
)

// fixedLimiter returns the same delay every time and counts calls, to
// observe what a combining limiter does with its parts.
type fixedLimiter struct {
	delay    time.Duration
	whens    int
	forgets  int
	requeues int
}

func (f *fixedLimiter) When(string) time.Duration { f.whens++; return f.delay }
func (f *fixedLimiter) Forget(string)             { f.forgets++ }
func (f *fixedLimiter) NumRequeues(string) int    { return f.requeues }

func TestMaxOfRateLimiter(t *testing.T) {
	a := &fixedLimiter{delay: time.Second, requeues: 2}
	b := &fixedLimiter{delay: 3 * time.Second, requeues: 7}
	c := &fixedLimiter{delay: -time.Hour, requeues: 1}
	l := backoff.NewMaxOfRateLimiter[string](a, b, c)

	assert.Equal(t, 3*time.Second, l.When("x"), "the longest delay wins")
	assert.Equal(t, []int{1, 1, 1}, []int{a.whens, b.whens, c.whens}, "every limiter counts every When")
	assert.Equal(t, 7, l.NumRequeues("x"))
	l.Forget("x")
	assert.Equal(t, []int{1, 1, 1}, []int{a.forgets, b.forgets, c.forgets})

	neg := backoff.NewMaxOfRateLimiter[string](c)
	assert.Equal(t, time.Duration(0), neg.When("x"), "a negative delay counts as 0")
}

func TestMaxOfRateLimiterEmpty(t *testing.T) {
	// The constructor refuses no limiters (a hot requeue loop); the zero
	// value, which nobody builds by mistake, still answers 0.
	assert.PanicsWithValue(t, "backoff: NewMaxOfRateLimiter: limiters must hold at least one limiter, got 0", func() {
		backoff.NewMaxOfRateLimiter[string]()
	})
	var l backoff.MaxOfRateLimiter[string]
	assert.Equal(t, time.Duration(0), l.When("x"))
	assert.Equal(t, 0, l.NumRequeues("x"))
	l.Forget("x")
}

func TestMaxOfRateLimiterCopiesLimiters(t *testing.T) {
	parts := []backoff.RateLimiter[string]{&fixedLimiter{delay: time.Second}}
	l := backoff.NewMaxOfRateLimiter(parts...)
	parts[0] = &fixedLimiter{delay: time.Hour}
	assert.Equal(t, time.Second, l.When("x"), "changing the caller's slice afterwards has no effect")
}

func TestMaxOfRateLimiterItemCounts(t *testing.T) {
	exp := backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)
	fs := backoff.NewItemFastSlowRateLimiter[string](50*time.Millisecond, time.Minute, 3)
	l := backoff.NewMaxOfRateLimiter[string](exp, fs)
	want := []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, time.Minute}
	assert.Equal(t, want, whenN[string](t, l, "x", 4))
	assert.Equal(t, 4, l.NumRequeues("x"))
	l.Forget("x")
	assert.Equal(t, 0, exp.NumRequeues("x"))
	assert.Equal(t, 0, fs.NumRequeues("x"))
}

func TestWithMaxWaitRateLimiter(t *testing.T) {
	inner := backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Hour)
	l := backoff.NewWithMaxWaitRateLimiter[string](inner, 5*time.Second)
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	assert.Equal(t, want, whenN[string](t, l, "x", len(want)))
	assert.Equal(t, 5, l.NumRequeues("x"), "the inner limiter's count")
	l.Forget("x")
	assert.Equal(t, 0, inner.NumRequeues("x"))
	assert.Equal(t, time.Second, l.When("x"))

	zero := backoff.NewWithMaxWaitRateLimiter[string](inner, 0)
	assert.Equal(t, time.Duration(0), zero.When("y"), "a zero maxDelay makes every delay 0")
	assert.Equal(t, 1, zero.NumRequeues("y"), "while the inner limiter still counts")

	neg := backoff.NewWithMaxWaitRateLimiter[string](&fixedLimiter{delay: -time.Second}, time.Second)
	assert.Equal(t, time.Duration(0), neg.When("x"), "a negative inner delay is returned as 0")
}
