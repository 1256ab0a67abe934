package bench

import "github.com/retrykit/backoff"

func init() {
	backoffImpls = append(backoffImpls,
		impl[func() perKeyBackoff]{"ours", func() perKeyBackoff {
			return backoff.NewBackOff(backoffInitial, backoffMax)
		}},
	)
}
