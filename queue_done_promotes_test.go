package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// Done queues the items that became due before it ahead of the item it
// queues again: a due item has been ready longer than an item re-added while
// it was processing. On a real clock the timer's callback can run late, after
// Done; frozenTimersClock never runs it, so the only promotion before the
// next Get is Done's own. A Done that skipped it would queue the re-added
// item first, and Get would promote the due one behind it.
func TestQueueDoneQueuesDueItemsFirst(t *testing.T) {
	clk := &frozenTimersClock{FakePassiveClock: testingclock.NewFakePassiveClock(epoch)}
	q := backoff.NewDelayingQueue[string](backoff.WithClock(clk))
	defer q.ShutDown()

	q.Add("re-added")
	item, _ := get(t, q.Get)
	require.Equal(t, "re-added", item)
	q.Add("re-added") // while it is processing: Done queues it
	q.AddAfter("due", time.Second)
	clk.SetTime(epoch.Add(time.Second)) // due; no timer fires

	q.Done("re-added")
	first, _ := get(t, q.Get)
	second, _ := get(t, q.Get)
	require.Equal(t, []string{"due", "re-added"}, []string{first, second},
		"the item due before Done is handed out first")
}
