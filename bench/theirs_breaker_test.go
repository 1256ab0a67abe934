package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbreaker "github.com/failsafe-go/failsafe-go/circuitbreaker"
	fshedge "github.com/failsafe-go/failsafe-go/hedgepolicy"
	fsretry "github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/sony/gobreaker/v2"
)

// succeedValue is succeed as the function of gobreaker's Execute.
func succeedValue() (struct{}, error) { return struct{}{}, succeed() }

// succeedAny is succeed as the function of failsafe-go's executor.
func succeedAny() (any, error) { return nil, succeed() }

// failsafeCountBreaker is failsafe-go's count-based breaker as the cost
// benchmarks build it: open after 5 failures in a row (our default's
// consecutive rule), close after 3 successful probes (our default's probes),
// its default delay.
func failsafeCountBreaker() fsbreaker.CircuitBreaker[any] {
	return fsbreaker.NewBuilder[any]().WithFailureThreshold(5).WithSuccessThreshold(3).Build()
}

func init() {
	breakerImpls = append(breakerImpls,
		impl[func() callFunc]{"gobreaker", func() callFunc {
			// Its default Settings, as a user who reads nothing builds it.
			cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{})
			return func() error {
				_, err := cb.Execute(succeedValue)
				return err
			}
		}},
		impl[func() callFunc]{"failsafe", func() callFunc {
			cb := failsafeCountBreaker()
			return func() error {
				if !cb.TryAcquirePermit() {
					return errRefused
				}
				if err := succeed(); err != nil {
					cb.RecordError(err)
					return nil
				}
				cb.RecordSuccess()
				return nil
			}
		}},
		impl[func() callFunc]{"failsafeexec", func() callFunc {
			exec := failsafe.With[any](failsafeCountBreaker())
			return func() error {
				_, err := exec.Get(succeedAny)
				return err
			}
		}},
	)
	retryBreakerImpls = append(retryBreakerImpls,
		impl[func() callFunc]{"failsafeexec", func() callFunc {
			// Retry's 5 attempts, 10 ms doubling, as retryBreakerSchedule.
			rp := fsretry.NewBuilder[any]().WithMaxAttempts(5).
				WithBackoff(10*time.Millisecond, 160*time.Millisecond).Build()
			exec := failsafe.With[any](rp, failsafeCountBreaker())
			return func() error {
				_, err := exec.Get(succeedAny)
				return err
			}
		}},
	)
	hedgeImpls = append(hedgeImpls,
		impl[func() callFunc]{"failsafe", func() callFunc {
			exec := failsafe.With[any](fshedge.NewWithDelay[any](hedgeDelay))
			return func() error {
				_, err := exec.Get(succeedAny)
				return err
			}
		}},
	)
}

