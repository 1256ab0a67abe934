package backoff_test

import (
	"strconv"
	"testing"

	"github.com/retrykit/backoff"
)

// BenchmarkQueueAddGetDonePriorities measures Add+Get+Done over a backlog of
// 1,000 items: all at priority 0 without fairness (what every queue pays),
// half at -100 (two levels), and with WithFairness over 1,000 keys.
func BenchmarkQueueAddGetDonePriorities(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	fair := backoff.WithFairness(func(i int) string { return keys[uint(i)%1000] })
	for _, bc := range []struct {
		name string
		prio func(i int) int
		opts []backoff.Option
	}{
		{"levels=1", func(int) int { return 0 }, nil},
		{"levels=2", func(i int) int { return -100 * (i & 1) }, nil},
		{"levels=1/fairness=1000keys", func(int) int { return 0 }, []backoff.Option{fair}},
		{"levels=2/fairness=1000keys", func(i int) int { return -100 * (i & 1) }, []backoff.Option{fair}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			q := backoff.NewDelayingQueue[int](bc.opts...)
			defer q.ShutDown()
			for i := range 1000 {
				q.AddWithOptions(backoff.AddOptions{Priority: bc.prio(i)}, -1-i)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.AddWithOptions(backoff.AddOptions{Priority: bc.prio(i)}, i)
				item, _ := q.Get()
				q.Done(item)
			}
		})
	}
}
