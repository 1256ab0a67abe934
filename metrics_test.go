package backoff_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// recMetrics records what a queue reports, as a list of events.
type recMetrics struct {
	events []string
	probe  func() (unfinished, longest time.Duration)
}

func (m *recMetrics) SetDepth(n int) { m.events = append(m.events, fmt.Sprintf("depth=%d", n)) }
func (m *recMetrics) IncAdds()       { m.events = append(m.events, "add") }
func (m *recMetrics) IncRetries()    { m.events = append(m.events, "retry") }
func (m *recMetrics) ObserveLatency(d time.Duration) {
	m.events = append(m.events, "latency="+d.String())
}
func (m *recMetrics) ObserveWorkDuration(d time.Duration) {
	m.events = append(m.events, "work="+d.String())
}
func (m *recMetrics) TrackProcessing(probe func() (unfinished, longest time.Duration)) {
	m.probe = probe
}

// take returns the events since the last call.
func (m *recMetrics) take() string {
	s := strings.Join(m.events, " ")
	m.events = nil
	return s
}

func TestQueueMetrics(t *testing.T) {
	fc := newQueueClock()
	m := &recMetrics{}
	q := backoff.NewRateLimitingQueue[string](newQLimiter[string](qExponential(time.Second)),
		backoff.WithClock(fc), backoff.WithMetrics(m))
	defer q.ShutDown()
	require.NotNil(t, m.probe, "TrackProcessing is called by the constructor")
	probe := func() string {
		u, l := m.probe()
		return fmt.Sprintf("unfinished=%v longest=%v", u, l)
	}

	q.Add("a")
	q.Add("a") // already queued: not counted
	assert.Equal(t, "add depth=1", m.take())
	fc.Step(2 * time.Second)
	a, _ := get(t, q.Get, fc)
	assert.Equal(t, "depth=0 latency=2s", m.take(), "latency: time queued before Get")
	assert.Equal(t, "unfinished=0s longest=0s", probe())

	fc.Step(3 * time.Second)
	q.Add("b")
	b, _ := get(t, q.Get, fc)
	fc.Step(time.Second)
	assert.Equal(t, "add depth=1 depth=0 latency=0s", m.take())
	assert.Equal(t, "unfinished=5s longest=4s", probe(), "a for 4s, b for 1s")

	q.AddRateLimited(a) // waits 1s; a is processing
	q.Done(a)
	assert.Equal(t, "retry work=4s", m.take())
	assert.Equal(t, "unfinished=1s longest=1s", probe())

	fc.Step(time.Second)
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, "add depth=1", m.take(), "a became queued when its delay passed")
	q.AddRateLimited(a) // already queued: ignored, not a retry
	q.AddAfter("c", 0)
	assert.Equal(t, "add depth=2 retry", m.take())
	q.Done(b)
	assert.Equal(t, "work=2s", m.take())

	fc.Step(500 * time.Millisecond)
	_, _ = get(t, q.Get, fc)
	assert.Equal(t, "depth=1 latency=500ms", m.take())

	q.AddAfter("d", time.Second)
	fc.Step(3 * time.Second) // nobody looks when d becomes ready
	_, _ = get(t, q.Get, fc)
	_, _ = get(t, q.Get, fc)
	assert.Equal(t, "retry add depth=2 depth=1 latency=3.5s depth=0 latency=2s", m.take(),
		"latency counts from the ready time, not from when the queue noticed it")
}

func TestQueueNopMetricsAllocateNothing(t *testing.T) {
	for name, opts := range map[string][]backoff.Option{
		"default":         nil,
		"NopQueueMetrics": {backoff.WithMetrics(backoff.NopQueueMetrics{})},
	} {
		t.Run(name, func(t *testing.T) {
			q := backoff.NewQueue[int](opts...)
			q.Add(1)
			item, _ := q.Get()
			q.Done(item) // the FIFO and the state map have their working size
			allocs := testing.AllocsPerRun(1000, func() {
				q.Add(1)
				item, _ := q.Get()
				q.Done(item)
			})
			assert.Zero(t, allocs)
		})
	}
}

