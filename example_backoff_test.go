package backoff_test

import (
	"fmt"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// A Backoff gates a retry per id: each failure doubles the id's delay, up to
// the maximum.
func ExampleNewBackOff() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	b := backoff.NewBackOff(10*time.Second, 300*time.Second, backoff.WithClock(clock))

	for range 7 {
		b.Next("default/web_app", clock.Now()) // the container crashed
		fmt.Printf("attempt %d: wait %v\n", b.Attempts("default/web_app"), b.Get("default/web_app"))
	}
	// Output:
	// attempt 1: wait 10s
	// attempt 2: wait 20s
	// attempt 3: wait 40s
	// attempt 4: wait 1m20s
	// attempt 5: wait 2m40s
	// attempt 6: wait 5m0s
	// attempt 7: wait 5m0s
}

// IsInBackOffSince tells whether work that failed at some time must still
// wait: this is how kubelet decides to restart a crashed container.
func ExampleBackoff_IsInBackOffSince() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	b := backoff.NewBackOff(5*time.Second, time.Minute, backoff.WithClock(clock))
	const id = "sync-job"

	failedAt := clock.Now()
	b.Next(id, failedAt) // 5 s from now
	for _, after := range []time.Duration{time.Second, 4 * time.Second, 5 * time.Second} {
		clock.SetTime(failedAt.Add(after))
		fmt.Printf("%v after the failure: in backoff %v\n", after, b.IsInBackOffSince(id, failedAt))
	}

	// An entry not updated for more than 2×max expires: the next failure
	// starts again from the initial delay.
	clock.Step(2*time.Minute + time.Second)
	b.Next(id, clock.Now())
	fmt.Println("after a quiet spell:", b.Get(id))
	// Output:
	// 1s after the failure: in backoff true
	// 4s after the failure: in backoff true
	// 5s after the failure: in backoff false
	// after a quiet spell: 5s
}
