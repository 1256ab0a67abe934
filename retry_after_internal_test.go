package backoff

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestInspectErrorAllocatesNothingWithoutAsMethods: Retry classifies every
// failed attempt; it consults As methods, which may allocate, only for the
// errors of the chain that have one, so a plain chain costs nothing.
func TestInspectErrorAllocatesNothingWithoutAsMethods(t *testing.T) {
	err := fmt.Errorf("get: %w", errors.Join(io.EOF, RetryAfter(time.Second, io.ErrUnexpectedEOF)))
	allocs := testing.AllocsPerRun(100, func() {
		if p, h, ok := inspectError(err); p || !ok || h != time.Second {
			t.Fatal("wrong classification")
		}
	})
	if allocs != 0 {
		t.Errorf("inspectError allocated %v times per call, want 0", allocs)
	}
}
