//go:build go1.25

package backoff_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// bubbleTimeout is how long, in real time, a synctest bubble may run before
// the test binary panics. Inside a bubble, time is virtual, and it only
// advances when every goroutine of the bubble is durably blocked; a goroutine
// waiting on a sync.Cond or a mutex (a Get for an item that never becomes
// due) is not, so a bug there hangs the bubble with its clock stopped, until
// go test's timeout. A wait helper cannot help there (its timer would be
// virtual too): this watchdog is armed outside the bubble, and on expiry
// panics with the test's name, and the goroutine dump shows where the
// bubble is stuck. A safety net, not a timing assertion: these bubbles take
// milliseconds.
const bubbleTimeout = 4 * waitTimeout

// bubble runs f in a synctest bubble, as synctest.Test does, under the
// watchdog described at bubbleTimeout.
func bubble(t *testing.T, f func(*testing.T)) {
	t.Helper()
	name := t.Name()
	watchdog := time.AfterFunc(bubbleTimeout, func() {
		panic(fmt.Sprintf("%s: the synctest bubble did not end within %v real time: a goroutine of the bubble is blocked on something that does not advance its virtual clock (a Get, a lock, a sync.Cond); see its stack below", name, bubbleTimeout))
	})
	defer watchdog.Stop()
	synctest.Test(t, f)
}
