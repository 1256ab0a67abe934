package fifo_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff/internal/fifo"
)

// TestCapIsTheChunksAndTheLargerSpare follows the memory of a queue through
// a burst, chunk by chunk: chunks double from 16 values, a chunk that
// empties goes, except the larger of it and the spare, which the next growth
// takes instead of allocating.
func TestCapIsTheChunksAndTheLargerSpare(t *testing.T) {
	var q fifo.Queue[int]
	assert.Zero(t, q.Cap(), "an empty queue holds no chunk")
	for i := range 16 + 32 + 64 { // chunks of 16, 32 and 64 values, all full
		q.Push(i)
	}
	assert.Equal(t, 16+32+64, q.Cap())
	for range 16 {
		q.Pop()
	}
	assert.Equal(t, 16+32+64, q.Cap(), "the emptied chunk of 16 is the spare")
	for range 32 {
		q.Pop()
	}
	assert.Equal(t, 32+64, q.Cap(), "the emptied chunk of 32 is the spare, the larger: the 16 goes")
	for range 32 {
		q.Push(0)
	}
	assert.Equal(t, 64+32, q.Cap(), "the next growth took the spare of 32 instead of allocating")
}
