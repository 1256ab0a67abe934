package prommetrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/prommetrics"
)

func TestRetryBudgetsExportSnapshots(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	budgets := prommetrics.NewRetryBudgets()
	require.NoError(t, reg.Register(budgets))

	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := backoff.NewRetryBudget(0.1, 0, 10*time.Second, backoff.WithClock(fc))
	budgets.Add("db", b)
	for range 20 {
		b.RecordRequest()
	}
	b.TryRetry()
	b.TryRetry()
	b.TryRetry() // refused

	assert.InDelta(t, 0, value(t, reg, "retry_budget_balance", "db"), 1e-9)
	assert.Equal(t, 20.0, value(t, reg, "retry_budget_requests", "db"))
	assert.Equal(t, 2.0, value(t, reg, "retry_budget_retries", "db"))
	assert.Equal(t, 1.0, value(t, reg, "retry_budget_refused_total", "db"))

	fc.Step(time.Minute)
	assert.Equal(t, 0.0, value(t, reg, "retry_budget_requests", "db"), "the window moved on")
	assert.Equal(t, 1.0, value(t, reg, "retry_budget_refused_total", "db"), "a counter")

	budgets.Remove("db")
	_, ok := scrape(t, reg, "retry_budget_balance", "db")
	assert.False(t, ok)
	assert.PanicsWithValue(t, "prommetrics: RetryBudgets.Add: name must not be empty", func() { budgets.Add("", b) })
	assert.PanicsWithValue(t, "prommetrics: RetryBudgets.Add: b must not be nil", func() { budgets.Add("x", nil) })
}
