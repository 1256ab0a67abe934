// Package levels holds the ready items of a work queue by priority: one FIFO
// per priority, handed out from the highest non-empty priority first, and,
// optionally, round-robin across keys within a priority.
package levels

import "github.com/retrykit/backoff/internal/fifo"

// maxEmptyLevels is how many empty non-zero levels Levels keeps for reuse:
// a queue that alternates between a few priorities reuses their chunks
// instead of allocating them again, and one that has seen many priorities
// does not keep a level for each.
const maxEmptyLevels = 8

// Levels is a set of FIFOs of values of type E, one per priority. Priority 0
// has a FIFO of its own, so that a queue whose values all have priority 0
// pays one comparison per call for the others.
//
// The zero value is an empty set without fairness. Levels is not safe for
// concurrent use.
type Levels[E any] struct {
	zero   level[E]
	others []*level[E] // the non-zero levels, highest priority first
	// last is the non-zero level Push found last: adds come in runs of one
	// priority, and a level object of priority p is always in others.
	last    *level[E]
	n       int // values in others
	key     func(E) string
	current func(E) bool // see SetCurrent; nil means every value is current
	stale   int          // values marked stale and still held: current is asked only while some are
	oldest  bool         // see TrackOldest
}

// New returns an empty set whose levels hand values out round-robin across
// the keys that key returns, FIFO within a key. A nil key means no fairness:
// FIFO within a level.
func New[E any](key func(E) string) *Levels[E] {
	l := new(Levels[E])
	l.Init(key)
	return l
}

// Init empties l and sets its key function (see New).
func (l *Levels[E]) Init(key func(E) string) {
	*l = Levels[E]{key: key}
}

// SetCurrent tells a set with fairness which values are current: the
// owner may leave stale values in the levels (a value pushed again at
// another priority), which it reports with MarkStale. Pop returns a stale
// value without using up its key's turn, so that the round-robin order is
// that of the current values alone. current must not change its answer for
// a value while the value is in l, except from true to false after
// MarkStale.
func (l *Levels[E]) SetCurrent(current func(E) bool) { l.current = current }

// TrackOldest makes a set with fairness keep its values' push order too, for
// PopOldest and Heads; it costs one more FIFO entry per value.
func (l *Levels[E]) TrackOldest() { l.oldest = true }

// MarkStale records that v, pushed at priority prio and still in l, is no
// longer current (see SetCurrent); it is called once for each value that
// goes stale. It does nothing without fairness.
func (l *Levels[E]) MarkStale(prio int, v E) {
	if l.key == nil {
		return
	}
	if prio == 0 {
		l.zero.markStale(v, l)
		return
	}
	l.find(prio).markStale(v, l)
}

// Zero returns the FIFO of priority 0 if l has no fairness, else nil: a
// caller's fast path. Pushing v to it is Push(0, v); while OnlyZero
// reports true, popping from it is Pop() at priority 0. It saves the calls
// through Levels and level, which the compiler does not inline.
func (l *Levels[E]) Zero() *fifo.Queue[E] {
	if l.key != nil {
		return nil
	}
	return &l.zero.plain
}

// OnlyZero reports whether no level but priority 0 holds a value.
func (l *Levels[E]) OnlyZero() bool { return l.n == 0 }

// Len returns the number of values in every level.
func (l *Levels[E]) Len() int { return l.zero.len() + l.n }

// Push appends v to the level of priority prio.
func (l *Levels[E]) Push(prio int, v E) {
	if prio == 0 {
		l.zero.push(v, l)
		return
	}
	lv := l.last
	if lv == nil || lv.prio != prio {
		lv = l.levelFor(prio)
		l.last = lv
	}
	if l.key == nil {
		lv.plain.Push(v) // level.push without its calls
	} else {
		lv.push(v, l)
	}
	l.n++
}

// Pop removes and returns the next value of the highest level that has one,
// and that level's priority. l must hold a current value (see SetCurrent);
// a stale value may be returned before it.
func (l *Levels[E]) Pop() (E, int) {
	if l.n == 0 {
		if v, ok := l.zero.pop(l); ok {
			return v, 0
		}
		panic("levels: no current value")
	}
	if l.key == nil {
		return l.popPlain()
	}
	zeroTried := false
	for _, lv := range l.others {
		if !zeroTried && lv.prio < 0 {
			zeroTried = true
			if l.zero.len() > 0 {
				if v, ok := l.zero.pop(l); ok {
					return v, 0
				}
			}
		}
		if lv.len() > 0 {
			if v, ok := lv.pop(l); ok {
				l.n--
				return v, lv.prio
			}
		}
	}
	if !zeroTried {
		if v, ok := l.zero.pop(l); ok {
			return v, 0
		}
	}
	panic("levels: no current value")
}

