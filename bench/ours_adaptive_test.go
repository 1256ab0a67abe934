package bench

import (
	"context"
	"time"

	"github.com/retrykit/backoff"
)

func init() {
	adaptiveLimiterImpls = append(adaptiveLimiterImpls,
		impl[func(limiterConfig) adaptiveLimiter]{"ours", func(c limiterConfig) adaptiveLimiter {
			var opts []backoff.Option
			if c.minLimit > 0 {
				opts = append(opts, backoff.WithMinLimit(c.minLimit))
			}
			return oursAdaptiveLimiter{backoff.NewAdaptiveLimiter(opts...)}
		}},
	)
	throttlerImpls = append(throttlerImpls,
		impl[func(time.Duration) throttler]{"ours", func(window time.Duration) throttler {
			return backoff.NewThrottler(throttlerK, window)
		}},
	)
	adaptivePacerImpls = append(adaptivePacerImpls,
		impl[func(pacerConfig) adaptivePacer]{"ours", func(c pacerConfig) adaptivePacer {
			if c.unlimitedStart {
				return oursAdaptivePacer{backoff.NewAdaptiveRate(backoff.WithInitialRate(backoff.InfLimit))}
			}
			return oursAdaptivePacer{backoff.NewAdaptiveRate()}
		}},
	)
}

// oursAdaptiveLimiter returns our permits in a permit value.
type oursAdaptiveLimiter struct{ l *backoff.AdaptiveLimiter }

func (o oursAdaptiveLimiter) TryAcquire() (permit, bool) {
	p, ok := o.l.TryAcquire()
	return permit{ours: p}, ok
}

func (o oursAdaptiveLimiter) Acquire(ctx context.Context) (permit, error) {
	p, err := o.l.Acquire(ctx)
	return permit{ours: p}, err
}

func (o oursAdaptiveLimiter) Limit() int { return o.l.Limit() }

// oursAdaptivePacer hands out attempts that report to our AdaptiveRate.
type oursAdaptivePacer struct{ r *backoff.AdaptiveRate }

func (o oursAdaptivePacer) Allow() (rateAttempt, bool) {
	return rateAttempt{ours: o.r}, o.r.Allow()
}

func (o oursAdaptivePacer) Wait(ctx context.Context) (rateAttempt, error) {
	return rateAttempt{ours: o.r}, o.r.Wait(ctx)
}
