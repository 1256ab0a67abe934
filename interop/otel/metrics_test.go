package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/otel"
)

var pods = otel.NameKey.String("pods")

func TestQueueMetricsReportTheWorkqueueSet(t *testing.T) {
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	q := backoff.NewRateLimitingQueue(
		backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Minute, backoff.WithClock(fc)),
		backoff.WithClock(fc), backoff.WithName("pods"), backoff.WithMetrics(m.ForQueue("pods")))
	defer q.ShutDown()

	q.Add("a")
	q.Add("b")
	q.Add("a") // already queued: not an add
	q.AddWithOptions(backoff.AddOptions{Priority: 5}, "c")
	fc.Step(2 * time.Second)
	item, _, _ := q.GetWithPriority() // "c", queued 2 s
	if item != "c" {
		t.Fatalf("Get = %q, want the priority-5 item", item)
	}
	fc.Step(3 * time.Second)

	c := collect(t, reader)
	for _, tc := range []struct {
		name string
		want float64
	}{
		{otel.QueueDepthName, 2},
		{otel.QueueAddsName, 3},
		{otel.QueueRetriesName, 0},
		{otel.QueueUnfinishedWorkName, 3},
		{otel.QueueLongestRunningName, 3},
	} {
		if got := c.value(t, tc.name, pods); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := c.value(t, otel.QueuePriorityDepthName, pods, otel.PriorityKey.String("0")); got != 2 {
		t.Errorf("priority 0 depth = %v, want 2", got)
	}
	if got := c.value(t, otel.QueuePriorityDepthName, pods, otel.PriorityKey.String("5")); got != 0 {
		t.Errorf("priority 5 depth = %v, want 0", got)
	}
	lat, ok := c.histogram(otel.QueueLatencyName, pods)
	if !ok || lat.Count != 1 || lat.Sum != 2 {
		t.Errorf("queue_duration = %+v, want one observation of 2 s", lat)
	}

	q.AddRateLimited(item) // retried in 1 s
	q.Done(item)
	c = collect(t, reader)
	if got := c.value(t, otel.QueueRetriesName, pods); got != 1 {
		t.Errorf("retries = %v, want 1", got)
	}
	if got := c.value(t, otel.QueueDelayedItemsName, pods); got != 1 {
		t.Errorf("delayed items = %v, want 1", got)
	}
	fc.Step(time.Second)
	q.Len()
	c = collect(t, reader)
	if got := c.value(t, otel.QueueDelayedItemsName, pods); got != 0 {
		t.Errorf("delayed items once due = %v, want 0", got)
	}
	if d, ok := c.histogram(otel.QueueDelayName, pods); !ok || d.Count != 1 || d.Sum != 1 {
		t.Errorf("rate_limiter_delay = %+v, want one observation of 1 s", d)
	}
	if got := c.value(t, otel.QueueUnfinishedWorkName, pods); got != 0 {
		t.Errorf("unfinished work after Done = %v, want 0", got)
	}
	work, ok := c.histogram(otel.QueueWorkDurationName, pods)
	if !ok || work.Count != 1 || work.Sum != 3 {
		t.Errorf("work_duration = %+v, want one observation of 3 s", work)
	}
	if want := []float64{1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1000}; len(work.Bounds) != len(want) || work.Bounds[8] != 1 {
		t.Errorf("bounds = %v, want %v", work.Bounds, want)
	}
	fc.Step(time.Second) // "c" comes back
	if n := q.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
	c = collect(t, reader)
	if got := c.value(t, otel.QueueAddsName, pods); got != 4 {
		t.Errorf("adds after the delay = %v, want 4", got)
	}
	if got := c.value(t, otel.QueueDepthName, pods); got != 3 {
		t.Errorf("depth after the delay = %v, want 3", got)
	}
}

func TestQueueMetricsOfOneNameAddUpAndDeleteDropsThem(t *testing.T) {
	m, reader := newMetrics(t)
	a, b := m.ForQueue("pods"), m.ForQueue("pods")
	a.SetDepth(2)
	b.SetDepth(3)
	a.IncAdds()
	b.IncAdds()
	if got := collect(t, reader).value(t, otel.QueueDepthName, pods); got != 5 {
		t.Errorf("depth = %v, want 5", got)
	}
	m.DeleteQueue("pods")
	if _, ok := collect(t, reader).point(otel.QueueDepthName, pods); ok {
		t.Error("a deleted queue still reports its depth")
	}
	defer func() {
		if recover() == nil {
			t.Error("ForQueue(\"\") did not panic")
		}
	}()
	m.ForQueue("")
}

