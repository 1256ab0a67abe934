package main

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// The workqueue: a controller's requeue backoff, as the limiter computes it
// and as a controller-runtime 0.5 controller logged it, and the scheduler's
// pod backoff.

func init() {
	register("controller-requeue",
		"DefaultControllerRateLimiter through the queue: an item failing every time waits 5 ms, 10 ms, 20 ms … 655.36 s, then 1000 s",
		runLimiterSeries)
	register("controller-runtime-log",
		"controller-runtime 0.5's observed log: a worker restarted by Until(worker, 1s) after each error retries 1 s ×8, then 1.28, 2.56 … 163.84 s",
		runObservedLog)
	register("scheduler-podbackoff",
		"the scheduler's pod backoff, 1 s doubling to 10 s by attempts: the queue moves each pod to ready at its backoff's expiry",
		runPodBackoff)
}

// requeueEpoch is where the fake clocks of these timelines start.
var requeueEpoch = time.Date(2020, time.June, 30, 8, 14, 38, 0, time.UTC)

// seconds formats d as seconds, without trailing zeros: 0.005, 1.28, 1000.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// A limiterStep is one failure of the controller-requeue item: the delay the queue
// applied, and when the item became ready again.
type limiterStep struct {
	delay   time.Duration
	readyAt time.Duration // since requeueEpoch
}

// limiterSeries fails one item n times through a RateLimitingQueue with
// DefaultControllerRateLimiter, on a fake clock that jumps to each ready
// time, and records each delay.
func limiterSeries(n int) []limiterStep {
	fc := testingclock.NewFakeClock(requeueEpoch)
	q := backoff.NewRateLimitingQueue[string](backoff.DefaultControllerRateLimiter[string](backoff.WithClock(fc)),
		backoff.WithClock(fc))
	defer q.ShutDown()
	q.Add("default/cluster")
	var steps []limiterStep
	for len(steps) < n {
		item, _ := q.Get()
		failedAt := fc.Now()
		q.AddRateLimited(item) // the reconcile failed
		q.Done(item)
		at, _ := q.NextReadyAt()
		fc.SetTime(at)
		steps = append(steps, limiterStep{delay: at.Sub(failedAt), readyAt: at.Sub(requeueEpoch)})
	}
	return steps
}

func runLimiterSeries(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "failure\tdelay (s)\tready at (s)\t")
	for i, s := range limiterSeries(22) {
		fmt.Fprintf(tw, "%d\t%s\t%s\t\n", i+1, seconds(s.delay), seconds(s.readyAt))
	}
	tw.Flush()
	fmt.Fprintln(w, "5 ms·2^n from the item-exponential part; 2^18·5 ms = 1310.72 s is capped at 1000 s.")
	fmt.Fprintln(w, "The token bucket (10 qps, burst 100) never binds for a single item.")
	fmt.Fprintln(w, "Numbers: client-go workqueue's DefaultControllerRateLimiter (5 ms doubling to 1000 s per")
	fmt.Fprintln(w, "item, 10 qps with bursts of 100 overall), unchanged across client-go releases; it is")
	fmt.Fprintln(w, "controller-runtime's default limiter.")
}

// notifyingClock is a FakeClock that tells the timeline's driver when a loop
// helper starts waiting on a timer, and for how long: the driver may then
// step the clock, knowing that the helper has read it.
type notifyingClock struct {
	*testingclock.FakeClock
	armed chan<- time.Duration
	quit  <-chan struct{}
}

func (c *notifyingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.notify(d)
	return &notifyingTimer{Timer: t, c: c}
}

func (c *notifyingClock) notify(d time.Duration) {
	select {
	case c.armed <- d:
	case <-c.quit:
	}
}

type notifyingTimer struct {
	clock.Timer
	c *notifyingClock
}

func (t *notifyingTimer) Reset(d time.Duration) bool {
	active := t.Timer.Reset(d)
	t.c.notify(d)
	return active
}

// observedLog reproduces a controller's log: controller-runtime 0.5 started each
// worker with Until(worker, 1s); a worker's loop ended at the first failed
// reconcile (after AddRateLimited and Done), so Until restarted it 1 s
// later, and the restarted worker then blocked in Get until the item's delay
// had passed. It returns the times of the first n failures.
func observedLog(n int) []time.Duration {
	fc := testingclock.NewFakeClock(requeueEpoch)
	q := backoff.NewRateLimitingQueue[string](backoff.DefaultControllerRateLimiter[string](backoff.WithClock(fc)),
		backoff.WithClock(fc))
	armed := make(chan time.Duration)
	toGet := make(chan struct{})   // the worker is about to call Get…
	proceed := make(chan struct{}) // …and may, once the driver has let time pass
	quit := make(chan struct{})
	var mu sync.Mutex
	var failures []time.Duration

	// processNextWorkItem, as controller-runtime 0.5 had it: false ends the
	// worker's loop, and a failed reconcile returns false.
	processNextWorkItem := func() bool {
		select {
		case toGet <- struct{}{}:
			<-proceed
		case <-quit:
			return false
		}
		item, shutdown := q.Get()
		if shutdown {
			return false
		}
		mu.Lock()
		failures = append(failures, fc.Since(requeueEpoch)) // Reconcile returns an error
		mu.Unlock()
		q.AddRateLimited(item)
		q.Done(item)
		return false
	}
	worker := func() {
		for processNextWorkItem() {
		}
	}
	q.Add("default/cluster")
	done := make(chan struct{})
	go func() {
		defer close(done)
		backoff.Until(worker, time.Second, quit, backoff.WithClock(&notifyingClock{FakeClock: fc, armed: armed, quit: quit}))
	}()
	for {
		select {
		case d := <-armed: // Until waits for its period
			mu.Lock()
			enough := len(failures) >= n
			mu.Unlock()
			if enough {
				close(quit)
				q.ShutDown()
				<-done
				return failures[:n]
			}
			fc.Step(d)
		case <-toGet: // the worker calls Get: let time pass until the item is ready
			if at, waits := q.NextReadyAt(); waits && q.Len() == 0 {
				fc.SetTime(at)
			}
			proceed <- struct{}{}
		}
	}
}

