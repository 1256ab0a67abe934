package redis

import (
	"context"
	"sync"
)

// coalescer sends the single-key decisions of concurrent callers together:
// while one round trip is in flight, the calls that arrive queue, and when it
// lands one of them takes the whole queue to Redis in one script call (the
// script decides the keys in order, as AllowBatch's). A lone caller goes at
// once, so a sequential caller sees one round trip per decision, as before;
// under load, one round trip carries many decisions, which saves the network
// and the system calls of all but one (see BenchmarkAllowParallel). No
// goroutine is started: the round trips are made by callers.
//
// Every caller waits at most until its own deadline. One that gives up while
// queued leaves the queue; one whose decision is already in flight leaves it
// there, and an event admitted for it is spent (on the side of the limit).
// The caller that takes the queue to Redis finishes that round trip even if
// its context is cancelled, since the others' decisions travel with it, but
// not past its deadline.
type coalescer struct {
	mu     sync.Mutex
	flying bool          // a round trip is in flight
	queue  []*queued     // calls waiting for the next round trip
	wake   chan struct{} // closed when a round trip lands; then replaced
	// onQueued, when set (by tests only), is called after a caller joins the
	// queue behind a round trip in flight.
	onQueued func()
}

type queued struct {
	key   string
	ask   ask
	state queuedState
	d     decision
	err   error
}

type queuedState uint8

const (
	waiting queuedState = iota
	inFlight
	landed
)

// decide decides for key under ctx's deadline (ctx always has one: it comes
// from guard.begin).
func (c *coalescer) decide(l *gcra, ctx context.Context, key string, a ask) (decision, error) {
	c.mu.Lock()
	if !c.flying && len(c.queue) == 0 {
		c.flying = true
		c.mu.Unlock()
		var out [1]decision
		err := l.roundTrip(ctx, []string{key}, []ask{a}, out[:])
		c.land(nil)
		return out[0], err
	}
	q := &queued{key: key, ask: a}
	c.queue = append(c.queue, q)
	if !c.flying {
		// The queue's callers are not awake yet: take them along now,
		// rather than fly alone past them (they would starve).
		c.flyQueueLocked(l, ctx, q)
		return q.d, q.err
	}
	if c.wake == nil {
		c.wake = make(chan struct{})
	}
	wake := c.wake
	c.mu.Unlock()
	if c.onQueued != nil {
		c.onQueued()
	}
	for {
		select {
		case <-wake:
		case <-ctx.Done():
			c.mu.Lock()
			defer c.mu.Unlock()
			switch q.state {
			case landed:
				return q.d, q.err
			case waiting:
				c.removeLocked(q)
			}
			return decision{}, context.Cause(ctx)
		}
		c.mu.Lock()
		switch {
		case q.state == landed:
			c.mu.Unlock()
			return q.d, q.err
		case q.state == waiting && !c.flying && ctx.Err() == nil:
			c.flyQueueLocked(l, ctx, q)
			return q.d, q.err
		}
		wake = c.wake
		c.mu.Unlock()
	}
}

// maxFlight bounds the decisions of one round trip: a script holds Redis
// for its whole run, so a very long queue goes in several.
const maxFlight = 128

// flyQueueLocked takes q and the queue, up to maxFlight decisions, to Redis;
// it is called with c.mu held, and returns with it released, after the round
// trip. What does not fit stays queued for the next round trip.
func (c *coalescer) flyQueueLocked(l *gcra, ctx context.Context, q *queued) {
	c.flying = true
	batch := []*queued{q}
	var rest []*queued
	for _, x := range c.queue {
		switch {
		case x == q:
		case len(batch) < maxFlight:
			batch = append(batch, x)
		default:
			rest = append(rest, x)
		}
	}
	c.queue = rest
	for _, b := range batch {
		b.state = inFlight
	}
	c.mu.Unlock()
	c.fly(l, ctx, batch)
}

// fly takes batch to Redis in one round trip, under ctx's deadline but not
// its cancellation, and lands.
func (c *coalescer) fly(l *gcra, ctx context.Context, batch []*queued) {
	dl, _ := ctx.Deadline()
	flightCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), dl)
	keys := make([]string, len(batch))
	asks := make([]ask, len(batch))
	for i, b := range batch {
		keys[i], asks[i] = b.key, b.ask
	}
	out := make([]decision, len(batch))
	err := l.roundTrip(flightCtx, keys, asks, out)
	cancel()
	for i, b := range batch {
		b.d, b.err = out[i], err
	}
	c.land(batch)
}

// land ends a round trip: it marks batch's calls landed and wakes the
// waiting callers, one of which takes the queue next.
func (c *coalescer) land(batch []*queued) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flying = false
	for _, b := range batch {
		b.state = landed
	}
	if (len(batch) > 0 || len(c.queue) > 0) && c.wake != nil {
		close(c.wake)
		c.wake = make(chan struct{})
	}
}

func (c *coalescer) removeLocked(q *queued) {
	for i, x := range c.queue {
		if x == q {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return
		}
	}
}
