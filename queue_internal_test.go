package backoff

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff/internal/fifo"
	"github.com/retrykit/backoff/internal/itemstate"
)

// TestQueueGivesMemoryBack checks that a queue's memory follows a burst
// down. Each Get comes after a Len that says an item is ready, and the
// drain makes as many Gets as there were Adds, so that a queue that loses an
// Add, or a Get that takes nothing, fails here at once instead of blocking or
// looping.
func TestQueueGivesMemoryBack(t *testing.T) {
	q := NewQueue[int]()
	for i := 0; i < 100_000; i++ {
		q.Add(i)
	}
	assert.Equal(t, 100_000, q.states.Len())
	assert.GreaterOrEqual(t, q.states.Slots(), 100_000)
	require.Equal(t, 100_000, q.Len())
	for range 100_000 {
		item, shutdown := q.Get()
		require.False(t, shutdown, "Get of a running queue with items queued")
		q.Done(item)
	}
	assert.Zero(t, q.Len())
	assert.Zero(t, q.states.Len())
	assert.LessOrEqual(t, q.ready.Cap(), 2*fifo.MaxChunk, "the FIFO is down to one chunk and at most one spare")

	q.Add(1)
	require.Equal(t, 1, q.Len(), "Add(1) queues 1")
	item, _ := q.Get()
	q.Done(item)
	assert.LessOrEqual(t, q.states.Slots(), itemstate.KeepSize, "the table of the burst was dropped")
	assert.Zero(t, testing.AllocsPerRun(10, func() {
		q.Add(2)
		if q.Len() != 1 {
			t.Fatalf("Add(2) left %d items queued, want 1", q.Len())
		}
		item, _ := q.Get()
		q.Done(item)
	}), "a small queue keeps its table: no allocation per cycle")
}
