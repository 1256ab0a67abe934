package otel

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/retrykit/backoff"
)

// The names of the instruments. The queue's are client-go's workqueue
// metric names in OpenTelemetry's dotted form: an OpenTelemetry Prometheus
// exporter turns workqueue.adds, a counter, into workqueue_adds_total and
// workqueue.queue_duration, in seconds, into
// workqueue_queue_duration_seconds, client-go's names, so that dashboards
// written for client-go's queues read them. The others have no convention
// to follow and live under retrykit.
const (
	QueueDepthName          = "workqueue.depth"
	QueuePriorityDepthName  = "workqueue.priority_depth"
	QueueAddsName           = "workqueue.adds"
	QueueRetriesName        = "workqueue.retries"
	QueueLatencyName        = "workqueue.queue_duration"
	QueueWorkDurationName   = "workqueue.work_duration"
	QueueUnfinishedWorkName = "workqueue.unfinished_work"
	QueueLongestRunningName = "workqueue.longest_running_processor"
	QueueDelayName          = "workqueue.rate_limiter_delay"
	QueueDelayedItemsName   = "workqueue.delayed_items"
	QueueBudgetRefusedName  = "workqueue.retry_budget_refused"
	RetryRetriesName        = "retrykit.retry.retries"
	RetryDelayName          = "retrykit.retry.delay"
	RetryBudgetRequestsName = "retrykit.retry_budget.requests"
	RetryBudgetRetriesName  = "retrykit.retry_budget.retries"
	RetryBudgetRefusedName  = "retrykit.retry_budget.refused"
	RetryBudgetBalanceName  = "retrykit.retry_budget.balance"
	LimiterLimitName        = "retrykit.limiter.limit"
	LimiterBurstName        = "retrykit.limiter.burst"
	LimiterTokensName       = "retrykit.limiter.tokens"
	LimiterAdmittedName     = "retrykit.limiter.admitted"
	LimiterRejectedName     = "retrykit.limiter.rejected"
	KeyedLimiterKeysName    = "retrykit.keyed_limiter.keys"
	AdaptiveLimitName       = "retrykit.adaptive_limiter.limit"
	AdaptiveInflightName    = "retrykit.adaptive_limiter.inflight"
	AdaptiveRateName        = "retrykit.adaptive_rate.rate"
	ThrottlerRejectedName   = "retrykit.throttler.rejected"
	BreakerStateName        = "retrykit.breaker.state"
	BreakerTransitionsName  = "retrykit.breaker.transitions"
	BreakerRejectedName     = "retrykit.breaker.rejected"
)

// The attributes of the series.
const (
	// NameKey is the name of the queue, budget, limiter or Retrier a series
	// measures, on every series: client-go's label name.
	NameKey = attribute.Key("name")
	// PriorityKey is the priority of a workqueue.priority_depth series:
	// the decimal priority, or backoff.OtherPriorityLabel.
	PriorityKey = attribute.Key("priority")
	// StateKey is the state of a retrykit.breaker.state series: "closed",
	// "open" or "half-open" (backoff.BreakerState's String).
	StateKey = attribute.Key("state")
	// ToKey is the state a retrykit.breaker.transitions series counts the
	// changes into, in StateKey's words.
	ToKey = attribute.Key("to")
)

// durationBounds are the bucket bounds, in seconds, of the queue's duration
// histograms: 10 ns to 1000 s, each ten times the previous, as
// controller-runtime's (and interop/prommetrics') buckets.
var durationBounds = []float64{1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1000}

// retryBounds are the bucket bounds of retrykit.retry.retries: gRPC A96's
// 1 to 5, and then coarser, since a Schedule may allow more attempts.
var retryBounds = []float64{1, 2, 3, 4, 5, 10, 100}

// delayBounds are the bucket bounds, in seconds, of retrykit.retry.delay.
var delayBounds = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300}

