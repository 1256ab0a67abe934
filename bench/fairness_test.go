package bench

import (
	"strconv"
	"testing"

	"github.com/retrykit/backoff"
)

// fairKeys are the 1,000 tenants of BenchmarkQueueAddGetDoneFairness: item
// i belongs to fairKeys[i%1000], as reconcile.Requests belong to their
// namespace.
var fairKeys = func() []string {
	ks := make([]string, 1000)
	for i := range ks {
		ks[i] = "ns-" + strconv.Itoa(i)
	}
	return ks
}()

func fairKey(i int) string { return fairKeys[uint(i)%uint(len(fairKeys))] }

// fairnessImpls are ours only: client-go's queue and controller-runtime's
// priority queue have no fairness. The reference is ours without it, in
// the same benchmark (keys=none).
var fairnessImpls = []impl[func(fair bool) *backoff.Queue[int]]{
	{"ours", func(fair bool) *backoff.Queue[int] {
		if fair {
			return backoff.NewQueue[int](backoff.WithFairness(fairKey))
		}
		return backoff.NewQueue[int]()
	}},
}

// BenchmarkQueueAddGetDoneFairness is Add+Get+Done over a backlog of 1,000
// items, with WithFairness over 1,000 keys (round-robin across them) and
// without (keys=none, plain FIFO): what fairness costs.
func BenchmarkQueueAddGetDoneFairness(b *testing.B) {
	forEach(b, fairnessImpls, func(b *testing.B, mk func(fair bool) *backoff.Queue[int]) {
		for _, fair := range []bool{false, true} {
			name := "keys=none"
			if fair {
				name = "keys=1000"
			}
			b.Run(name+"/mode=serial", func(b *testing.B) {
				b.ReportAllocs()
				q := mk(fair)
				for i := range prioBacklog {
					q.Add(-1 - i)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					q.Add(i)
					item, _ := q.Get()
					q.Done(item)
				}
				b.StopTimer()
				q.ShutDown()
			})
			b.Run(name+"/mode=2p2w", func(b *testing.B) {
				b.ReportAllocs()
				q := mk(fair)
				run2p2w(b, q, func(i int) { q.Add(i) })
			})
		}
	})
}
