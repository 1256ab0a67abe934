package tagword

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBucketsForIsTheSmallest pins BucketsFor at the sizes where n entries
// fill exactly half the slots: that size is the answer, not the next one.
func TestBucketsForIsTheSmallest(t *testing.T) {
	for n, want := range map[int]int{0: 1, 1: 1, 3: 1, 4: 2, 7: 2, 8: 4, 14: 4, 15: 8, 28: 8, 29: 16} {
		assert.Equal(t, want, BucketsFor(n), "BucketsFor(%d)", n)
	}
}