// TestSeriesOfOneNameAddUp: two of anything given one name report one
// series: the sum of their counts and unfinished work, and the longest of
// their longest-running items, whichever was registered first.
func TestSeriesOfOneNameAddUp(t *testing.T) {
	m, reader := newMetrics(t)
	a, b := m.ForQueue("pods").(*otel.QueueMetrics), m.ForQueue("pods").(*otel.QueueMetrics)
	a.SetWaiting(1)
	b.SetWaiting(2)
	a.IncBudgetRefused()
	b.IncBudgetRefused()
	b.IncRetries()
	a.SetPriorityDepth("1", 2)
	b.SetPriorityDepth("1", 3)
	a.TrackProcessing(func() (time.Duration, time.Duration) { return 3 * time.Second, 3 * time.Second })
	b.TrackProcessing(func() (time.Duration, time.Duration) { return time.Second, time.Second })

	fc := testingclock.NewFakeClock(epoch)
	l1, stop1 := m.WrapLimiter("api", backoff.NewLimiter(1, 1, backoff.WithClock(fc)))
	defer stop1()
	l2, stop2 := m.WrapLimiter("api", backoff.NewLimiter(1, 1, backoff.WithClock(fc)))
	defer stop2()
	l1.Allow()
	l1.Allow() // rejected
	l2.Allow()
	l2.Allow() // rejected

	db1, db2 := m.ForRetryBudget("db"), m.ForRetryBudget("db")
	db1.IncRequests()
	db2.IncRequests()
	db1.IncRetries()
	db2.IncRetries()
	db1.IncRefused()
	db2.IncRefused()

	api, db := otel.NameKey.String("api"), otel.NameKey.String("db")
	c := collect(t, reader)
	for _, tc := range []struct {
		name string
		attr attribute.KeyValue
		want float64
	}{
		{otel.QueueDelayedItemsName, pods, 3},
		{otel.QueueBudgetRefusedName, pods, 2},
		{otel.QueueRetriesName, pods, 1},
		{otel.QueueUnfinishedWorkName, pods, 4},
		{otel.QueueLongestRunningName, pods, 3},
		{otel.LimiterAdmittedName, api, 2},
		{otel.LimiterRejectedName, api, 2},
		{otel.RetryBudgetRequestsName, db, 2},
		{otel.RetryBudgetRetriesName, db, 2},
		{otel.RetryBudgetRefusedName, db, 2},
	} {
		if got := c.value(t, tc.name, tc.attr); got != tc.want {
			t.Errorf("%s{%v} = %v, want %v", tc.name, tc.attr.Value.String(), got, tc.want)
		}
	}
	if got := c.value(t, otel.QueuePriorityDepthName, pods, otel.PriorityKey.String("1")); got != 5 {
		t.Errorf("%s{pods, 1} = %v, want 5", otel.QueuePriorityDepthName, got)
	}
}

