package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

func TestNewConfig(t *testing.T) {
	assert.Equal(t, clock.RealClock{}, newConfig(nil).clock, "the real clock by default")

	start := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	fc := testingclock.NewFakeClock(start)
	other := testingclock.NewFakeClock(start)
	c := newConfig([]Option{WithClock(other), nil, WithClock(fc)})
	assert.Same(t, fc, c.clock, "nil options are skipped and the last option wins")

	assert.PanicsWithValue(t, "backoff: WithClock: c must not be nil, got <nil>", func() { WithClock(nil) })
	// A typed nil passes c == nil and used to crash on first use.
	var nilFake *testingclock.FakeClock
	assert.PanicsWithValue(t, "backoff: WithClock: c must not be nil, got <nil>", func() { WithClock(nilFake) })
}

func TestNewConfigWithoutOptionsDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() { _ = newConfig(nil) })
	assert.Zero(t, allocs)
}
