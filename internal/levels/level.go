package levels

import "github.com/retrykit/backoff/internal/fifo"

// level is the FIFO of one priority. Without fairness, its values are in
// plain; with fairness, each key has a FIFO of its own (a keyQueue), and the
// keys that have current values are linked, first to last, in the order in
// which they are served: a key joins the end when it gets its first current
// value, leaves when it has none, and goes to the end when served.
type level[E any] struct {
	prio  int
	plain fifo.Queue[E]

	keys        keyIndex[E]
	first, last *keyQueue[E] // the serving order, linked by prev and next
	// arrivals lists every value in push order, as its key and its
	// number there, when the oldest value is tracked (see
	// Levels.TrackOldest): the first arrival not yet popped is the oldest
	// value, and it is its key's first.
	arrivals fifo.Queue[arrival[E]]
	n        int // values in the keys' queues, current and stale
	idle     int // keys without values
	spare    []*keyQueue[E]
}

// keyQueue is the FIFO of one key in a level with fairness: its first value
// in head, the others in rest. A tenant usually has one ready item at a
// time: its value then sits in the keyQueue itself, which the map lookup
// or the serving order has just loaded, and rest never allocates.
type keyQueue[E any] struct {
	key  string
	hash uint64 // key's hash in the level's keyIndex
	head E      // the first value, if n > 0
	rest fifo.Queue[E]
	n    int // values: head and rest
	live int // current values: the key is in the serving order while live > 0
	// prev and next link the keys in the serving order.
	prev, next *keyQueue[E]
	// pushed and popped count the values that went through q, for
	// arrivals; they only grow, even when the keyQueue is reused for
	// another key, so that an old arrival never looks unpopped.
	pushed, popped uint64
}

// arrival is a value pushed to kq as its nth.
type arrival[E any] struct {
	kq *keyQueue[E]
	n  uint64
}

// maxSpareKeys bounds the key FIFOs a level keeps for reuse once dropped.
const maxSpareKeys = 64

// maxIdleKeys is the number of keys without values up to which a level
// keeps their keyQueues, so that a working set of
// that many tenants whose items come and go costs no map insert and delete
// per item (see BenchmarkQueueAddGetDoneFairness). Beyond it, and once the
// idle keys outnumber the others, they are dropped.
const maxIdleKeys = 1024

func (lv *level[E]) len() int { return lv.plain.Len() + lv.n }

func (lv *level[E]) push(v E, l *Levels[E]) {
	if l.key == nil {
		lv.plain.Push(v)
		return
	}
	k := l.key(v)
	h := lv.keys.hash(k)
	kq := lv.keys.find(h, k)
	if kq == nil {
		kq = lv.newKey(k, h)
	} else if kq.n == 0 {
		lv.idle--
	}
	if l.oldest {
		lv.arrivals.Push(arrival[E]{kq, kq.pushed})
	}
	if kq.n == 0 {
		kq.head = v
	} else {
		kq.rest.Push(v)
	}
	kq.n++
	kq.pushed++
	lv.n++
	if kq.live++; kq.live == 1 {
		lv.link(kq)
	}
}

// link appends kq, which is not in the serving order, to its end.
func (lv *level[E]) link(kq *keyQueue[E]) {
	kq.prev, kq.next = lv.last, nil
	if lv.last == nil {
		lv.first = kq
	} else {
		lv.last.next = kq
	}
	lv.last = kq
}

// unlink takes kq out of the serving order.
func (lv *level[E]) unlink(kq *keyQueue[E]) {
	if kq.prev == nil {
		lv.first = kq.next
	} else {
		kq.prev.next = kq.next
	}
	if kq.next == nil {
		lv.last = kq.prev
	} else {
		kq.next.prev = kq.prev
	}
	kq.prev, kq.next = nil, nil
}

// newKey adds an empty FIFO for key k, whose hash is h, reusing a spare
// one.
func (lv *level[E]) newKey(k string, h uint64) *keyQueue[E] {
	var kq *keyQueue[E]
	if n := len(lv.spare); n > 0 {
		kq, lv.spare = lv.spare[n-1], lv.spare[:n-1]
	} else {
		kq = new(keyQueue[E])
	}
	kq.key, kq.hash = k, h
	lv.keys.insert(kq)
	return kq
}

