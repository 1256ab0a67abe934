// Package otel reports the retries, queues, retry budgets and limiters of
// github.com/retrykit/backoff to OpenTelemetry, through the library's
// exported hooks only: the library itself does not depend on OpenTelemetry.
//
// # Metrics
//
// [NewMetrics] creates every instrument from one MeterProvider. Its
// [Metrics] hands out the implementations of the library's metrics
// interfaces: [Metrics.ForQueue] a backoff.QueueMetrics (with per-priority
// depth) for backoff.WithMetrics, [Metrics.ForRetryBudget] a
// backoff.RetryBudgetMetrics for backoff.WithRetryBudgetMetrics; and it
// observes what has no hook, read when the metrics are collected:
// [Metrics.ObserveRetryBudget], [Metrics.ObserveLimiter] and
// [Metrics.ObserveKeyedLimiter]; [Metrics.WrapLimiter] and
// [WrapKeyedLimiter] also count a limiter's admissions and rejections, in a
// thin wrapper, since the limiters have no hook. A [Retrier] given the Metrics with
// [WithMetrics] records gRPC A96's two retry histograms.
//
//	m, err := otel.NewMetrics(meterProvider)
//	q := backoff.NewRateLimitingQueue(limiter,
//		backoff.WithName("pods"), backoff.WithMetrics(m.ForQueue("pods")))
//
// Every series carries the attribute name ([NameKey]); the per-priority
// depth also carries priority ([PriorityKey]):
//
//	workqueue.depth                        gauge      {item}     items queued and ready (not waiting, not being processed)
//	workqueue.priority_depth               gauge      {item}     workqueue.depth per priority
//	workqueue.adds                         counter    {item}     items that became queued
//	workqueue.retries                      counter    {retry}    AddAfter and AddRateLimited calls the queue accepted
//	workqueue.queue_duration               histogram  s          time an item was ready before a worker took it
//	workqueue.work_duration                histogram  s          time from Get to Done
//	workqueue.unfinished_work              gauge      s          processing time so far, summed over the items in process
//	workqueue.longest_running_processor    gauge      s          processing time so far of the longest-running item
//	workqueue.rate_limiter_delay           histogram  s          time an item waited for its delay, from AddAfter or AddRateLimited to ready
//	workqueue.delayed_items                gauge      {item}     items waiting for a delay
//	workqueue.retry_budget_refused         counter    {retry}    rate-limited requeues the queue's retry budget refused
//	retrykit.retry.retries                 histogram  {retry}    retries of a call (attempts after the first); calls without one are not recorded
//	retrykit.retry.delay                   histogram  s          time a call waited between attempts, in total; idem
//	retrykit.retry_budget.requests         counter    {request}  requests the budget recorded
//	retrykit.retry_budget.retries          counter    {retry}    retries the budget allowed
//	retrykit.retry_budget.refused          counter    {retry}    retries the budget refused
//	retrykit.retry_budget.balance          gauge      {retry}    retries the budget's window still allows
//	retrykit.limiter.limit                 gauge      {token}/s  the limiter's rate
//	retrykit.limiter.burst                 gauge      {token}    the limiter's burst
//	retrykit.limiter.tokens                gauge      {token}    tokens the limiter holds now
//	retrykit.limiter.admitted              counter    {call}     calls a wrapped limiter admitted
//	retrykit.limiter.rejected              counter    {call}     calls a wrapped limiter refused
//	retrykit.keyed_limiter.keys            gauge      {key}      keys a keyed limiter tracks
//	retrykit.adaptive_limiter.limit        gauge      {call}     an AdaptiveLimiter's limit ([Metrics.ObservePacer])
//	retrykit.adaptive_limiter.inflight     gauge      {call}     its permits held now
//	retrykit.adaptive_rate.rate            gauge      {request}/s an AdaptiveRate's rate
//	retrykit.throttler.rejected            counter    {request}  requests a Throttler rejected locally
//	retrykit.breaker.state                 gauge      {state}    1 for a Breaker's current state, 0 for the others (attribute state)
//	retrykit.breaker.transitions           counter    {transition} its changes into each state (attribute to)
//	retrykit.breaker.rejected              counter    {call}     calls it refused
//
// The workqueue names are client-go's in OpenTelemetry's form: through an
// OpenTelemetry Prometheus exporter they become client-go's
// workqueue_depth, workqueue_adds_total, workqueue_queue_duration_seconds
// and so on. The retry histograms have the shape of gRPC A96's
// grpc.client.call.retries and grpc.client.call.retry_delay.
//
// # Traces
//
// A [Retrier] wraps backoff.Retry ([Retrier.Retry], [RetryValue]) and
// httpretry.Transport ([Retrier.Transport]): each attempt is a span (or,
// for Retry with [WithSpanEvents], an event on the caller's span), each
// wait a retry.scheduled event with its length and its reason (an answer
// that a request that may not be repeated was not retried after, a
// retry.skipped event), and the
// error the call returns is recorded once. HTTP attempts are client spans
// with http.request.resend_count on each resend; wrap the Transport in
// otelhttp's, not the other way round (see [Transport]).
//
// # Cost
//
// With OpenTelemetry's no-op providers (go.opentelemetry.io/otel/trace/noop,
// go.opentelemetry.io/otel/metric/noop), a queue given [Metrics.ForQueue]
// and a call through [Retrier.Retry] cost what they cost without
// instrumentation, and allocate nothing more: see BenchmarkQueueAddGetDone
// and BenchmarkRetry.
package otel
