package backoff

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff/internal/keytable"
)

// TestKeyedLimiterTableBound: every part of a limiter stops adding keys at
// its table's bound (keytable.MaxLen) even without WithMaxKeys or with a
// larger one, and a bound below it is split as before.
func TestKeyedLimiterTableBound(t *testing.T) {
	k := NewKeyedLimiter[int](1, 1)
	for i := range k.shards {
		assert.Equal(t, keytable.MaxLen, k.shards[i].maxKeys, "part %d", i)
	}
	k = NewKeyedLimiter[int](1, 1, WithMaxKeys(1<<62))
	for i := range k.shards {
		assert.LessOrEqual(t, k.shards[i].maxKeys, keytable.MaxLen, "part %d", i)
		assert.GreaterOrEqual(t, k.shards[i].maxKeys, min(1<<62/len(k.shards), keytable.MaxLen), "part %d", i)
	}
	k = NewKeyedLimiter[int](1, 1, WithMaxKeys(5000))
	sum := 0
	for i := range k.shards {
		sum += k.shards[i].maxKeys
	}
	assert.Equal(t, 5000, sum)
}

// TestKeyedLimiterAtTheTableBound: parts that reach their table's bound
// send new keys to the shared bucket, as WithMaxKeys does: no panic, and
// the keys beyond it together get one key's burst, not one each. The bound
// is lowered here to what a test can fill.
func TestKeyedLimiterAtTheTableBound(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
	k := NewKeyedLimiter[string](1, 3, WithClock(clk))
	const perPart = 4
	for i := range k.shards {
		k.shards[i].maxKeys = perPart
	}
	held := len(k.shards) * perPart
	admitted := 0
	for i := range 10_000 {
		require.NotPanics(t, func() {
			if k.Allow(fmt.Sprint("key-", i)) {
				admitted++
			}
		})
	}
	assert.Equal(t, held, k.Len())
	assert.Equal(t, held+3, admitted, "each held key once, and the shared bucket's burst of 3")
}