// PopPlain is Pop for a set without fairness, whose values are all
// current: the owner's fast path, as Zero is.
func (l *Levels[E]) PopPlain() (E, int) {
	if l.n == 0 {
		return l.zero.plain.Pop(), 0
	}
	return l.popPlain()
}

// popPlain is Pop without fairness, where every value is current and no
// level calls are needed, while some non-zero level holds a value.
func (l *Levels[E]) popPlain() (E, int) {
	for _, lv := range l.others {
		if lv.prio < 0 && l.zero.plain.Len() > 0 {
			return l.zero.plain.Pop(), 0
		}
		if lv.plain.Len() > 0 {
			l.n--
			return lv.plain.Pop(), lv.prio
		}
	}
	return l.zero.plain.Pop(), 0
}

// PopOldest removes and returns the value of the level of priority prio,
// which must not be empty, that was pushed first; with fairness and
// without TrackOldest, the value Pop would take from that level.
func (l *Levels[E]) PopOldest(prio int) E {
	if prio == 0 {
		return l.zero.popOldest(l)
	}
	l.n--
	return l.find(prio).popOldest(l)
}

// Heads calls f with the priority and the next value of every non-empty
// level, highest priority first, until f returns false. The next value is
// the one PopOldest would return; it may be stale.
func (l *Levels[E]) Heads(f func(prio int, next E) bool) {
	head := func(lv *level[E]) bool {
		if v, ok := lv.peek(l); ok {
			return f(lv.prio, v)
		}
		return true
	}
	zeroDone := l.zero.len() == 0
	for _, lv := range l.others {
		if !zeroDone && lv.prio < 0 {
			zeroDone = true
			if !head(&l.zero) {
				return
			}
		}
		if lv.len() > 0 && !head(lv) {
			return
		}
	}
	if !zeroDone {
		head(&l.zero)
	}
}

// Clear removes every value, calling f with each, in no particular order.
func (l *Levels[E]) Clear(f func(E)) {
	l.zero.clear(f)
	for _, lv := range l.others {
		lv.clear(f)
	}
	l.n, l.stale = 0, 0
}

// Priorities reports, for every non-empty level, its priority and its
// number of values, highest priority first.
func (l *Levels[E]) Priorities(f func(prio, n int)) {
	zeroDone := l.zero.len() == 0
	for _, lv := range l.others {
		if !zeroDone && lv.prio < 0 {
			zeroDone = true
			f(0, l.zero.len())
		}
		if lv.len() > 0 {
			f(lv.prio, lv.len())
		}
	}
	if !zeroDone {
		f(0, l.zero.len())
	}
}

// NumLevels returns the number of non-zero levels l holds, empty ones
// included: its memory, for tests.
func (l *Levels[E]) NumLevels() int { return len(l.others) }

func (l *Levels[E]) find(prio int) *level[E] {
	for _, lv := range l.others {
		if lv.prio == prio {
			return lv
		}
	}
	panic("levels: no level of that priority")
}

// levelFor returns the level of priority prio, making it if needed. The
// levels are few (a controller uses two or three priorities), so a linear
// scan of a sorted slice beats a map.
func (l *Levels[E]) levelFor(prio int) *level[E] {
	for _, lv := range l.others {
		if lv.prio == prio {
			return lv
		}
	}
	var lv *level[E]
	if len(l.others) >= maxEmptyLevels {
		lv = l.takeEmpty()
	}
	if lv == nil {
		lv = new(level[E])
	}
	lv.prio = prio
	i := 0
	for i < len(l.others) && l.others[i].prio > prio {
		i++
	}
	l.others = append(l.others, nil)
	copy(l.others[i+1:], l.others[i:])
	l.others[i] = lv
	return lv
}

// takeEmpty removes an empty level from others and returns it, or nil.
func (l *Levels[E]) takeEmpty() *level[E] {
	for i, lv := range l.others {
		if lv.len() == 0 {
			l.others = append(l.others[:i], l.others[i+1:]...)
			return lv
		}
	}
	return nil
}

// Cap returns the number of values the levels' FIFOs can hold: their
// memory, for tests that check that a burst's memory goes back.
func (l *Levels[E]) Cap() int {
	n := l.zero.cap()
	for _, lv := range l.others {
		n += lv.cap()
	}
	return n
}
