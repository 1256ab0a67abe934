package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNextFlush: the scheduler's flush ticks on whole seconds; a pod ready
// exactly on a tick is seen by that tick, one ready a nanosecond after by the
// next (the demo's own pods are all ready between ticks).
func TestNextFlush(t *testing.T) {
	for ready, want := range map[time.Duration]time.Duration{
		0:                                     0,
		time.Nanosecond:                       time.Second,
		1300 * time.Millisecond:               2 * time.Second,
		2 * time.Second:                       2 * time.Second,
		2*time.Second + time.Nanosecond:       3 * time.Second,
		47*time.Second + 100*time.Millisecond: 48 * time.Second,
	} {
		assert.Equal(t, want, nextFlush(ready), "nextFlush(%v)", ready)
	}
}
