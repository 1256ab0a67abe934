package backoff_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/backoff"
)

// benchKeys are 1,000 keys shaped like a controller's namespace/name keys.
var benchKeys = func() []string {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("default/object-%d", i)
	}
	return keys
}()

// benchLimiter runs op over benchKeys, serially and from parallel goroutines
// that start at different keys (any worker may fail any item).
func benchLimiter(b *testing.B, op func(key string)) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			op(benchKeys[i%len(benchKeys)])
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var start atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(397))
			for pb.Next() {
				op(benchKeys[i%len(benchKeys)])
				i++
			}
		})
	})
}

func BenchmarkItemExponentialWhen(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []backoff.Option
	}{
		{"plain", nil},
		{"jitter", []backoff.Option{backoff.WithRequeueJitter(0.1)}},
		{"bounded", []backoff.Option{backoff.WithMaxTrackedItems(2000)}},
		// Half the keys fit: every When drops the least recently failed key.
		{"evicting", []backoff.Option{backoff.WithMaxTrackedItems(500)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second, bc.opts...)
			benchLimiter(b, func(k string) { l.When(k) })
		})
	}
}

func BenchmarkItemFastSlowWhen(b *testing.B) {
	l := backoff.NewItemFastSlowRateLimiter[string](5*time.Millisecond, 10*time.Second, 3)
	benchLimiter(b, func(k string) { l.When(k) })
}

func BenchmarkBucketWhen(b *testing.B) {
	// The real clock: reading it is most of the cost.
	l := backoff.NewBucketRateLimiter[string](10, 100)
	benchLimiter(b, func(k string) { l.When(k) })
}

func BenchmarkMaxOfWhen(b *testing.B) {
	l := backoff.NewMaxOfRateLimiter[string](
		backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
		backoff.NewItemFastSlowRateLimiter[string](5*time.Millisecond, 10*time.Second, 3),
	)
	benchLimiter(b, func(k string) { l.When(k) })
}

func BenchmarkWithMaxWaitWhen(b *testing.B) {
	l := backoff.NewWithMaxWaitRateLimiter[string](
		backoff.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second), time.Minute)
	benchLimiter(b, func(k string) { l.When(k) })
}

func BenchmarkDefaultControllerWhenForget(b *testing.B) {
	l := backoff.DefaultControllerRateLimiter[string]()
	benchLimiter(b, func(k string) {
		l.When(k)
		l.Forget(k)
	})
}
