package backoff

import (
	"math/rand/v2"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestPriorityBookkeepingIsGivenBack checks that the priorities' maps and
// stale entries are gone once a queue has handed out everything: random
// adds with priorities, raises and re-adds while processing, then a drain.
func TestPriorityBookkeepingIsGivenBack(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		fc := testingclock.NewFakeClock(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
		q := NewDelayingQueue[int](WithClock(fc))
		rng := rand.New(rand.NewPCG(seed, 3))
		processing := map[int]bool{}
		for range 300 {
			x := rng.IntN(8)
			switch rng.IntN(5) {
			case 0, 1:
				q.AddWithOptions(AddOptions{Priority: []int{-100, 0, 0, 5}[rng.IntN(4)],
					After: time.Duration(rng.IntN(3)) * time.Millisecond}, x)
			case 2:
				if q.Len() > 0 {
					item, _ := q.Get()
					processing[item] = true
				}
			case 3:
				for item := range processing {
					q.Done(item)
					delete(processing, item)
					break
				}
			case 4:
				fc.Step(time.Millisecond)
			}
		}
		for item := range processing {
			q.Done(item)
		}
		fc.Step(time.Second)
		for q.Len() > 0 {
			item, _ := q.Get()
			q.Done(item)
		}
		q.mu.Lock()
		refs := 0
		for _, id := range q.prios.ids {
			refs += id.refs
		}
		if q.prios.pendingN != 0 || refs != 0 || len(q.prios.overflow) != 0 || len(q.prios.raised) != 0 ||
			q.prios.stale != 0 || len(q.prios.waiting) != 0 || q.ready.Len() != 0 || q.states.Len() != 0 {
			t.Fatalf("seed %d: pending %d, id refs %d, overflow %v, raised %v, stale %d, waiting %v, entries %d, states %d after the drain",
				seed, q.prios.pendingN, refs, q.prios.overflow, q.prios.raised, q.prios.stale, q.prios.waiting, q.ready.Len(), q.states.Len())
		}
		q.mu.Unlock()
		q.ShutDown()
	}
}
