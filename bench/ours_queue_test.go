package bench

import "github.com/retrykit/backoff"

func init() {
	queueImpls = append(queueImpls,
		impl[func() queue]{"ours", func() queue {
			return backoff.NewRateLimitingQueue[int](backoff.DefaultControllerRateLimiter[int]())
		}},
	)
}
