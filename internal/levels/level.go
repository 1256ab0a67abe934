package levels

import "github.com/retrykit/backoff/internal/fifo"

// level is the FIFO of one priority. Without fairness, its values are in
// plain; with fairness, each key has a FIFO of its own (a keyQueue) and
// turns lists the keys that have current values, in the order in which they
// are served.
type level[E any] struct {
	prio  int
	plain fifo.Queue[E]

	byKey map[string]*keyQueue[E]
	turns fifo.Queue[turn[E]]
	// arrivals lists every value in push order, as its key and its
	// number there, when the oldest value is tracked (see
	// Levels.TrackOldest): the first arrival not yet popped is the oldest
	// value, and it is its key's first.
	arrivals fifo.Queue[arrival[E]]
	n        int // values in byKey, current and stale
	idle     int // keys in byKey without values
	spare    []*keyQueue[E]
}

// keyQueue is the FIFO of one key in a level with fairness: its first value
// in head, the others in rest. A tenant usually has one ready item at a
// time: its value then sits in the keyQueue itself, which the map lookup
// or the turn has just loaded, and rest never allocates.
type keyQueue[E any] struct {
	key  string
	head E // the first value, if n > 0
	rest fifo.Queue[E]
	n    int // values: head and rest
	live int // current values: the key has a valid turn while live > 0
	// epoch tells the key's valid turn from turns it had before: it
	// changes whenever live drops to 0.
	epoch uint32
	// pushed and popped count the values that went through q, for
	// arrivals; they only grow, even when the keyQueue is reused for
	// another key, so that an old arrival never looks unpopped.
	pushed, popped uint64
}

// turn is a key's place in the serving order, valid while epoch is its
// keyQueue's epoch.
type turn[E any] struct {
	kq    *keyQueue[E]
	epoch uint32
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
	kq := lv.byKey[k]
	if kq == nil {
		kq = lv.newKey(k)
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
		lv.turns.Push(turn[E]{kq, kq.epoch})
	}
}

// newKey adds an empty FIFO for key k, reusing a spare one.
func (lv *level[E]) newKey(k string) *keyQueue[E] {
	if lv.byKey == nil {
		lv.byKey = make(map[string]*keyQueue[E])
	}
	var kq *keyQueue[E]
	if n := len(lv.spare); n > 0 {
		kq, lv.spare = lv.spare[n-1], lv.spare[:n-1]
	} else {
		kq = new(keyQueue[E])
	}
	kq.key = k
	lv.byKey[k] = kq
	return kq
}

// markStale records that v, which is in the level, is no longer current.
func (lv *level[E]) markStale(v E, l *Levels[E]) {
	if l.key == nil {
		return
	}
	kq := lv.byKey[l.key(v)]
	if kq.live--; kq.live == 0 {
		kq.epoch++ // its turn is void
	}
}

// pop removes and returns the next value: without fairness the first; with
// fairness the first of the key whose turn it is. A stale value is returned
// without using up the key's turn, so that stale values cost no key its
// place. ok is false if the level holds only stale values that no turn
// reaches (see Levels.Clear).
func (lv *level[E]) pop(l *Levels[E]) (v E, ok bool) {
	if l.key == nil {
		return lv.plain.Pop(), true
	}
	for lv.turns.Len() > 0 {
		t := lv.turns.Peek()
		if t.epoch != t.kq.epoch {
			lv.turns.Pop()
			continue
		}
		kq := t.kq
		v = lv.popKey(kq)
		if l.current != nil && !l.current(v) {
			return v, true
		}
		lv.turns.Pop()
		if kq.live--; kq.live > 0 {
			lv.turns.Push(turn[E]{kq, kq.epoch})
		} else {
			kq.epoch++
		}
		return v, true
	}
	return v, false
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
	if l.current == nil || l.current(v) {
		if kq.live--; kq.live == 0 {
			kq.epoch++
		}
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
		if lv.idle > maxIdleKeys && lv.idle > len(lv.byKey)-lv.idle {
			lv.dropIdle()
		}
	}
	return v
}

// dropIdle deletes the keys without values, keeping a few for reuse: a
// level that has seen many keys does not keep one for each, while keys
// that come back often keep their FIFO. Each call frees at least half of
// byKey, which pays for the scan.
func (lv *level[E]) dropIdle() {
	for k, kq := range lv.byKey {
		if kq.n == 0 {
			delete(lv.byKey, k)
			kq.epoch++ // any turn it has left is void
			if len(lv.spare) < maxSpareKeys {
				lv.spare = append(lv.spare, kq)
			}
		}
	}
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
	for lv.turns.Len() > 0 {
		t := lv.turns.Peek()
		if t.epoch == t.kq.epoch {
			return t.kq.head, true
		}
		lv.turns.Pop()
	}
	return v, false
}

// clear removes every value, calling f with each.
func (lv *level[E]) clear(f func(E)) {
	for lv.plain.Len() > 0 {
		f(lv.plain.Pop())
	}
	if lv.n == 0 {
		return
	}
	for _, kq := range lv.byKey {
		for kq.n > 0 {
			f(lv.popKey(kq))
		}
		if kq.live > 0 {
			kq.live = 0
			kq.epoch++
		}
	}
	for lv.turns.Len() > 0 {
		lv.turns.Pop()
	}
	for lv.arrivals.Len() > 0 {
		lv.arrivals.Pop()
	}
}

func (lv *level[E]) cap() int {
	n := lv.plain.Cap() + lv.turns.Cap() + lv.arrivals.Cap()
	for _, kq := range lv.byKey {
		n += 1 + kq.rest.Cap()
	}
	for _, kq := range lv.spare {
		n += 1 + kq.rest.Cap()
	}
	return n
}
