package bench

import (
	"testing"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/retrykit/backoff"
)

// prioQueue is a queue that adds at a priority: ours and controller-runtime's
// priority queue; client-go's queue, which has no priorities, adds plainly
// (the comparison the issue asks for: priorities against a plain queue).
type prioQueue interface {
	AddAt(item, prio int)
	Get() (item int, shutdown bool)
	Done(item int)
	ShutDown()
}

type oursPrio struct {
	*backoff.RateLimitingQueue[int]
}

func (q oursPrio) AddAt(item, prio int) {
	q.AddWithOptions(backoff.AddOptions{Priority: prio}, item)
}

type crPrio struct {
	priorityqueue.PriorityQueue[int]
}

func (q crPrio) AddAt(item, prio int) {
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(prio)}, item)
}

type clientgoPlain struct {
	workqueue.TypedRateLimitingInterface[int]
}

func (q clientgoPlain) AddAt(item, _ int) { q.Add(item) }

var prioQueueImpls = []impl[func() prioQueue]{
	{"clientgo", func() prioQueue {
		return clientgoPlain{workqueue.NewTypedRateLimitingQueue[int](workqueue.DefaultTypedControllerRateLimiter[int]())}
	}},
	{"priorityqueue", func() prioQueue { return crPrio{priorityqueue.New[int]("")} }},
	{"ours", func() prioQueue {
		return oursPrio{backoff.NewRateLimitingQueue[int](backoff.DefaultControllerRateLimiter[int]())}
	}},
}

// prioBacklog is the number of items queued before the timed loop, half at
// each priority, so that Get chooses between two non-empty levels.
const prioBacklog = 1000

// prioOf puts every other item at controller-runtime's handler.LowPriority.
func prioOf(i int) int { return -100 * (i & 1) }

// BenchmarkQueueAddGetDonePriorities is BenchmarkQueueAddGetDone with two
// priority levels, half the items at -100, over a backlog: client-go's row
// adds the same items without priorities.
func BenchmarkQueueAddGetDonePriorities(b *testing.B) {
	forEach(b, prioQueueImpls, func(b *testing.B, mk func() prioQueue) {
		b.Run("mode=serial", func(b *testing.B) {
			b.ReportAllocs()
			q := mk()
			for i := range prioBacklog {
				q.AddAt(-1-i, prioOf(i))
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.AddAt(i, prioOf(i))
				item, _ := q.Get()
				q.Done(item)
			}
			b.StopTimer()
			q.ShutDown()
		})
		b.Run("mode=2p2w", func(b *testing.B) {
			b.ReportAllocs()
			q := mk()
			run2p2w(b, q, func(i int) { q.AddAt(i, prioOf(i/2)) })
		})
	})
}
