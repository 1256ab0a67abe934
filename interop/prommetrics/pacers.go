package prommetrics

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrykit/backoff"
)

// Pacers is a prometheus.Collector that exports the state of any number of
// named adaptive pacers, read when the registry is scraped, so that it
// costs the pacers nothing between scrapes:
//
//	adaptive_limiter_limit              gauge    a backoff.AdaptiveLimiter's current concurrency limit
//	adaptive_limiter_inflight           gauge    its permits held now
//	adaptive_rate_requests_per_second   gauge    a backoff.AdaptiveRate's current rate (+Inf before the first throttling answer)
//	throttler_rejected_total            counter  requests a backoff.Throttler rejected locally
//
// Every series has one label, name, the name the pacer was added under. A
// backoff.Limiter, whose rate is fixed, has no series here.
//
// A Pacers is safe for concurrent use by multiple goroutines. Its zero
// value is not usable: create it with [NewPacers].
type Pacers struct {
	limit, inflight, rate, rejected *prometheus.Desc

	mu         sync.Mutex
	limiters   map[string]*backoff.AdaptiveLimiter
	rates      map[string]*backoff.AdaptiveRate
	throttlers map[string]*backoff.Throttler
}

// NewPacers returns a collector with no pacer; register it once, and add
// pacers with [Pacers.Add].
func NewPacers() *Pacers {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{labelName}, nil)
	}
	return &Pacers{
		limit:      desc("adaptive_limiter_limit", "The adaptive limiter's current concurrency limit."),
		inflight:   desc("adaptive_limiter_inflight", "Permits of the adaptive limiter held now: calls in flight."),
		rate:       desc("adaptive_rate_requests_per_second", "The adaptive rate's current rate, in requests per second; +Inf while it has no limit."),
		rejected:   desc("throttler_rejected_total", "Requests the client-side throttler rejected locally."),
		limiters:   map[string]*backoff.AdaptiveLimiter{},
		rates:      map[string]*backoff.AdaptiveRate{},
		throttlers: map[string]*backoff.Throttler{},
	}
}

// Add exports p under name, replacing the pacer added under that name
// before, if any. A *backoff.Limiter is accepted and exports nothing. It
// panics if name is empty or p is nil.
func (c *Pacers) Add(name string, p backoff.Pacer) {
	if name == "" {
		panic("prommetrics: Pacers.Add: name must not be empty")
	}
	if p == nil {
		panic("prommetrics: Pacers.Add: p must not be nil")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(name)
	switch p := p.(type) {
	case *backoff.AdaptiveLimiter:
		c.limiters[name] = p
	case *backoff.AdaptiveRate:
		c.rates[name] = p
	case *backoff.Throttler:
		c.throttlers[name] = p
	}
}

// Remove stops exporting the pacer added under name; its series disappear
// from the next scrape.
func (c *Pacers) Remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(name)
}

func (c *Pacers) removeLocked(name string) {
	delete(c.limiters, name)
	delete(c.rates, name)
	delete(c.throttlers, name)
}

// Describe sends the four descriptors. It implements prometheus.Collector.
func (c *Pacers) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.inflight
	ch <- c.rate
	ch <- c.rejected
}

// Collect sends the current value of every pacer's series. It implements
// prometheus.Collector.
func (c *Pacers) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, l := range c.limiters {
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(l.Limit()), name)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(l.Inflight()), name)
	}
	for name, r := range c.rates {
		rate := r.Rate()
		if rate >= backoff.InfLimit {
			rate = math.Inf(1)
		}
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, rate, name)
	}
	for name, t := range c.throttlers {
		ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(t.Rejected()), name)
	}
}