// Metrics holds the OpenTelemetry instruments of the queues, retry budgets,
// limiters and [Retrier]s of one program, created once from one
// MeterProvider with [NewMetrics]. Hand each queue its [QueueMetrics] from
// [Metrics.ForQueue], each retry budget its [RetryBudgetMetrics] from
// [Metrics.ForRetryBudget], each Retrier the Metrics with [WithMetrics],
// and observe limiters with [Metrics.ObserveLimiter].
//
// Counters and gauges the library updates on its hot paths (adds, retries,
// depths, budget decisions) are atomics that one callback reports when the
// metrics are collected; only the histograms are recorded as the events
// happen. Series of one name add up: two queues given one name report the
// sum of their depths, adds and unfinished work, and the longest of their
// longest-running items.
//
// A Metrics is safe for concurrent use by multiple goroutines. Its zero
// value is not usable: create it with [NewMetrics].
type Metrics struct {
	latency, work metric.Float64Histogram
	queueDelay    metric.Float64Histogram
	retries       metric.Int64Histogram
	delay         metric.Float64Histogram
	observables   observables
	registration  metric.Registration
	mu            sync.Mutex
	queues        map[*QueueMetrics]struct{}
	budgets       map[*RetryBudgetMetrics]struct{}
	budgetGauges  map[*budgetObservation]struct{}
	limiters      map[*limiterObservation]struct{}
	keyedLimiters map[*keyedObservation]struct{}
	pacers        map[*pacerObservation]struct{}
	admissions    map[*admissions]struct{}
	noop          bool // built on the no-op MeterProvider
}

// observables are the asynchronous instruments, all reported by one
// callback.
type observables struct {
	depth, prioDepth, keys, delayed        metric.Int64ObservableGauge
	adds, queueRetries, queueRefused       metric.Int64ObservableCounter
	budgetRequests, budgetRetries, refused metric.Int64ObservableCounter
	admitted, rejected                     metric.Int64ObservableCounter
	unfinished, longest                    metric.Float64ObservableGauge
	balance, limit, burst, tokens          metric.Float64ObservableGauge
	adaptiveLimit, inflight                metric.Int64ObservableGauge
	adaptiveRate                           metric.Float64ObservableGauge
	throttled                              metric.Int64ObservableCounter
	breakerState                           metric.Int64ObservableGauge
	breakerTransitions, breakerRejected    metric.Int64ObservableCounter
}

