package bench

import (
	"context"
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
