package bench

import (
	"context"
	"time"

	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	fslimiter "github.com/failsafe-go/failsafe-go/adaptivelimiter"
	fsthrottler "github.com/failsafe-go/failsafe-go/adaptivethrottler"
)

// The anchors of the adaptive pacers, each as its users would build it:
// failsafe-go's builders with their defaults except where a comparison
// needs the same parameter on both sides (the minimum limit of
// BenchmarkAdaptivePermit, the throttler's k and window), and the AWS SDK's
// NewAdaptiveMode with its defaults.
func init() {
	adaptiveLimiterImpls = append(adaptiveLimiterImpls,
		impl[func(limiterConfig) adaptiveLimiter]{"failsafe", func(c limiterConfig) adaptiveLimiter {
			bld := fslimiter.NewBuilder[any]()
			if c.minLimit > 0 {
				bld = bld.WithLimits(uint(c.minLimit), 200, 20) // its default maximum and initial limit
			}
			if c.recentWindow > 0 {
				bld = bld.WithRecentWindow(c.recentWindow, 30*time.Second, 50) // its default maximum and samples
			}
			return failsafeAdaptiveLimiter{bld.Build()}
		}},
	)
	throttlerImpls = append(throttlerImpls,
		impl[func(time.Duration) throttler]{"failsafe", func(window time.Duration) throttler {
			// A failure-rate threshold of 1-1/k allows successes·k
			// executions: k = 2 as ours. No execution threshold; its
			// default maximum rejection rate, 0.9.
			return failsafeThrottler{fsthrottler.NewBuilder[any]().
				WithFailureRateThreshold(1-1.0/throttlerK, 0, window).Build()}
		}},
	)
	adaptivePacerImpls = append(adaptivePacerImpls,
		impl[func(pacerConfig) adaptivePacer]{"aws", func(c pacerConfig) adaptivePacer {
			// AWS's adaptive mode always starts with no limit.
			return awsAdaptivePacer{awsretry.NewAdaptiveMode(func(o *awsretry.AdaptiveModeOptions) {
				o.FailOnNoAttemptTokens = c.failFast
			})}
		}},
	)
}

// failsafeAdaptiveLimiter returns failsafe-go's permits in a permit value.
type failsafeAdaptiveLimiter struct {
	l fslimiter.AdaptiveLimiter[any]
}

func (f failsafeAdaptiveLimiter) TryAcquire() (permit, bool) {
	p, ok := f.l.TryAcquirePermit()
	return permit{failsafe: p}, ok
}

func (f failsafeAdaptiveLimiter) Acquire(ctx context.Context) (permit, error) {
	p, err := f.l.AcquirePermit(ctx)
	return permit{failsafe: p}, err
}

func (f failsafeAdaptiveLimiter) Limit() int { return f.l.Limit() }

// failsafeThrottler maps Allow and Record to failsafe-go's
// TryAcquirePermit, RecordSuccess and RecordFailure.
type failsafeThrottler struct {
	t fsthrottler.AdaptiveThrottler[any]
}

func (f failsafeThrottler) Allow() bool { return f.t.TryAcquirePermit() }

func (f failsafeThrottler) Record(accepted bool) {
	if accepted {
		f.t.RecordSuccess()
	} else {
		f.t.RecordFailure()
	}
}

// awsAdaptivePacer is the attempt-token side of the AWS SDK's AdaptiveMode:
// GetAttemptToken takes a token of its client-side rate limiter (a token
// bucket whose rate follows CUBIC), and the token's release reports the
// answer to it (and, on success, refills the standard retry quota, as in
// the SDK). Allow is GetAttemptToken on a mode built with
// FailOnNoAttemptTokens; Wait, on one without, which sleeps until a token
// is due.
type awsAdaptivePacer struct{ m *awsretry.AdaptiveMode }

func (a awsAdaptivePacer) Allow() (rateAttempt, bool) {
	release, err := a.m.GetAttemptToken(context.Background())
	return rateAttempt{release: release}, err == nil
}

func (a awsAdaptivePacer) Wait(ctx context.Context) (rateAttempt, error) {
	release, err := a.m.GetAttemptToken(ctx)
	return rateAttempt{release: release}, err
}
