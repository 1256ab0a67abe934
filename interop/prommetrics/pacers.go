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
//	breaker_state                       gauge    1 for a backoff.Breaker's current state, 0 for the others (label state: closed, open, half-open)
//	breaker_transitions_total           counter  its changes into each state (label to: closed, open, half-open)
//	breaker_rejected_total              counter  calls it refused
//
// Every series has the label name, the name the pacer was added under. A
// backoff.Limiter, whose rate is fixed, has no series here. Reading a
// Breaker's state at the scrape moves an open breaker whose open time has
// passed to half-open, as its next call would (see backoff.Breaker.State):
// its state-change function may then run on the scraping goroutine.
//
// A Pacers is safe for concurrent use by multiple goroutines. Its zero
// value is not usable: create it with [NewPacers].
type Pacers struct {
	limit, inflight, rate, rejected                   *prometheus.Desc
	breakerState, breakerTransitions, breakerRejected *prometheus.Desc

	mu         sync.Mutex
	limiters   map[string]*backoff.AdaptiveLimiter
	rates      map[string]*backoff.AdaptiveRate
	throttlers map[string]*backoff.Throttler
	breakers   map[string]*backoff.Breaker
}

// NewPacers returns a collector with no pacer; register it once, and add
// pacers with [Pacers.Add].
func NewPacers() *Pacers {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{labelName}, nil)
	}
	return &Pacers{
		limit:    desc("adaptive_limiter_limit", "The adaptive limiter's current concurrency limit."),
		inflight: desc("adaptive_limiter_inflight", "Permits of the adaptive limiter held now: calls in flight."),
		rate:     desc("adaptive_rate_requests_per_second", "The adaptive rate's current rate, in requests per second; +Inf while it has no limit."),
		rejected: desc("throttler_rejected_total", "Requests the client-side throttler rejected locally."),
		breakerState: prometheus.NewDesc("breaker_state",
			"1 for the circuit breaker's current state, 0 for the others.", []string{labelName, "state"}, nil),
		breakerTransitions: prometheus.NewDesc("breaker_transitions_total",
			"Changes of the circuit breaker into each state.", []string{labelName, "to"}, nil),
		breakerRejected: desc("breaker_rejected_total", "Calls the circuit breaker refused."),
		limiters:        map[string]*backoff.AdaptiveLimiter{},
		rates:           map[string]*backoff.AdaptiveRate{},
		throttlers:      map[string]*backoff.Throttler{},
		breakers:        map[string]*backoff.Breaker{},
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
	case *backoff.Breaker:
		c.breakers[name] = p
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
	delete(c.breakers, name)
}

// Describe sends the seven descriptors. It implements prometheus.Collector.
func (c *Pacers) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.inflight
	ch <- c.rate
	ch <- c.rejected
	ch <- c.breakerState
	ch <- c.breakerTransitions
	ch <- c.breakerRejected
}

// Collect sends the current value of every pacer's series. It implements
// prometheus.Collector.
func (c *Pacers) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	breakers := make([]namedBreaker, 0, len(c.breakers))
	for name, b := range c.breakers {
		breakers = append(breakers, namedBreaker{name, b})
	}
	defer func() {
		// Without c.mu: State may call the breaker's state-change function.
		for _, nb := range breakers {
			c.collectBreaker(ch, nb.name, nb.b)
		}
	}()
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

type namedBreaker struct {
	name string
	b    *backoff.Breaker
}

// breakerStates are a Breaker's states, in the order of their series.
var breakerStates = [...]backoff.BreakerState{backoff.BreakerClosed, backoff.BreakerOpen, backoff.BreakerHalfOpen}

// collectBreaker sends b's series.
func (c *Pacers) collectBreaker(ch chan<- prometheus.Metric, name string, b *backoff.Breaker) {
	now := b.State()
	for _, s := range breakerStates {
		v := 0.0
		if s == now {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.breakerState, prometheus.GaugeValue, v, name, s.String())
		ch <- prometheus.MustNewConstMetric(c.breakerTransitions, prometheus.CounterValue, float64(b.Transitions(s)), name, s.String())
	}
	ch <- prometheus.MustNewConstMetric(c.breakerRejected, prometheus.CounterValue, float64(b.Rejected()), name)
}