func runObservedLog(w io.Writer) {
	failures := observedLog(17)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "failure\tat (s)\tsince previous (s)\tlimiter delay (s)\twaited for\t")
	for i, at := range failures {
		if i == 0 {
			fmt.Fprintf(tw, "%d\t%s\t\t\t\t\n", i+1, seconds(at))
			continue
		}
		gap := at - failures[i-1]
		delay := 5 * time.Millisecond << (i - 1)
		why := "Until's 1 s period"
		if delay > time.Second {
			why = "the limiter"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t\n", i+1, seconds(at), seconds(gap), seconds(delay), why)
	}
	tw.Flush()
	fmt.Fprintln(w, "The gaps such a controller logged on a real clock: 1.001, 1.000 … (8 gaps of about 1 s),")
	fmt.Fprintln(w, "then 1.280, 2.536, 5.120, 10.241, 20.480, 40.960, 81.921, 163.840 s.")
	fmt.Fprintln(w, "Numbers: controller-runtime 0.5 (for Kubernetes 1.17) started each worker with")
	fmt.Fprintln(w, "wait.Until(worker, 1s), and a worker returned after a failed reconcile; later versions")
	fmt.Fprintln(w, "keep the worker running, and follow the limiter alone (see controller-requeue).")
}

// A podAttempt is one failed scheduling attempt of the scheduler-podbackoff pod.
type podAttempt struct {
	attempt  int
	failedAt time.Duration // since requeueEpoch
	backoff  time.Duration
	readyAt  time.Duration // when the queue moved the pod to ready
	flushAt  time.Duration // when a 1 s flush, as the scheduler runs, would have
}

// podBackoffFor is the scheduler's per-pod backoff: 1 s·2^(attempts-1),
// capped at 10 s.
func podBackoffFor(attempts int) time.Duration {
	return min(time.Second<<min(attempts-1, 10), 10*time.Second)
}

// nextFlush returns when the scheduler's 1 s flush, ticking on whole
// seconds, first sees a pod that became ready at ready: at ready itself if it
// is a whole second.
func nextFlush(ready time.Duration) time.Duration {
	return (ready + time.Second - 1) / time.Second * time.Second
}

// podBackoff schedules one pod that fails every attempt; each attempt takes
// took. After a failure the pod waits in a DelayingQueue for its backoff; the
// queue hands it out again at the backoff's expiry.
func podBackoff(attempts int, took time.Duration) []podAttempt {
	fc := testingclock.NewFakeClock(requeueEpoch)
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	q.Add("default/web")
	var out []podAttempt
	for n := 1; n <= attempts; n++ {
		pod, _ := q.Get()
		fc.Step(took) // the scheduling cycle fails after this long
		failed := fc.Since(requeueEpoch)
		d := podBackoffFor(n)
		q.AddAfter(pod, d)
		q.Done(pod)
		at, _ := q.NextReadyAt()
		fc.SetTime(at)
		ready := fc.Since(requeueEpoch)
		out = append(out, podAttempt{attempt: n, failedAt: failed, backoff: d, readyAt: ready, flushAt: nextFlush(ready)})
		if q.Len() != 1 {
			panic("scheduler-podbackoff: the pod is not ready at its backoff's expiry")
		}
	}
	return out
}

func runPodBackoff(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "attempt\tfailed at (s)\tbackoff (s)\tready at (s)\t1 s flush at (s)\t")
	for _, a := range podBackoff(7, 300*time.Millisecond) {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t\n", a.attempt, seconds(a.failedAt), seconds(a.backoff),
			seconds(a.readyAt), seconds(a.flushAt))
	}
	tw.Flush()
	fmt.Fprintln(w, "Each scheduling attempt takes 300 ms. The scheduler flushes its backoff queue every 1 s")
	fmt.Fprintln(w, "(wait.Until(flushBackoffQCompleted, 1s)), so a pod can wait up to 1 s past its backoff;")
	fmt.Fprintln(w, "the delaying queue's one timer moves it at the expiry itself.")
	fmt.Fprintln(w, "Numbers: kube-scheduler's defaults podInitialBackoffSeconds 1 and podMaxBackoffSeconds 10")
	fmt.Fprintln(w, "(KubeSchedulerConfiguration), and its 1 s flush of the backoff queue.")
}
