package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// TestRateLimitingQueueRejectsALimiterOnAnotherClock: a FakeClock passed to
// the queue or to the limiter only used to leave the other on the real clock
// (a bucket refilling in real time under a queue whose time stands still).
// NewRateLimitingQueue now refuses the pair when the limiter is ours.
func TestRateLimitingQueueRejectsALimiterOnAnotherClock(t *testing.T) {
	fc := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	other := testclock.NewFakeClock(fc.Now())
	const want = "backoff: NewRateLimitingQueue: the limiter reads another clock than the queue (pass the same WithClock to both, e.g. one []Option for both)"
	exp := backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)
	for name, tt := range map[string]struct {
		limiter backoff.RateLimiter[string]
		queue   []backoff.Option
	}{
		"clock given to the queue only":   {backoff.DefaultControllerRateLimiter[string](), []backoff.Option{backoff.WithClock(fc)}},
		"clock given to the limiter only": {backoff.DefaultControllerRateLimiter[string](backoff.WithClock(fc)), nil},
		"two fake clocks":                 {backoff.NewBucketRateLimiter[string](10, 100, backoff.WithClock(other)), []backoff.Option{backoff.WithClock(fc)}},
		"a bucket inside a max-of": {backoff.NewMaxOfRateLimiter(exp, backoff.NewBucketRateLimiter[string](10, 100)),
			[]backoff.Option{backoff.WithClock(fc)}},
		"a bucket inside a max-wait": {backoff.NewWithMaxWaitRateLimiter(backoff.NewBucketRateLimiter[string](10, 100), time.Second),
			[]backoff.Option{backoff.WithClock(fc)}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.PanicsWithValue(t, want, func() { backoff.NewRateLimitingQueue(tt.limiter, tt.queue...) })
		})
	}

	// One options slice for both: accepted, and the bucket runs on the fake
	// clock (the 101st requeue at one instant waits 100 ms of fake time).
	opts := []backoff.Option{backoff.WithClock(fc), backoff.WithName("pods")}
	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](opts...), opts...)
	defer q.ShutDown()
	for i := range 101 {
		q.AddRateLimited(string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	assert.Equal(t, 0, q.Len(), "all wait their 5 ms")
	fc.Step(5 * time.Millisecond)
	assert.Equal(t, 100, q.Len(), "the burst")
	fc.Step(95 * time.Millisecond)
	assert.Equal(t, 101, q.Len(), "the 101st after 100 ms of fake time")

	// Both on the real clock (no WithClock anywhere), and limiters that read
	// no clock, are accepted.
	backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string]()).ShutDown()
	backoff.NewRateLimitingQueue[string](exp, backoff.WithClock(fc)).ShutDown()
}
