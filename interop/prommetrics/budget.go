package prommetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrykit/backoff"
)

// RetryBudgets is a prometheus.Collector that exports the state of any number
// of named [backoff.RetryBudget]s, read with RetryBudget.Snapshot when the
// registry is scraped, so that it costs the budgets nothing between scrapes:
//
//	retry_budget_balance        gauge    retries the window still allows (negative: refusing)
//	retry_budget_requests       gauge    requests counted in the window
//	retry_budget_retries        gauge    retries counted in the window
//	retry_budget_refused_total  counter  retries refused since the budget was created
//
// Every series has one label, name, the name the budget was added under.
// A RetryBudgets is safe for concurrent use by multiple goroutines. Its zero
// value is not usable: create it with [NewRetryBudgets].
type RetryBudgets struct {
	balance, requests, retries, refused *prometheus.Desc

	mu      sync.Mutex
	budgets map[string]*backoff.RetryBudget
}

// NewRetryBudgets returns a collector with no budget; register it once, and
// add budgets with [RetryBudgets.Add].
func NewRetryBudgets() *RetryBudgets {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{labelName}, nil)
	}
	return &RetryBudgets{
		balance:  desc("retry_budget_balance", "How many more retries the budget's window allows; negative while it refuses."),
		requests: desc("retry_budget_requests", "Requests counted in the budget's window."),
		retries:  desc("retry_budget_retries", "Retries counted in the budget's window."),
		refused:  desc("retry_budget_refused_total", "Retries the budget refused since it was created."),
		budgets:  map[string]*backoff.RetryBudget{},
	}
}

// Add exports b under name, replacing the budget added under that name
// before, if any. It panics if name is empty or b is nil.
func (r *RetryBudgets) Add(name string, b *backoff.RetryBudget) {
	if name == "" {
		panic("prommetrics: RetryBudgets.Add: name must not be empty")
	}
	if b == nil {
		panic("prommetrics: RetryBudgets.Add: b must not be nil")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.budgets[name] = b
}

// Remove stops exporting the budget added under name; its series disappear
// from the next scrape.
func (r *RetryBudgets) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.budgets, name)
}

// Describe sends the descriptors of the four metrics. It implements
// prometheus.Collector.
func (r *RetryBudgets) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.balance
	ch <- r.requests
	ch <- r.retries
	ch <- r.refused
}

// Collect sends the series of every budget. It implements
// prometheus.Collector.
func (r *RetryBudgets) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, b := range r.budgets {
		s := b.Snapshot()
		ch <- prometheus.MustNewConstMetric(r.balance, prometheus.GaugeValue, s.Balance, name)
		ch <- prometheus.MustNewConstMetric(r.requests, prometheus.GaugeValue, float64(s.Requests), name)
		ch <- prometheus.MustNewConstMetric(r.retries, prometheus.GaugeValue, float64(s.Retries), name)
		ch <- prometheus.MustNewConstMetric(r.refused, prometheus.CounterValue, float64(s.Refused), name)
	}
}
