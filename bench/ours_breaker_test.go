package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/retrykit/backoff"
)

// retryBreakerSchedule is the schedule of the retried calls of
// BenchmarkRetryBreaker and BenchmarkHedgeNotFired: 5 attempts, 10 ms
// doubling (never waited on, since the first attempt succeeds).
var retryBreakerSchedule = backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5}

// succeedCtx is succeed as Retry's fn. It captures nothing, so that passing
// it allocates nothing.
func succeedCtx(context.Context) error { return succeed() }

func init() {
	breakerImpls = append(breakerImpls,
		impl[func() callFunc]{"ours", func() callFunc {
			br := backoff.NewBreaker()
			ctx := context.Background()
			return func() error {
				p, err := br.Allow()
				if err != nil {
					return err
				}
				p.Done(ctx, succeed())
				return nil
			}
		}},
	)
	retryBreakerImpls = append(retryBreakerImpls,
		impl[func() callFunc]{"ours", func() callFunc {
			br := backoff.NewBreaker()
			ctx := context.Background()
			return func() error {
				return backoff.Retry(ctx, retryBreakerSchedule, succeedCtx, backoff.WithPacer(br))
			}
		}},
	)
	hedgeImpls = append(hedgeImpls,
		impl[func() callFunc]{"ours", func() callFunc {
			ctx := context.Background()
			return func() error {
				return backoff.Retry(ctx, retryBreakerSchedule, succeedCtx, backoff.WithHedge(hedgeDelay))
			}
		}},
		impl[func() callFunc]{"nohedge", func() callFunc {
			ctx := context.Background()
			return func() error {
				return backoff.Retry(ctx, retryBreakerSchedule, succeedCtx)
			}
		}},
		impl[func() callFunc]{"plaintimer", func() callFunc {
			ctx := context.Background()
			return func() error {
				err := backoff.Retry(ctx, retryBreakerSchedule, succeedCtx)
				time.AfterFunc(hedgeDelay, noop).Stop()
				return err
			}
		}},
	)
}

func noop() {}

func init() {
	breakerScenarioImpls = append(breakerScenarioImpls,
		impl[func() scenarioBreaker]{"ours", func() scenarioBreaker {
			o := &oursScenarioBreaker{}
			// NewBreaker's defaults with every duration scaled: ratio 0.5
			// over at least 20 outcomes, 5 failures in a row, 3 probes, as
			// they are; the 10 s window and the 1 s, 2 s, 4 s (+10%) open
			// times divided by breakerScale.
			o.b = backoff.NewBreaker(
				backoff.WithBreakerWindow(scaled(10*time.Second)),
				backoff.WithBreakerOpenSchedule(backoff.Schedule{
					Duration: scaled(time.Second), Factor: 2, Jitter: 0.1, Cap: scaled(4 * time.Second),
				}),
				backoff.WithBreakerStateChange(func(from, to backoff.BreakerState) {
					if from == backoff.BreakerClosed && to == backoff.BreakerOpen {
						o.opened.Add(1)
					}
				}),
			)
			return o
		}},
	)
}

// oursScenarioBreaker is our Breaker under TestBreakerScenarios.
type oursScenarioBreaker struct {
	b      *backoff.Breaker
	opened atomic.Int64
}

func (o *oursScenarioBreaker) call(backend func() error) bool {
	p, err := o.b.Allow()
	if err != nil {
		if !errors.Is(err, backoff.ErrBreakerOpen) {
			panic(err)
		}
		return true
	}
	p.Done(context.Background(), backend())
	return false
}

func (o *oursScenarioBreaker) trips() int64 { return o.opened.Load() }
