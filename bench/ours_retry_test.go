package bench

import (
	"context"
	"time"

	"github.com/retrykit/backoff"
)

func init() {
	retryImpls = append(retryImpls,
		impl[retryFunc]{"ours", func(attempts int, delay time.Duration, fn func() error) error {
			return backoff.Retry(context.Background(), backoff.Schedule{Duration: delay, Factor: 1, Steps: attempts},
				func(context.Context) error { return fn() })
		}},
	)
}
