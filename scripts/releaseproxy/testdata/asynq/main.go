// Program asynq is the release rehearsal's user of the module
// github.com/retrykit/backoff/interop/asynq: a RetryDelay asked, as asynq
// asks it, how long a task that was retried twice waits.
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retrykit/backoff"
	asynqbackoff "github.com/retrykit/backoff/interop/asynq"
)

func main() {
	config := asynq.Config{RetryDelayFunc: asynqbackoff.RetryDelay(
		backoff.Schedule{Duration: 30 * time.Second, Factor: 2, Cap: time.Hour})}
	task := asynq.NewTask("invoice:send", []byte(`{"id":42}`))
	if d := config.RetryDelayFunc(2, errors.New("smtp: 421"), task); d != 2*time.Minute {
		fail("retried twice: next in %v; want 2m0s", d)
	}
	fmt.Println("asynq.RetryDelay: retried twice, next in 2m0s")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "asynq: "+format+"\n", args...)
	os.Exit(1)
}
