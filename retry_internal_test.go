package backoff

import (
	"errors"
	"fmt"
	"github.com/stretchr/testify/assert"
	"io"
	"math"
	"testing"
	"time"
)

// TestElapsedSaturates: elapsed is to-from where that fits, and the nearest
// representable duration where it does not.
func TestElapsedSaturates(t *testing.T) {
	minDuration := time.Duration(math.MinInt64)
	for _, tc := range []struct{ to, from, want time.Duration }{
		{5, 3, 2},
		{3, 5, -2},
		{5, -3, 8},
		{-5, 3, -8},
		{-5, -3, -2},
		{0, 0, 0},
		{maxDuration, 0, maxDuration},
		{maxDuration, -1, maxDuration},          // overflows upwards
		{maxDuration - 1, -1, maxDuration},      // just fits
		{minDuration, 1, minDuration},           // overflows downwards
		{minDuration + 1, 1, minDuration},       // just fits
		{minDuration, maxDuration, minDuration}, // far below
		{maxDuration, minDuration, maxDuration}, // far above
		{minDuration, minDuration, 0},
	} {
		assert.Equal(t, tc.want, elapsed(tc.to, tc.from), "elapsed(%d, %d)", tc.to, tc.from)
	}
}

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
