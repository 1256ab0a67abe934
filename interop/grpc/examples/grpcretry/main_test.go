package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrykit/backoff/backofftest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the program on a clock that takes no time to wait: the same
// attempts, at the Schedule's instants.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	clk := backofftest.NewAutoStepClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err := run(context.Background(), &out, clk); err != nil {
		t.Fatal(err)
	}
	want := `server: unary call 1 at 0s, previous attempts: -: UNAVAILABLE
client: attempt 1: Unavailable; next in 20ms
server: unary call 2 at 20ms, previous attempts: 1: UNAVAILABLE
client: attempt 2: Unavailable; next in 40ms
server: unary call 3 at 60ms, previous attempts: 2: UNAVAILABLE
client: attempt 3: Unavailable; next in 80ms
server: unary call 4 at 140ms, previous attempts: 3: UNAVAILABLE
client: attempt 4: Unavailable; next in 160ms
server: unary call 5 at 300ms, previous attempts: 4: UNAVAILABLE
client: attempt 5: Unavailable; next in 200ms
server: unary call 6 at 500ms, previous attempts: 5: UNAVAILABLE
client: attempt 6: Unavailable; next in 200ms
server: unary call 7 at 700ms, previous attempts: 6: UNAVAILABLE
client: attempt 7: Unavailable; next in 200ms
server: unary call 8 at 900ms, previous attempts: 7: OK
unary: "hello" at 900ms
stream: event 0
stream: event 1
stream: event 2
client: attempt 1: Unavailable; next in 20ms
stream: event 3
stream: event 4
stream: event 5
client: attempt 1: Unavailable; next in 20ms
stream: event 6
stream: event 7
stream: event 8
client: attempt 1: Unavailable; next in 20ms
stream: event 9
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