// partialMetrics implements only the adds, thanks to the embedded
// NopQueueMetrics.
type partialMetrics struct {
	backoff.NopQueueMetrics
	adds int
}

func (m *partialMetrics) IncAdds() { m.adds++ }

func TestQueueMetricsEmbeddingNop(t *testing.T) {
	m := &partialMetrics{}
	q := backoff.NewQueue[int](backoff.WithMetrics(m))
	q.Add(1)
	q.Add(2)
	assert.Equal(t, 2, m.adds)
}

// recDelayMetrics is a recMetrics that also records delays.
type recDelayMetrics struct {
	recMetrics
	delays  []time.Duration
	waiting []int
	refused int
}

func (m *recDelayMetrics) ObserveDelay(d time.Duration) { m.delays = append(m.delays, d) }
func (m *recDelayMetrics) SetWaiting(n int)             { m.waiting = append(m.waiting, n) }
func (m *recDelayMetrics) IncBudgetRefused()            { m.refused++ }

// TestQueueMetricsOfParkedItems: parking an item that was not in the queue
// counts an add, as Add would, but no depth until its release; parking a
// queued item takes it out of the depth and counts no second add.
func TestQueueMetricsOfParkedItems(t *testing.T) {
	m := &recMetrics{}
	q := backoff.NewDelayingQueue[string](backoff.WithClock(newQueueClock()), backoff.WithMetrics(m))
	defer q.ShutDown()
	var f flag
	q.Park("a", f.ready, time.Minute)
	assert.Equal(t, "add", m.take(), "a new item parked")
	q.Add("b")
	m.take()
	q.Park("b", f.ready, time.Minute)
	assert.Equal(t, "depth=0", m.take(), "a queued item parked leaves the depth")
	f.v.Store(true)
	q.Wake()
	assert.Equal(t, "depth=1 depth=2", m.take(), "released")
}

func TestQueueDelayMetrics(t *testing.T) {
	fc := newQueueClock()
	m := &recDelayMetrics{}
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc), backoff.WithMetrics(m))
	defer q.ShutDown()
	q.AddAfter("a", 3*time.Second)
	q.AddAfter("b", time.Minute)
	q.AddAfter("c", time.Minute)
	q.AddAfter("a", time.Second) // earlier: still one waiting item
	assert.Equal(t, []int{1, 2, 3}, m.waiting)
	fc.Step(time.Second)
	q.Len()
	assert.Equal(t, []time.Duration{time.Second}, m.delays, "from the first AddAfter to the ready time")
	fc.Step(time.Second)
	q.Reschedule("b", 2*time.Second) // the wait counts from b's AddAfter
	q.Add("c")                       // out of the wait early, after 2s
	fc.Step(2 * time.Second)
	q.Len()
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, m.delays)
	q.AddAfter("d", time.Hour)
	q.CancelWaiting("d")
	q.AddAfter("e", time.Hour)
	q.TakeWaiting()
	assert.Len(t, m.delays, 3, "a cancelled wait is not a delay")
	assert.Equal(t, []int{1, 2, 3, 2, 1, 0, 1, 0, 1, 0}, m.waiting)
}

// TestQueueDelayMetricsCountBudgetRefusals: a rate-limited requeue the
// budget refuses is counted, and one it allows is not.
func TestQueueDelayMetricsCountBudgetRefusals(t *testing.T) {
	fc := newQueueClock()
	m := &recDelayMetrics{}
	budget := backoff.NewRetryBudget(0, 0, time.Second, backoff.WithClock(fc)) // no retry ever
	q := backoff.NewRateLimitingQueue[string](backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second, backoff.WithClock(fc)),
		backoff.WithClock(fc), backoff.WithMetrics(m), backoff.WithRetryBudget(budget))
	defer q.ShutDown()
	q.AddRateLimited("a")
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, Priority: 1}, "b")
	assert.Equal(t, 2, m.refused)
	q.AddAfter("c", time.Second) // not rate-limited: no budget
	assert.Equal(t, 2, m.refused)
}
