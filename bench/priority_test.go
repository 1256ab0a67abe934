package bench

import (
	"sync"
	"testing"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/internal/fifo"
)

// prioQueue is a queue that adds at a priority: ours and controller-runtime's
// priority queue; client-go's queue, which has no priorities, adds plainly
// (what priorities cost against a plain queue).
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
	{"floor", func() prioQueue { return newHandoffFloor() }},
}

// handoffFloor is the floor of the priority rows (impl=floor): the hand-off
// that any queue built on one mutex and a condition variable pays, and
// nothing else. It keeps the two levels the rows use as two FIFOs (the
// chunked ones our queue uses, which never copy what they hold) and wakes
// one getter per Add; it does not de-duplicate, keeps no state per item
// and has no other priority. It is no work queue: the rows' difference
// between it and a real queue is the cost of the per-item state that
// de-duplication and "never two workers on one item" need.
type handoffFloor struct {
	mu       sync.Mutex
	cond     sync.Cond
	levels   [2]fifo.Queue[int] // priority 0, then any lower priority
	shutdown bool
}

func newHandoffFloor() *handoffFloor {
	q := new(handoffFloor)
	q.cond.L = &q.mu
	return q
}

func (q *handoffFloor) AddAt(item, prio int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	l := 0
	if prio < 0 {
		l = 1
	}
	q.levels[l].Push(item)
	q.cond.Signal()
}

func (q *handoffFloor) Get() (item int, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.levels[0].Len()+q.levels[1].Len() == 0 && !q.shutdown {
		q.cond.Wait()
	}
	for l := range q.levels {
		if q.levels[l].Len() > 0 {
			return q.levels[l].Pop(), false
		}
	}
	return 0, true
}

// Done takes and releases the lock: the least a Done that has to look at
// shared state pays.
func (q *handoffFloor) Done(int) {
	q.mu.Lock()
	//lint:ignore SA2001 the lock round trip is what is measured
	q.mu.Unlock()
}

func (q *handoffFloor) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.cond.Broadcast()
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
		b.Run("mode=2p2w-depth1000", func(b *testing.B) {
			b.ReportAllocs()
			q := mk()
			run2p2wDepth(b, q, func(i int) { q.AddAt(i, prioOf(i/2)) }, prioBacklog)
		})
	})
}
