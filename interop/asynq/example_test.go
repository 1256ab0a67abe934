package asynqbackoff_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retrykit/backoff"
	asynqbackoff "github.com/retrykit/backoff/interop/asynq"
)

// An asynq server configured to retry failed tasks on the same Schedule as
// the service's in-process retries. The function is called directly here;
// asynq calls it after each failure, with the number of retries so far.
func ExampleRetryDelay() {
	schedule := backoff.Schedule{Duration: 30 * time.Second, Factor: 2, Cap: time.Hour}
	config := asynq.Config{RetryDelayFunc: asynqbackoff.RetryDelay(schedule)}

	task := asynq.NewTask("invoice:send", []byte(`{"id":42}`))
	for retried := 0; retried <= 8; retried += 2 {
		fmt.Printf("retried %d times: next in %v\n", retried, config.RetryDelayFunc(retried, errors.New("smtp: 421"), task))
	}
	// Output:
	// retried 0 times: next in 30s
	// retried 2 times: next in 2m0s
	// retried 4 times: next in 8m0s
	// retried 6 times: next in 32m0s
	// retried 8 times: next in 1h0m0s
}