func TestRetryBudgetMetricsCountDecisionsAndObserveTheBalance(t *testing.T) {
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	budget := backoff.NewRetryBudget(0.1, 0, 10*time.Second, backoff.WithClock(fc),
		backoff.WithRetryBudgetMetrics(m.ForRetryBudget("db")))
	stop := m.ObserveRetryBudget("db", budget)
	for range 20 {
		budget.RecordRequest()
	}
	budget.TryRetry()
	budget.TryRetry()
	budget.TryRetry() // refused

	db := otel.NameKey.String("db")
	c := collect(t, reader)
	for name, want := range map[string]float64{
		otel.RetryBudgetRequestsName: 20,
		otel.RetryBudgetRetriesName:  2,
		otel.RetryBudgetRefusedName:  1,
		otel.RetryBudgetBalanceName:  0,
	} {
		if got := c.value(t, name, db); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	stop()
	if _, ok := collect(t, reader).point(otel.RetryBudgetBalanceName, db); ok {
		t.Error("the balance is still reported after stop")
	}
}

func TestLimiterGaugesReadTheLimiterAtCollection(t *testing.T) {
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	l := backoff.NewLimiter(2, 10, backoff.WithClock(fc))
	k := backoff.NewKeyedLimiter[string](1, 1, backoff.WithClock(fc))
	stop := m.ObserveLimiter("api", l)
	defer stop()
	defer m.ObserveKeyedLimiter("tenants", k)()
	l.AllowN(4)
	k.Allow("a")
	k.Allow("b")

	api := otel.NameKey.String("api")
	c := collect(t, reader)
	want := map[string]float64{otel.LimiterLimitName: 2, otel.LimiterBurstName: 10, otel.LimiterTokensName: 6}
	for name, w := range want {
		if got := c.value(t, name, api); got != w {
			t.Errorf("%s = %v, want %v", name, got, w)
		}
	}
	if got := c.value(t, otel.KeyedLimiterKeysName, otel.NameKey.String("tenants")); got != 2 {
		t.Errorf("keys = %v, want 2", got)
	}
	fc.Step(time.Second)
	l.SetLimit(5)
	c = collect(t, reader)
	if got := c.value(t, otel.LimiterTokensName, api); got != 8 {
		t.Errorf("tokens a second later = %v, want 8", got)
	}
	if got := c.value(t, otel.LimiterLimitName, api); got != 5 {
		t.Errorf("limit after SetLimit = %v, want 5", got)
	}
}

func TestMetricsCloseStopsTheObservations(t *testing.T) {
	m, reader := newMetrics(t)
	m.ForQueue("pods").SetDepth(1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := collect(t, reader).point(otel.QueueDepthName, pods); ok {
		t.Error("depth reported after Close")
	}
}

func TestQueueMetricsOfTheNoopProviderAreNop(t *testing.T) {
	m, err := otel.NewMetrics(metricnoop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	if qm := m.ForQueue("pods"); qm != (backoff.NopQueueMetrics{}) {
		t.Errorf("ForQueue = %T, want backoff.NopQueueMetrics", qm)
	}
	sdk, _ := newMetrics(t)
	if _, ok := sdk.ForQueue("pods").(*otel.QueueMetrics); !ok {
		t.Error("ForQueue of an SDK provider is not a *QueueMetrics")
	}
}

func TestWrappedLimitersCountAdmissionsAndRejections(t *testing.T) {
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	l, stop := m.WrapLimiter("api", backoff.NewLimiter(1, 2, backoff.WithClock(fc)))
	defer stop()
	k, stopKeyed := otel.WrapKeyedLimiter(m, "tenants", backoff.NewKeyedLimiter[string](1, 1, backoff.WithClock(fc)))
	defer stopKeyed()

	l.Allow()
	l.AllowN(1)
	l.Allow() // no token left
	if err := l.WaitN(context.Background(), 3); err == nil {
		t.Fatal("WaitN beyond the burst succeeded")
	}
	fc.Step(time.Second)
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.Allow("a")
	k.AllowN("a", 1) // refused
	k.Allow("b")

	c := collect(t, reader)
	api, tenants := otel.NameKey.String("api"), otel.NameKey.String("tenants")
	for _, tc := range []struct {
		name string
		attr attribute.KeyValue
		want float64
	}{
		{otel.LimiterAdmittedName, api, 3},
		{otel.LimiterRejectedName, api, 2},
		{otel.LimiterTokensName, api, 0},
		{otel.LimiterAdmittedName, tenants, 2},
		{otel.LimiterRejectedName, tenants, 1},
		{otel.KeyedLimiterKeysName, tenants, 2},
	} {
		if got := c.value(t, tc.name, tc.attr); got != tc.want {
			t.Errorf("%s{%v} = %v, want %v", tc.name, tc.attr.Value.String(), got, tc.want)
		}
	}
	stop()
	if _, ok := collect(t, reader).point(otel.LimiterAdmittedName, api); ok {
		t.Error("admissions reported after stop")
	}
}

func TestPacerGaugesReadThePacersAtCollection(t *testing.T) {
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(fc), backoff.WithInitialLimit(8))
	r := backoff.NewAdaptiveRate(backoff.WithClock(fc))
	th := backoff.NewThrottler(1, time.Minute, backoff.WithClock(fc))
	defer m.ObservePacer("db", l)()
	defer m.ObservePacer("api", r)()
	stop := m.ObservePacer("search", th)
	p, _ := l.TryAcquire()
	defer p.Release()
	for range 100 {
		if th.Allow() {
			th.Record(false)
		}
	}
	r.Throttled(0)

	c := collect(t, reader)
	db := otel.NameKey.String("db")
	if got := c.value(t, otel.AdaptiveLimitName, db); got != 8 {
		t.Errorf("limit = %v, want 8", got)
	}
	if got := c.value(t, otel.AdaptiveInflightName, db); got != 1 {
		t.Errorf("inflight = %v, want 1", got)
	}
	if got := c.value(t, otel.AdaptiveRateName, otel.NameKey.String("api")); got != r.Rate() {
		t.Errorf("rate = %v, want %v", got, r.Rate())
	}
	search := otel.NameKey.String("search")
	if got := c.value(t, otel.ThrottlerRejectedName, search); got != float64(th.Rejected()) || got == 0 {
		t.Errorf("rejected = %v, want %v (> 0)", got, th.Rejected())
	}
	stop()
	if _, ok := collect(t, reader).point(otel.ThrottlerRejectedName, search); ok {
		t.Error("the throttler is still reported after stop")
	}
}

// TestBreakerSeriesReadTheBreakerAtCollection: a Breaker's state, changes
// of state and refusals are read when the metrics are collected; a breaker
// whose open time has passed is reported half-open.
func TestBreakerSeriesReadTheBreakerAtCollection(t *testing.T) {
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(fc), backoff.WithBreakerConsecutiveFailures(1),
		backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: time.Second}))
	stop := m.ObservePacer("orders", b)
	p, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	p.Done(context.Background(), errors.New("connection refused")) // trips
	for range 3 {
		if _, err := b.Allow(); !errors.Is(err, backoff.ErrBreakerOpen) {
			t.Fatalf("Allow = %v, want ErrBreakerOpen", err)
		}
	}
	name := otel.NameKey.String("orders")
	check := func(c collected, state backoff.BreakerState, opens, halfOpens float64) {
		t.Helper()
		for _, s := range []backoff.BreakerState{backoff.BreakerClosed, backoff.BreakerOpen, backoff.BreakerHalfOpen} {
			want := 0.0
			if s == state {
				want = 1
			}
			if got := c.value(t, otel.BreakerStateName, name, otel.StateKey.String(s.String())); got != want {
				t.Errorf("state %s = %v, want %v", s, got, want)
			}
		}
		to := func(s backoff.BreakerState) float64 {
			return c.value(t, otel.BreakerTransitionsName, name, otel.ToKey.String(s.String()))
		}
		if got := []float64{to(backoff.BreakerClosed), to(backoff.BreakerOpen), to(backoff.BreakerHalfOpen)}; got[0] != 0 || got[1] != opens || got[2] != halfOpens {
			t.Errorf("transitions to closed, open, half-open = %v, want 0, %v, %v", got, opens, halfOpens)
		}
		if got := c.value(t, otel.BreakerRejectedName, name); got != 3 {
			t.Errorf("rejected = %v, want 3", got)
		}
	}
	check(collect(t, reader), backoff.BreakerOpen, 1, 0)
	fc.Step(time.Second)
	check(collect(t, reader), backoff.BreakerHalfOpen, 1, 1)
	stop()
	if _, ok := collect(t, reader).point(otel.BreakerRejectedName, name); ok {
		t.Error("the breaker is still reported after stop")
	}
}