// NewMetrics creates the instruments listed in the package documentation
// with a meter of mp, and registers the callback that reports the
// asynchronous ones. It returns the errors of the meter, if any, joined;
// with an SDK's MeterProvider there are none. Call [Metrics.Close] to
// unregister the callback when the Metrics is no longer used.
//
// With the no-op MeterProvider (go.opentelemetry.io/otel/metric/noop), the
// queues given a Metrics measure nothing (see [Metrics.ForQueue]) and the
// retry budgets cost an atomic add per decision; nothing allocates. See
// BenchmarkQueueAddGetDone.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter(ScopeName)
	_, noop := meter.(metricnoop.Meter)
	m := &Metrics{
		noop:          noop,
		queues:        map[*QueueMetrics]struct{}{},
		budgets:       map[*RetryBudgetMetrics]struct{}{},
		budgetGauges:  map[*budgetObservation]struct{}{},
		limiters:      map[*limiterObservation]struct{}{},
		keyedLimiters: map[*keyedObservation]struct{}{},
		pacers:        map[*pacerObservation]struct{}{},
		admissions:    map[*admissions]struct{}{},
	}
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	o := &m.observables
	o.depth, err = meter.Int64ObservableGauge(QueueDepthName, metric.WithUnit("{item}"),
		metric.WithDescription("Items queued and ready to be handed to a worker (neither waiting for a delay nor being processed)."))
	check(err)
	o.prioDepth, err = meter.Int64ObservableGauge(QueuePriorityDepthName, metric.WithUnit("{item}"),
		metric.WithDescription("Items queued and ready to be handed to a worker, per priority."))
	check(err)
	o.adds, err = meter.Int64ObservableCounter(QueueAddsName, metric.WithUnit("{item}"),
		metric.WithDescription("Items that became queued, by an Add or by a delay that ran out, when they were not queued already."))
	check(err)
	o.queueRetries, err = meter.Int64ObservableCounter(QueueRetriesName, metric.WithUnit("{retry}"),
		metric.WithDescription("Delayed and rate-limited adds (AddAfter, AddRateLimited) that the queue accepted."))
	check(err)
	m.latency, err = meter.Float64Histogram(QueueLatencyName, metric.WithUnit("s"),
		metric.WithDescription("Seconds an item was queued and ready before a worker took it (a requested delay not included)."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	check(err)
	m.work, err = meter.Float64Histogram(QueueWorkDurationName, metric.WithUnit("s"),
		metric.WithDescription("Seconds a worker held an item, from Get to Done."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	check(err)
	m.queueDelay, err = meter.Float64Histogram(QueueDelayName, metric.WithUnit("s"),
		metric.WithDescription("Seconds an item waited for its delay (AddAfter, AddRateLimited), from the add to the moment it became ready."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	check(err)
	o.delayed, err = meter.Int64ObservableGauge(QueueDelayedItemsName, metric.WithUnit("{item}"),
		metric.WithDescription("Items waiting for a delay before they are queued."))
	check(err)
	o.queueRefused, err = meter.Int64ObservableCounter(QueueBudgetRefusedName, metric.WithUnit("{retry}"),
		metric.WithDescription("Rate-limited requeues that the queue's retry budget refused: the item waited for the budget instead of its backoff."))
	check(err)
	o.unfinished, err = meter.Float64ObservableGauge(QueueUnfinishedWorkName, metric.WithUnit("s"),
		metric.WithDescription("Seconds spent so far on the items being processed, added up; a value that keeps growing points to a stuck worker."))
	check(err)
	o.longest, err = meter.Float64ObservableGauge(QueueLongestRunningName, metric.WithUnit("s"),
		metric.WithDescription("Seconds spent so far on the item that has been processed the longest."))
	check(err)
	m.retries, err = meter.Int64Histogram(RetryRetriesName, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries a call made, after its first attempt; calls that made none are not recorded."),
		metric.WithExplicitBucketBoundaries(retryBounds...))
	check(err)
	m.delay, err = meter.Float64Histogram(RetryDelayName, metric.WithUnit("s"),
		metric.WithDescription("Seconds a call spent waiting between its attempts, in total; calls that made no retry are not recorded."),
		metric.WithExplicitBucketBoundaries(delayBounds...))
	check(err)
	o.budgetRequests, err = meter.Int64ObservableCounter(RetryBudgetRequestsName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests recorded by the retry budget."))
	check(err)
	o.budgetRetries, err = meter.Int64ObservableCounter(RetryBudgetRetriesName, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries the retry budget allowed."))
	check(err)
	o.refused, err = meter.Int64ObservableCounter(RetryBudgetRefusedName, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries the retry budget refused."))
	check(err)
	o.balance, err = meter.Float64ObservableGauge(RetryBudgetBalanceName, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries the budget's window still allows; negative while it refuses."))
	check(err)
	o.limit, err = meter.Float64ObservableGauge(LimiterLimitName, metric.WithUnit("{token}/s"),
		metric.WithDescription("The limiter's rate: tokens added per second."))
	check(err)
	o.burst, err = meter.Float64ObservableGauge(LimiterBurstName, metric.WithUnit("{token}"),
		metric.WithDescription("The limiter's burst: the most tokens it holds."))
	check(err)
	o.tokens, err = meter.Float64ObservableGauge(LimiterTokensName, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens the limiter holds now; negative while reservations wait for tokens."))
	check(err)
	o.keys, err = meter.Int64ObservableGauge(KeyedLimiterKeysName, metric.WithUnit("{key}"),
		metric.WithDescription("Keys the keyed limiter tracks."))
	check(err)
	o.admitted, err = meter.Int64ObservableCounter(LimiterAdmittedName, metric.WithUnit("{call}"),
		metric.WithDescription("Calls of Allow, AllowN, Wait and WaitN that the limiter admitted."))
	check(err)
	o.rejected, err = meter.Int64ObservableCounter(LimiterRejectedName, metric.WithUnit("{call}"),
		metric.WithDescription("Calls of Allow, AllowN, Wait and WaitN that the limiter refused (Allow false, Wait an error)."))
	check(err)
	o.adaptiveLimit, err = meter.Int64ObservableGauge(AdaptiveLimitName, metric.WithUnit("{call}"),
		metric.WithDescription("The adaptive limiter's current concurrency limit."))
	check(err)
	o.inflight, err = meter.Int64ObservableGauge(AdaptiveInflightName, metric.WithUnit("{call}"),
		metric.WithDescription("Permits of the adaptive limiter held now: calls in flight."))
	check(err)
	o.adaptiveRate, err = meter.Float64ObservableGauge(AdaptiveRateName, metric.WithUnit("{request}/s"),
		metric.WithDescription("The adaptive rate's current rate, in requests per second; backoff.InfLimit while it has no limit."))
	check(err)
	o.throttled, err = meter.Int64ObservableCounter(ThrottlerRejectedName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests the client-side throttler rejected locally."))
	check(err)
	o.breakerState, err = meter.Int64ObservableGauge(BreakerStateName, metric.WithUnit("{state}"),
		metric.WithDescription("1 for the circuit breaker's current state, 0 for the others."))
	check(err)
	o.breakerTransitions, err = meter.Int64ObservableCounter(BreakerTransitionsName, metric.WithUnit("{transition}"),
		metric.WithDescription("Changes of the circuit breaker into each state."))
	check(err)
	o.breakerRejected, err = meter.Int64ObservableCounter(BreakerRejectedName, metric.WithUnit("{call}"),
		metric.WithDescription("Calls the circuit breaker refused."))
	check(err)
	if len(errs) == 0 {
		m.registration, err = meter.RegisterCallback(m.observe,
			o.adaptiveLimit, o.inflight, o.adaptiveRate, o.throttled,
			o.breakerState, o.breakerTransitions, o.breakerRejected,
			o.depth, o.prioDepth, o.adds, o.queueRetries, o.unfinished, o.longest, o.delayed, o.queueRefused,
			o.budgetRequests, o.budgetRetries, o.refused, o.balance,
			o.limit, o.burst, o.tokens, o.keys, o.admitted, o.rejected)
		check(err)
	}
	return m, errors.Join(errs...)
}

// Close unregisters the callback of the asynchronous instruments: they are
// no longer reported. The histograms keep recording.
func (m *Metrics) Close() error {
	if m.registration == nil {
		return nil
	}
	return m.registration.Unregister()
}

// nameSet returns the attribute set name=name. The queues and Retriers
// build their measurement options from it once, so that recording
// allocates nothing.
func nameSet(name string) attribute.Set {
	return attribute.NewSet(NameKey.String(name))
}

// observe reports the asynchronous instruments, summing the series of one
// name.
func (m *Metrics) observe(_ context.Context, obs metric.Observer) error {
	o := &m.observables
	var breakers []*pacerObservation
	defer func() {
		// After m.mu is released: a Breaker's State may call its
		// state-change function.
		for _, p := range breakers {
			observeBreaker(obs, o, p.name, p.pacer.(*backoff.Breaker))
		}
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	type queueSums struct {
		depth, adds, retries int64
		delayed, refused     int64
		unfinished, longest  time.Duration
		prio                 map[string]int64
	}
	queues := map[string]*queueSums{}
	for q := range m.queues {
		s := queues[q.name]
		if s == nil {
			s = &queueSums{prio: map[string]int64{}}
			queues[q.name] = s
		}
		s.depth += q.depth.Load()
		s.adds += q.adds.Load()
		s.retries += q.retries.Load()
		s.delayed += q.delayed.Load()
		s.refused += q.refused.Load()
		q.prioMu.Lock()
		for p, n := range q.prio {
			s.prio[p] += n
		}
		probe := q.probe
		q.prioMu.Unlock()
		if probe != nil {
			u, l := probe()
			s.unfinished += u
			s.longest = max(s.longest, l)
		}
	}
	for name, s := range queues {
		at := metric.WithAttributeSet(nameSet(name))
		obs.ObserveInt64(o.depth, s.depth, at)
		obs.ObserveInt64(o.adds, s.adds, at)
		obs.ObserveInt64(o.queueRetries, s.retries, at)
		obs.ObserveInt64(o.delayed, s.delayed, at)
		obs.ObserveInt64(o.queueRefused, s.refused, at)
		obs.ObserveFloat64(o.unfinished, s.unfinished.Seconds(), at)
		obs.ObserveFloat64(o.longest, s.longest.Seconds(), at)
		for p, n := range s.prio {
			obs.ObserveInt64(o.prioDepth, n, metric.WithAttributes(NameKey.String(name), PriorityKey.String(p)))
		}
	}
	type budgetSums struct{ requests, retries, refused int64 }
	budgets := map[string]*budgetSums{}
	for b := range m.budgets {
		s := budgets[b.name]
		if s == nil {
			s = &budgetSums{}
			budgets[b.name] = s
		}
		s.requests += b.requests.Load()
		s.retries += b.retries.Load()
		s.refused += b.refused.Load()
	}
	for name, s := range budgets {
		at := metric.WithAttributeSet(nameSet(name))
		obs.ObserveInt64(o.budgetRequests, s.requests, at)
		obs.ObserveInt64(o.budgetRetries, s.retries, at)
		obs.ObserveInt64(o.refused, s.refused, at)
	}
	for b := range m.budgetGauges {
		obs.ObserveFloat64(o.balance, b.budget.Snapshot().Balance, metric.WithAttributeSet(nameSet(b.name)))
	}
	for l := range m.limiters {
		at := metric.WithAttributeSet(nameSet(l.name))
		obs.ObserveFloat64(o.limit, l.limiter.Limit(), at)
		obs.ObserveFloat64(o.burst, float64(l.limiter.Burst()), at)
		obs.ObserveFloat64(o.tokens, l.limiter.Tokens(), at)
	}
	decisions := map[string][2]int64{}
	for a := range m.admissions {
		d := decisions[a.name]
		decisions[a.name] = [2]int64{d[0] + a.admitted.Load(), d[1] + a.rejected.Load()}
	}
	for name, d := range decisions {
		at := metric.WithAttributeSet(nameSet(name))
		obs.ObserveInt64(o.admitted, d[0], at)
		obs.ObserveInt64(o.rejected, d[1], at)
	}
	for p := range m.pacers {
		at := metric.WithAttributeSet(nameSet(p.name))
		switch pacer := p.pacer.(type) {
		case *backoff.AdaptiveLimiter:
			obs.ObserveInt64(o.adaptiveLimit, int64(pacer.Limit()), at)
			obs.ObserveInt64(o.inflight, int64(pacer.Inflight()), at)
		case *backoff.AdaptiveRate:
			obs.ObserveFloat64(o.adaptiveRate, pacer.Rate(), at)
		case *backoff.Throttler:
			obs.ObserveInt64(o.throttled, int64(pacer.Rejected()), at)
		case *backoff.Breaker:
			breakers = append(breakers, p)
		}
	}
	for k := range m.keyedLimiters {
		obs.ObserveInt64(o.keys, int64(k.limiter.Len()), metric.WithAttributeSet(nameSet(k.name)))
	}
	return nil
}

// breakerStates are a Breaker's states, in the order of their series.
var breakerStates = [...]backoff.BreakerState{backoff.BreakerClosed, backoff.BreakerOpen, backoff.BreakerHalfOpen}

// observeBreaker reports b's series under name.
func observeBreaker(obs metric.Observer, o *observables, name string, b *backoff.Breaker) {
	now := b.State()
	for _, s := range breakerStates {
		v := int64(0)
		if s == now {
			v = 1
		}
		obs.ObserveInt64(o.breakerState, v, metric.WithAttributes(NameKey.String(name), StateKey.String(s.String())))
		obs.ObserveInt64(o.breakerTransitions, int64(b.Transitions(s)),
			metric.WithAttributes(NameKey.String(name), ToKey.String(s.String())))
	}
	obs.ObserveInt64(o.breakerRejected, int64(b.Rejected()), metric.WithAttributeSet(nameSet(name)))
}
