package main

import (
	"container/heap"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// simClock is a discrete-event clock for many goroutines that wait on its
// timers: exactly one goroutine runs at a time. run fires the earliest timer,
// then waits until the goroutine it woke arms a timer again (it is then about
// to block on it) or exits (see park). Time jumps from one timer to the next,
// so a simulated minute takes as long as the work done in it.
type simClock struct {
	now    atomic.Int64 // nanoseconds since start
	start  time.Time
	timers timerHeap
	seq    int64
	parked chan struct{} // a goroutine woken by run is blocked again, or gone
}

var _ clock.WithDelayedExecution = (*simClock)(nil)

func newSimClock(start time.Time) *simClock {
	return &simClock{start: start, parked: make(chan struct{})}
}

func (c *simClock) Now() time.Time                  { return c.start.Add(time.Duration(c.now.Load())) }
func (c *simClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *simClock) NewTimer(d time.Duration) clock.Timer {
	t := &simTimer{c: c, ch: make(chan time.Time, 1), index: -1}
	t.Reset(d)
	return t
}

func (c *simClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }
func (c *simClock) Sleep(d time.Duration)                  { <-c.After(d) }

func (c *simClock) Tick(time.Duration) <-chan time.Time {
	panic("simClock: Tick is not simulated")
}

func (c *simClock) AfterFunc(time.Duration, func()) clock.Timer {
	panic("simClock: AfterFunc is not simulated")
}

// park tells run that the running goroutine is blocked, or has exited: a
// goroutine that arms a timer parks (in Reset), and one that exits must call
// park itself.
func (c *simClock) park() { c.parked <- struct{}{} }

// run starts a goroutine running f at each instant in arrivals (which must
// be in increasing order) and fires timers, all in time order, until no timer
// is armed and no arrival is left. A goroutine started for an arrival must
// park when it exits.
func (c *simClock) run(arrivals []time.Duration, f func()) {
	for len(arrivals) > 0 || len(c.timers) > 0 {
		if len(arrivals) > 0 && (len(c.timers) == 0 || int64(arrivals[0]) <= c.timers[0].at) {
			c.now.Store(int64(arrivals[0]))
			arrivals = arrivals[1:]
			go f()
		} else {
			t := heap.Pop(&c.timers).(*simTimer)
			c.now.Store(t.at)
			t.ch <- c.Now()
		}
		<-c.parked
	}
}

// simTimer is a timer of simClock.
type simTimer struct {
	c     *simClock
	ch    chan time.Time
	at    int64 // when it fires, in nanoseconds since start
	seq   int64 // arming order, to fire timers of one instant in that order
	index int   // in the heap; -1 when not armed
}

func (t *simTimer) C() <-chan time.Time { return t.ch }

func (t *simTimer) Stop() bool {
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.index)
	return true
}

// Reset arms the timer and parks: its goroutine is about to wait for it.
func (t *simTimer) Reset(d time.Duration) bool {
	armed := t.Stop()
	t.at = t.c.now.Load() + int64(max(d, 0))
	t.c.seq++
	t.seq = t.c.seq
	heap.Push(&t.c.timers, t)
	t.c.park()
	return armed
}

// timerHeap orders armed timers by time, then by arming order.
type timerHeap []*simTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*simTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