// TestBadArgumentsPanicNamingOneParameter checks that each constructor and
// Observe method refuses a bad argument with a message naming the function
// and that one parameter, whichever of two is bad.
func TestBadArgumentsPanicNamingOneParameter(t *testing.T) {
	m, _ := newMetrics(t)
	b := backoff.NewRetryBudget(0.1, 1, 10*time.Second)
	l := backoff.NewLimiter(1, 1)
	k := backoff.NewKeyedLimiter[string](1, 1)
	tests := []struct {
		want string
		call func()
	}{
		{"otel: ForQueue: name must not be empty", func() { m.ForQueue("") }},
		{"otel: ForRetryBudget: name must not be empty", func() { m.ForRetryBudget("") }},
		{"otel: NewRetrier: name must not be empty", func() { otel.NewRetrier("") }},
		{"otel: ObserveRetryBudget: name must not be empty", func() { m.ObserveRetryBudget("", b) }},
		{"otel: ObserveRetryBudget: b must not be nil", func() { m.ObserveRetryBudget("x", nil) }},
		{"otel: ObservePacer: name must not be empty", func() { m.ObservePacer("", l) }},
		{"otel: ObservePacer: p must not be nil", func() { m.ObservePacer("x", nil) }},
		{"otel: ObserveLimiter: name must not be empty", func() { m.ObserveLimiter("", l) }},
		{"otel: ObserveLimiter: l must not be nil", func() { m.ObserveLimiter("x", nil) }},
		{"otel: ObserveKeyedLimiter: name must not be empty", func() { m.ObserveKeyedLimiter("", k) }},
		{"otel: ObserveKeyedLimiter: k must not be nil", func() { m.ObserveKeyedLimiter("x", nil) }},
		{"otel: WrapLimiter: name must not be empty", func() { m.WrapLimiter("", l) }},
		{"otel: WrapLimiter: l must not be nil", func() { m.WrapLimiter("x", nil) }},
		{"otel: WrapKeyedLimiter: name must not be empty", func() { otel.WrapKeyedLimiter(m, "", k) }},
		{"otel: WrapKeyedLimiter: k must not be nil", func() { otel.WrapKeyedLimiter[string](m, "x", nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			defer func() {
				if got := recover(); got != tt.want {
					t.Errorf("panic %v, want %q", got, tt.want)
				}
			}()
			tt.call()
		})
	}
}
