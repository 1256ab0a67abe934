package backoff

import (
	"math"
	"sort"
)

// waitEntry is one item waiting in a delaying queue until its ready time.
// For an int item it takes 24 bytes: at, then seq and slot sharing one
// word, then the item.
type waitEntry[T comparable] struct {
	at   int64  // ready time, in nanoseconds since the queue's epoch
	seq  uint32 // among equal ready times, the lower seq was set first
	slot uint32 // the entry's slot in the waitIndex (hash table builds only)
	item T
}

// waitBefore reports whether a comes out of the heap before b: earlier ready
// time first, and among equal ready times the one whose time was set first.
func waitBefore[T comparable](a, b *waitEntry[T]) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// waitArity is the number of children of a heap node. A 4-ary heap is half
// as deep as a binary one, so decrease-key (the common AddAfter update) moves
// an entry through half as many levels, and the four children sit in one or
// two cache lines. The Go runtime's timer heap makes the same choice.
const waitArity = 4

// waitShrinkCap is the capacity below which the entry slice is never
// reallocated to a smaller one: small queues keep their memory, so a queue
// that oscillates between a few and no waiting items allocates nothing.
const waitShrinkCap = 1024

// waitHeap is a min-heap of waiting items ordered by waitBefore, with an
// index from item to heap position: finding an item is O(1) expected, and
// pushing, moving an item earlier and removing any item are O(log n).
//
// Its memory is the entry slice plus the index. Both shrink when the heap
// empties, unlike a Go map, which never gives memory back.
type waitHeap[T comparable] struct {
	es    []waitEntry[T]
	index waitIndex[T]
	seq   uint32 // the seq that the next push or lower assigns
}

func (h *waitHeap[T]) len() int { return len(h.es) }

// minAt returns the ready time of the earliest entry. The heap must not be
// empty.
func (h *waitHeap[T]) minAt() int64 { return h.es[0].at }

// find returns the heap position of item, or -1 if it does not wait.
func (h *waitHeap[T]) find(item T) int {
	if len(h.es) == 0 {
		return -1
	}
	return h.index.find(h.es, item)
}

// push adds item, which must not be in the heap, with ready time at.
func (h *waitHeap[T]) push(item T, at int64) {
	h.es = append(h.es, waitEntry[T]{at: at, seq: h.nextSeq(), item: item})
	i := len(h.es) - 1
	h.index.insert(h.es, i)
	h.up(i)
}

// lower moves the entry at position i to the earlier ready time at. The
// entry takes a new seq: among equal ready times it now counts as set last.
func (h *waitHeap[T]) lower(i int, at int64) {
	h.es[i].at = at
	h.es[i].seq = h.nextSeq()
	h.up(i)
}

// removeAt removes the entry at position i and returns it.
func (h *waitHeap[T]) removeAt(i int) waitEntry[T] {
	e := h.es[i]
	h.index.remove(h.es, i)
	last := len(h.es) - 1
	if i != last {
		h.es[i] = h.es[last]
		h.index.moved(h.es, i)
	}
	h.es[last] = waitEntry[T]{} // let the item be collected
	h.es = h.es[:last]
	if i != last {
		if i > 0 && waitBefore(&h.es[i], &h.es[(i-1)/waitArity]) {
			h.up(i)
		} else {
			h.down(i)
		}
	}
	h.shrink()
	return e
}

// popMin removes the earliest entry and returns it. The heap must not be
// empty.
func (h *waitHeap[T]) popMin() waitEntry[T] { return h.removeAt(0) }

// up restores the heap order above position i after its entry moved
// earlier. It moves the entry through a hole instead of swapping, so each
// level costs one copy.
func (h *waitHeap[T]) up(i int) {
	e := h.es[i]
	for i > 0 {
		p := (i - 1) / waitArity
		if !waitBefore(&e, &h.es[p]) {
			break
		}
		h.es[i] = h.es[p]
		h.index.moved(h.es, i)
		i = p
	}
	h.es[i] = e
	h.index.moved(h.es, i)
}

// down restores the heap order below position i after its entry moved
// later.
func (h *waitHeap[T]) down(i int) {
	n := len(h.es)
	e := h.es[i]
	for {
		c := waitArity*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+waitArity && k < n; k++ {
			if waitBefore(&h.es[k], &h.es[m]) {
				m = k
			}
		}
		if !waitBefore(&h.es[m], &e) {
			break
		}
		h.es[i] = h.es[m]
		h.index.moved(h.es, i)
		i = m
	}
	h.es[i] = e
	h.index.moved(h.es, i)
}

// nextSeq returns a fresh seq. When the counter is about to wrap (after 2^32
// pushes and updates) it renumbers the waiting entries 0..n-1 in their
// current order, so the order of ties survives; that costs one sort per
// four billion operations.
func (h *waitHeap[T]) nextSeq() uint32 {
	if h.seq == math.MaxUint32 {
		h.renumber()
	}
	s := h.seq
	h.seq++
	return s
}

func (h *waitHeap[T]) renumber() {
	order := make([]int, len(h.es))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return h.es[order[a]].seq < h.es[order[b]].seq })
	for n, i := range order {
		h.es[i].seq = uint32(n)
	}
	h.seq = uint32(len(order))
}

// shrink gives memory back once the heap holds under a quarter of its
// capacity, so that a burst of a million waiting items does not pin their
// memory for the life of the queue.
func (h *waitHeap[T]) shrink() {
	if c := cap(h.es); c > waitShrinkCap && len(h.es) < c/4 {
		es := make([]waitEntry[T], len(h.es), c/2)
		copy(es, h.es)
		h.es = es
	}
	h.index.shrink(h.es)
}
