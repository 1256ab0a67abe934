package backoff

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadyFIFOOrderAcrossChunks(t *testing.T) {
	var r readyFIFO[int]
	next, want := 0, 0
	// Grow over many chunks, drain partly, grow again: the order holds
	// and every chunk but the tail and one spare is let go.
	for _, burst := range []struct{ push, pop int }{{5_000, 3_000}, {10, 2_000}, {7_000, 7_010}, {1, 1}} {
		for range burst.push {
			r.push(next, uint64(next), int64(next))
			next++
		}
		for range burst.pop {
			e := r.pop()
			require.Equal(t, want, e.item)
			require.Equal(t, int64(want), e.at)
			want++
		}
		require.Equal(t, next-want, r.len())
	}
	assert.Zero(t, r.len())
	assert.Same(t, r.head, r.tail)
	chunks := 0
	for c := r.head; c != nil; c = c.next {
		chunks++
	}
	assert.Equal(t, 1, chunks)
}