// markStale records that v, which is in the level, is no longer current.
func (lv *level[E]) markStale(v E, l *Levels[E]) {
	if l.key == nil {
		return
	}
	k := l.key(v)
	kq := lv.keys.find(lv.keys.hash(k), k)
	if l.current != nil {
		l.stale++
	}
	if kq.live--; kq.live == 0 {
		lv.unlink(kq) // its turn is void
	}
}

// pop removes and returns the next value: without fairness the first; with
// fairness the first of the key whose turn it is. A stale value is returned
// without using up the key's turn, so that stale values cost no key its
// place. ok is false if the level holds only stale values, of keys that
// are out of the serving order (see Levels.Clear).
func (lv *level[E]) pop(l *Levels[E]) (v E, ok bool) {
	if l.key == nil {
		return lv.plain.Pop(), true
	}
	kq := lv.first
	if kq == nil {
		return v, false
	}
	v = lv.popKey(kq)
	if l.stale > 0 && !l.current(v) {
		l.stale--
		return v, true
	}
	if kq.live--; kq.live == 0 {
		lv.unlink(kq)
	} else if kq != lv.last {
		lv.unlink(kq) // to the end of the order: its turn is used up
		lv.link(kq)
	}
	return v, true
}

// popOldest removes and returns the value that was pushed first.
func (lv *level[E]) popOldest(l *Levels[E]) E {
	if l.key == nil || !l.oldest {
		v, _ := lv.pop(l)
		return v
	}
	kq := lv.oldestKey()
	lv.arrivals.Pop()
	v := lv.popKey(kq)
	if l.stale > 0 && !l.current(v) {
		l.stale--
	} else if kq.live--; kq.live == 0 {
		lv.unlink(kq)
	}
	return v
}

// oldestKey drops the arrivals of values already popped and returns the
// key of the oldest value left.
func (lv *level[E]) oldestKey() *keyQueue[E] {
	for {
		a := lv.arrivals.Peek()
		if a.n >= a.kq.popped {
			return a.kq
		}
		lv.arrivals.Pop()
	}
}

// popKey pops kq's first value, and makes kq idle if that empties it.
func (lv *level[E]) popKey(kq *keyQueue[E]) E {
	v := kq.head
	if kq.n--; kq.n > 0 {
		kq.head = kq.rest.Pop()
	} else {
		var zero E
		kq.head = zero // let what v refers to be collected
	}
	kq.popped++
	lv.n--
	if kq.n == 0 {
		lv.idle++
		if lv.idle > maxIdleKeys && lv.idle > lv.keys.n-lv.idle {
			lv.dropIdle()
		}
	}
	return v
}

// dropIdle deletes the keys without values, keeping a few for reuse: a
// level that has seen many keys does not keep one for each, while keys
// that come back often keep their FIFO. Each call frees at least half of
// the keys, which pays for the scan.
func (lv *level[E]) dropIdle() {
	lv.keys.deleteIf(func(kq *keyQueue[E]) bool {
		if kq.n > 0 {
			return false
		}
		// n == 0, so live == 0: kq is out of the serving order.
		if len(lv.spare) < maxSpareKeys {
			lv.spare = append(lv.spare, kq)
		}
		return true
	})
	lv.idle = 0
}

// peek returns the value pop would return, or, if the oldest value is
// tracked, the oldest value; ok is false if no turn reaches a value.
func (lv *level[E]) peek(l *Levels[E]) (v E, ok bool) {
	if l.key == nil {
		return lv.plain.Peek(), true
	}
	if l.oldest {
		return lv.oldestKey().head, true
	}
	if lv.first == nil {
		return v, false
	}
	return lv.first.head, true
}

// clear removes every value, calling f with each.
func (lv *level[E]) clear(f func(E)) {
	for lv.plain.Len() > 0 {
		f(lv.plain.Pop())
	}
	if lv.n == 0 {
		return
	}
	lv.keys.each(func(kq *keyQueue[E]) {
		for kq.n > 0 {
			f(lv.popKey(kq))
		}
		kq.live, kq.prev, kq.next = 0, nil, nil
	})
	lv.first, lv.last = nil, nil
	for lv.arrivals.Len() > 0 {
		lv.arrivals.Pop()
	}
}

func (lv *level[E]) cap() int {
	n := lv.plain.Cap() + lv.arrivals.Cap()
	lv.keys.each(func(kq *keyQueue[E]) { n += 1 + kq.rest.Cap() })
	for _, kq := range lv.spare {
		n += 1 + kq.rest.Cap()
	}
	return n
}
