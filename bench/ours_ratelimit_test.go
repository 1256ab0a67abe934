package bench

import (
	"time"

	"github.com/retrykit/backoff"
)

func init() {
	itemExpImpls = append(itemExpImpls,
		impl[func() limiter]{"ours", func() limiter {
			return backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second)
		}},
	)
	controllerImpls = append(controllerImpls,
		impl[func() limiter]{"ours", func() limiter {
			return backoff.DefaultControllerRateLimiter[string]()
		}},
	)
	bucketImpls = append(bucketImpls,
		impl[func() limiter]{"ours", func() limiter {
			return backoff.NewBucketRateLimiter[string](10, 100)
		}},
	)
}
