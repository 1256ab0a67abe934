package levels

import "github.com/retrykit/backoff/internal/fifo"

// level is the FIFO of one priority. Without fairness, its values are in
// plain; with fairness, each key has a FIFO of its own and turns lists the
// keys that have values, in the order in which they are served.
type level[E any] struct {
	prio  int
	plain fifo.Queue[E]

	byKey map[string]*fifo.Queue[E]
	turns fifo.Queue[string]
	n     int // values in byKey
	spare []*fifo.Queue[E]
}

func (lv *level[E]) len() int { return lv.plain.Len() + lv.n }

func (lv *level[E]) push(v E, key func(E) string) {
	if key == nil {
		lv.plain.Push(v)
		return
	}
	k := key(v)
	q := lv.byKey[k]
	if q == nil {
		if lv.byKey == nil {
			lv.byKey = make(map[string]*fifo.Queue[E])
		}
		// A key's FIFO is reused from the keys that emptied: one
		// allocation per key that is active at the same time.
		if n := len(lv.spare); n > 0 {
			q, lv.spare = lv.spare[n-1], lv.spare[:n-1]
		} else {
			q = new(fifo.Queue[E])
		}
		lv.byKey[k] = q
		lv.turns.Push(k)
	}
	q.Push(v)
	lv.n++
}

func (lv *level[E]) pop(key func(E) string) E {
	if key == nil {
		return lv.plain.Pop()
	}
	k := lv.turns.Pop()
	q := lv.byKey[k]
	v := q.Pop()
	lv.n--
	if q.Len() > 0 {
		lv.turns.Push(k)
	} else {
		delete(lv.byKey, k)
		if len(lv.spare) < maxSpareKeys {
			lv.spare = append(lv.spare, q)
		}
	}
	return v
}

func (lv *level[E]) peek() E {
	if lv.byKey == nil || lv.n == 0 {
		return lv.plain.Peek()
	}
	k := lv.turns.Peek()
	return lv.byKey[k].Peek()
}

// maxSpareKeys bounds the FIFOs a level keeps for reuse.
const maxSpareKeys = 64

func (lv *level[E]) cap() int {
	n := lv.plain.Cap() + lv.turns.Cap()
	for _, q := range lv.byKey {
		n += q.Cap()
	}
	for _, q := range lv.spare {
		n += q.Cap()
	}
	return n
}