// The anchors under TestBreakerScenarios. Our defaults, scaled (see
// ours_breaker_test.go), are a ratio of 0.5 over at least 20 outcomes in a
// 10 s window, or 5 failures in a row; open for 1 s, 2 s, then 4 s (+10%);
// 3 probes. Each anchor comes as close as its API allows, every duration
// divided by breakerScale.
func init() {
	breakerScenarioImpls = append(breakerScenarioImpls,
		impl[func() scenarioBreaker]{"gobreaker", func() scenarioBreaker {
			g := &gobreakerScenario{}
			g.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
				// Both our rules, over its rolling window of 10 buckets (its
				// counts, the consecutive failures included, roll out of it).
				Interval:     scaled(10 * time.Second),
				BucketPeriod: scaled(time.Second),
				ReadyToTrip: func(c gobreaker.Counts) bool {
					n := c.TotalSuccesses + c.TotalFailures
					return c.ConsecutiveFailures >= 5 || (n >= 20 && 2*c.TotalFailures >= n)
				},
				// It has no schedule and no jitter: every trip opens it for
				// our first open time.
				Timeout: scaled(time.Second),
				// 3 requests when half-open; 3 successes in a row close it.
				MaxRequests: 3,
				// The nearest it has to our neutral cancellation: it sees
				// the error, not the caller's context.
				IsExcluded:    func(err error) bool { return errors.Is(err, context.Canceled) },
				OnStateChange: g.onStateChange,
			})
			return g
		}},
		impl[func() scenarioBreaker]{"gobreaker-default", func() scenarioBreaker {
			// Its defaults, its 60 s Timeout scaled: no Interval, so its
			// counts are never cleared while closed; it trips on more than
			// 5 failures in a row and lets 1 request through when half-open.
			g := &gobreakerScenario{}
			g.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
				Timeout:       scaled(60 * time.Second),
				OnStateChange: g.onStateChange,
			})
			return g
		}},
		// failsafe-go takes one thresholding rule per breaker: failsafe has
		// our ratio rule, failsafe-consecutive our consecutive one, and
		// failsafe-period an absolute count of failures in the window, the
		// rule that turns a blip into rejections. Its delay is fixed (the
		// delay function it also takes is only called with an execution,
		// which its raw permits do not have): our first open time, ±10%.
		// WithSuccessThreshold(3): 3 probes; 3 successes close it, and a
		// failure opens it again, as ours.
		impl[func() scenarioBreaker]{"failsafe", func() scenarioBreaker {
			return newFailsafeScenario(func(b fsbreaker.Builder[any]) fsbreaker.Builder[any] {
				return b.WithFailureRateThreshold(0.5, 20, scaled(10*time.Second))
			})
		}},
		impl[func() scenarioBreaker]{"failsafe-consecutive", func() scenarioBreaker {
			return newFailsafeScenario(func(b fsbreaker.Builder[any]) fsbreaker.Builder[any] {
				return b.WithFailureThreshold(5)
			})
		}},
		impl[func() scenarioBreaker]{"failsafe-period", func() scenarioBreaker {
			return newFailsafeScenario(func(b fsbreaker.Builder[any]) fsbreaker.Builder[any] {
				return b.WithFailureThresholdPeriod(5, scaled(10*time.Second))
			})
		}},
	)
}

// gobreakerScenario is a sony/gobreaker CircuitBreaker under
// TestBreakerScenarios, called through Execute.
type gobreakerScenario struct {
	cb     *gobreaker.CircuitBreaker[struct{}]
	opened atomic.Int64
}

func (g *gobreakerScenario) onStateChange(_ string, from, to gobreaker.State) {
	if from == gobreaker.StateClosed && to == gobreaker.StateOpen {
		g.opened.Add(1)
	}
}

func (g *gobreakerScenario) call(backend func() error) bool {
	_, err := g.cb.Execute(func() (struct{}, error) { return struct{}{}, backend() })
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}

func (g *gobreakerScenario) trips() int64 { return g.opened.Load() }

// failsafeScenario is a failsafe-go CircuitBreaker under
// TestBreakerScenarios, called through its raw permits.
type failsafeScenario struct {
	cb     fsbreaker.CircuitBreaker[any]
	opened atomic.Int64
}

// newFailsafeScenario builds the breaker with the thresholding rule that
// rule sets and the settings every failsafe row shares.
func newFailsafeScenario(rule func(fsbreaker.Builder[any]) fsbreaker.Builder[any]) *failsafeScenario {
	f := &failsafeScenario{}
	f.cb = rule(fsbreaker.NewBuilder[any]()).
		WithDelay(scaled(time.Second)).WithJitterFactor(0.1).
		WithSuccessThreshold(3).
		OnStateChanged(func(e fsbreaker.StateChangedEvent) {
			if e.OldState == fsbreaker.ClosedState && e.NewState == fsbreaker.OpenState {
				f.opened.Add(1)
			}
		}).
		Build()
	return f
}

func (f *failsafeScenario) call(backend func() error) bool {
	if !f.cb.TryAcquirePermit() {
		return true
	}
	f.cb.RecordError(backend())
	return false
}

func (f *failsafeScenario) trips() int64 { return f.opened.Load() }
