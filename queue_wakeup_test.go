//go:build go1.25

package backoff_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff"
)

// endedCtx is a context that ends when end is called but has no Done
// channel: GetContext then registers no callback to wake its getter, so the
// getter notices the end only when something else wakes it.
type endedCtx struct {
	context.Context
	err atomic.Pointer[error]
}

var errGetterGone = errors.New("getter gone")

func (c *endedCtx) end()                  { c.err.Store(&errGetterGone) }
func (c *endedCtx) Done() <-chan struct{} { return nil }
func (c *endedCtx) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// TestQueueEndedGetterPassesItsWakeupOn: the one Signal of an Add goes to
// the getter that has waited longest; if that getter's context has ended, it
// returns its error and must pass the wake-up on, or the item stays queued
// while another getter sleeps. Deterministic: the bubble orders the two
// getters' waits, and sync.Cond wakes the longest waiter first.
func TestQueueEndedGetterPassesItsWakeupOn(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewQueue[int]()
		defer q.ShutDown() // releases the plain getter if the wake-up was lost
		ctx := &endedCtx{Context: context.Background()}
		ended := make(chan error, 1)
		go func() {
			_, err := q.GetContext(ctx)
			ended <- err
		}()
		synctest.Wait() // the getter with the context waits first
		plain := getAsync[int](q)
		synctest.Wait()

		ctx.end()
		q.Add(1) // wakes the first getter, whose context has ended
		synctest.Wait()

		select {
		case err := <-ended:
			assert.ErrorIs(t, err, errGetterGone)
		default:
			t.Fatal("the getter whose context ended did not return")
		}
		select {
		case r := <-plain:
			assert.Equal(t, getResult[int]{item: 1}, r, "the other getter has the item")
		default:
			t.Error("the wake-up of Add(1) was lost: the item is queued and the other getter still waits")
			q.ShutDown()
			<-plain
		}
	})
}
