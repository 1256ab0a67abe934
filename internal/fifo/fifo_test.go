package fifo_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff/internal/fifo"
)

func TestOrderAcrossChunks(t *testing.T) {
	var q fifo.Queue[int]
	next, want := 0, 0
	// Grow over many chunks, drain partly, grow again: the order holds
	// and every chunk but the tail and one spare is let go.
	for _, burst := range []struct{ push, pop int }{{5_000, 3_000}, {10, 2_000}, {7_000, 7_010}, {1, 1}} {
		for range burst.push {
			q.Push(next)
			next++
		}
		for range burst.pop {
			require.Equal(t, want, q.Pop())
			want++
		}
		require.Equal(t, next-want, q.Len())
	}
	assert.Zero(t, q.Len())
	assert.LessOrEqual(t, q.Cap(), 2*fifo.MaxChunk, "one chunk and at most one spare")
}

// FuzzAgainstASlice pushes and pops as the bytes say (odd: push, even: pop)
// and compares with a slice.
func FuzzAgainstASlice(f *testing.F) {
	f.Add([]byte{1, 1, 1, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var q fifo.Queue[int]
		var model []int
		for k, op := range ops {
			for range int(op>>1) + 1 { // runs of up to 128, to cross chunks
				if op&1 == 1 {
					q.Push(k)
					model = append(model, k)
				} else if len(model) > 0 {
					require.Equal(t, model[0], q.Pop())
					model = model[1:]
				}
			}
			require.Equal(t, len(model), q.Len())
		}
	})
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	var q fifo.Queue[string]
	q.Push("a")
	q.Pop()
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		for range 10 {
			q.Push("x")
		}
		for range 10 {
			q.Pop()
		}
	}))
}

// BenchmarkPushPop keeps 1,000 values queued and pushes and pops one.
func BenchmarkPushPop(b *testing.B) {
	var q fifo.Queue[int]
	for i := range 1000 {
		q.Push(i)
	}
	b.ReportAllocs()
	for i := range b.N {
		q.Push(i)
		q.Pop()
	}
}
