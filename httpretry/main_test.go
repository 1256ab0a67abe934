package httpretry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine running, such as a
// connection of a test server that was never closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
