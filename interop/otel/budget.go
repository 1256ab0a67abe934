package otel

import (
	"sync/atomic"

	"github.com/retrykit/backoff"
)

// RetryBudgetMetrics is the backoff.RetryBudgetMetrics of one retry budget:
// it counts the budget's decisions in retrykit.retry_budget.requests,
// retrykit.retry_budget.retries and retrykit.retry_budget.refused, under
// its name. Get one from [Metrics.ForRetryBudget] and pass it with
// backoff.WithRetryBudgetMetrics to backoff.NewRetryBudget. Its methods are
// an atomic add each.
//
// A RetryBudgetMetrics is safe for concurrent use by multiple goroutines.
// Its zero value is not usable.
type RetryBudgetMetrics struct {
	m                          *Metrics
	name                       string
	requests, retries, refused atomic.Int64
}

var _ backoff.RetryBudgetMetrics = (*RetryBudgetMetrics)(nil)

// ForRetryBudget returns the [RetryBudgetMetrics] of the retry budget
// called name. ForRetryBudget panics if name is empty.
func (m *Metrics) ForRetryBudget(name string) *RetryBudgetMetrics {
	if name == "" {
		panic("otel: ForRetryBudget: name must not be empty")
	}
	b := &RetryBudgetMetrics{m: m, name: name}
	m.mu.Lock()
	m.budgets[b] = struct{}{}
	m.mu.Unlock()
	return b
}

// Delete stops reporting the budget's counters.
func (b *RetryBudgetMetrics) Delete() {
	b.m.mu.Lock()
	delete(b.m.budgets, b)
	b.m.mu.Unlock()
}

// IncRequests adds 1 to retrykit.retry_budget.requests.
func (b *RetryBudgetMetrics) IncRequests() { b.requests.Add(1) }

// IncRetries adds 1 to retrykit.retry_budget.retries.
func (b *RetryBudgetMetrics) IncRetries() { b.retries.Add(1) }

// IncRefused adds 1 to retrykit.retry_budget.refused.
func (b *RetryBudgetMetrics) IncRefused() { b.refused.Add(1) }

type budgetObservation struct {
	name   string
	budget *backoff.RetryBudget
}

// ObserveRetryBudget reports b's balance (RetryBudgetSnapshot.Balance) in
// retrykit.retry_budget.balance under name, read with b.Snapshot when the
// metrics are collected, until the returned function is called. Observe
// each budget once, under a name no other budget uses. ObserveRetryBudget
// panics if name is empty or b is nil.
func (m *Metrics) ObserveRetryBudget(name string, b *backoff.RetryBudget) (stop func()) {
	if name == "" {
		panic("otel: ObserveRetryBudget: name must not be empty")
	}
	if b == nil {
		panic("otel: ObserveRetryBudget: b must not be nil")
	}
	o := &budgetObservation{name: name, budget: b}
	return observe(m, m.budgetGauges, o)
}

// observe adds o to set, under m's lock, and returns the function that
// removes it.
func observe[T comparable](m *Metrics, set map[T]struct{}, o T) func() {
	m.mu.Lock()
	set[o] = struct{}{}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(set, o)
		m.mu.Unlock()
	}
}
