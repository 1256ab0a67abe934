package controllerruntime_test

import (
	"errors"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var errNotYet = errors.New("not yet")

// A real controller-runtime controller, on a backoff queue and limiter,
// retries a failing reconcile with the default limiter's delays (5 ms,
// 10 ms, 20 ms, …), stops retrying when it succeeds, and leaves the item
// forgotten. With a fake clock the test checks each delay exactly; with the
// real clock (the short delays really pass) it checks the same counts.
func TestControllerRequeuesUntilSuccess(t *testing.T) {
	const failures = 4
	for _, tc := range []struct {
		name string
		fake bool
	}{
		{"fake clock", true},
		{"real clock", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clk clock.WithDelayedExecution = clock.RealClock{}
			fake := testingclock.NewFakeClock(epoch)
			if tc.fake {
				clk = fake
			}
			h := startController(t, clk, func(attempt int) (reconcile.Result, error) {
				if attempt <= failures {
					return reconcile.Result{}, errNotYet
				}
				return reconcile.Result{}, nil
			})
			h.send(t)

			for attempt := 1; attempt <= failures; attempt++ {
				h.nextCall(t, attempt)
				h.nextDone(t) // the controller has called AddRateLimited, then Done
				if got := h.queue.NumRequeues(want); got != attempt {
					t.Fatalf("after failure %d: NumRequeues = %d", attempt, got)
				}
				if got := h.metric(t, "workqueue_retries_total"); got != float64(attempt) {
					t.Errorf("after failure %d: workqueue_retries_total = %v", attempt, got)
				}
				if !tc.fake {
					continue // the delay passes by itself
				}
				delay := 5 * time.Millisecond << (attempt - 1)
				at, waits := h.queue.NextReadyAt()
				if !waits || !at.Equal(fake.Now().Add(delay)) {
					t.Fatalf("after failure %d: NextReadyAt = %v, %v; want now+%v", attempt, at, waits, delay)
				}
				if got := h.metric(t, "workqueue_depth"); got != 0 {
					t.Errorf("after failure %d: workqueue_depth = %v while the item waits", attempt, got)
				}
				fake.Step(delay - time.Nanosecond)
				if n := h.queue.Len(); n != 0 {
					t.Fatalf("after failure %d: queued %v before its delay ran out", attempt, n)
				}
				fake.Step(time.Nanosecond)
			}

			h.nextCall(t, failures+1) // succeeds
			h.nextDone(t)
			if got := h.queue.NumRequeues(want); got != 0 {
				t.Errorf("after success: NumRequeues = %d, want 0 (forgotten)", got)
			}
			if got := h.limiter.NumRequeues(want); got != 0 {
				t.Errorf("after success: the limiter's NumRequeues = %d, want 0", got)
			}
			if _, waits := h.queue.NextReadyAt(); waits || h.queue.Len() != 0 {
				t.Errorf("after success: the item is still queued or waiting")
			}
			for metric, value := range map[string]float64{
				"workqueue_adds_total":              failures + 1,
				"workqueue_retries_total":           failures,
				"workqueue_depth":                   0,
				"workqueue_unfinished_work_seconds": 0,
			} {
				if got := h.metric(t, metric); got != value {
					t.Errorf("after success: %s = %v, want %v", metric, got, value)
				}
			}

			if err := h.stop(); err != nil {
				t.Fatalf("Start returned %v", err)
			}
			if !h.queue.ShuttingDown() {
				t.Error("the controller did not shut its queue down")
			}
			select {
			case c := <-h.calls:
				t.Errorf("an extra Reconcile after success: attempt %d", c.attempt)
			default:
			}
		})
	}
}

// A RequeueAfter result makes the controller forget the item's failures
// and add it back after exactly that delay, on the backoff queue.
func TestControllerRequeueAfter(t *testing.T) {
	const period = time.Minute
	fake := testingclock.NewFakeClock(epoch)
	h := startController(t, fake, func(attempt int) (reconcile.Result, error) {
		switch attempt {
		case 1:
			return reconcile.Result{}, errNotYet
		case 2:
			return reconcile.Result{RequeueAfter: period}, nil
		default:
			return reconcile.Result{}, nil
		}
	})
	h.send(t)

	h.nextCall(t, 1) // fails
	h.nextDone(t)
	if got := h.queue.NumRequeues(want); got != 1 {
		t.Fatalf("after the failure: NumRequeues = %d, want 1", got)
	}
	fake.Step(5 * time.Millisecond)

	h.nextCall(t, 2) // asks to come back in a minute
	h.nextDone(t)
	if got := h.queue.NumRequeues(want); got != 0 {
		t.Errorf("after RequeueAfter: NumRequeues = %d, want 0 (forgotten)", got)
	}
	at, waits := h.queue.NextReadyAt()
	if !waits || !at.Equal(fake.Now().Add(period)) {
		t.Fatalf("after RequeueAfter: NextReadyAt = %v, %v; want now+%v", at, waits, period)
	}
	if got := h.metric(t, "workqueue_retries_total"); got != 2 {
		t.Errorf("workqueue_retries_total = %v, want 2 (AddRateLimited, AddAfter)", got)
	}
	fake.Step(period)

	h.nextCall(t, 3)
	h.nextDone(t)
	if _, waits := h.queue.NextReadyAt(); waits || h.queue.Len() != 0 {
		t.Errorf("after success: the item is still queued or waiting")
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Start returned %v", err)
	}
}

// An event for an item that waits for its retry runs it now, once: the
// backoff queue takes the item out of the wait (kubernetes#126027), so the
// retry does not run it a second time, and the failure count stays until a
// success.
func TestControllerEventDuringBackoff(t *testing.T) {
	fake := testingclock.NewFakeClock(epoch)
	h := startController(t, fake, func(attempt int) (reconcile.Result, error) {
		if attempt == 1 {
			return reconcile.Result{}, errNotYet
		}
		return reconcile.Result{}, nil
	})
	h.send(t)
	h.nextCall(t, 1) // fails: waits 5 ms
	h.nextDone(t)
	if _, waits := h.queue.NextReadyAt(); !waits {
		t.Fatal("the failed item does not wait")
	}

	h.send(t) // a new event, before the 5 ms have passed
	h.nextCall(t, 2)
	h.nextDone(t)
	if _, waits := h.queue.NextReadyAt(); waits {
		t.Error("the item still waits for its retry after it ran")
	}
	fake.Step(time.Hour)
	if n := h.queue.Len(); n != 0 {
		t.Errorf("Len = %d after the retry's time: the retry was not cancelled", n)
	}
	if got := h.queue.NumRequeues(want); got != 0 {
		t.Errorf("NumRequeues = %d after success, want 0", got)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Start returned %v", err)
	}
	select {
	case c := <-h.calls:
		t.Errorf("an extra Reconcile: attempt %d", c.attempt)
	default:
	}
}
