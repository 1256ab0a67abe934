package bench

import (
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
