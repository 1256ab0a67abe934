package grpcbackoff_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// epoch is where every fake clock of these tests starts.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// TestMain fails the run if any test leaves a goroutine running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
