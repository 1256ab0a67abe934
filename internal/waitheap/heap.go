// Package waitheap holds the items of a delaying work queue that wait for
// their ready time: a min-heap ordered by ready time, with an index from item
// to heap position, so that finding an item is O(1) expected and pushing,
// moving an item earlier and removing any item are O(log n).
//
// Times are int64 nanoseconds from an origin of the caller's choosing. Among
// equal ready times, items come out in the order in which their times were
// set.
//
// A heap small enough for a core's cache applies each PushOrLower at once; a
// larger one collects them in batches whose cache misses overlap (batch.go).
// Either way the heap behaves the same to its caller.
package waitheap

import (
	"math"
	"sort"
)

// Entry is one waiting item and its ready time. For an int item it takes 24
// bytes: At, then seq and slot sharing one word, then the item.
type Entry[T comparable] struct {
	At   int64  // ready time
	seq  uint32 // among equal ready times, the lower seq was set first
	slot uint32 // the entry's slot in the index, with its tag (hash table builds only)
	Item T
}

// before reports whether a comes out of the heap before b: earlier ready
// time first, and among equal ready times the one whose time was set first.
func before[T comparable](a, b *Entry[T]) bool {
	return a.At < b.At || (a.At == b.At && a.seq < b.seq)
}

// arity is the number of children of a heap node. A 4-ary heap is half
// as deep as a binary one, so decrease-key (the common AddAfter update) moves
// an entry through half as many levels, and the four children sit in one or
// two cache lines. The Go runtime's timer heap makes the same choice.
const arity = 4

// chunkShift sets the size of the chunks that hold the heap's entries:
// 512 entries, 12 KiB for int items.
//
// The entries live in fixed-size chunks rather than one slice so that
// growing the heap never copies it: a slice that doubles copies every entry
// into freshly faulted memory each time (see BenchmarkAddAfter in bench/). A
// chunk is also the unit in which the heap gives memory back, so it never
// holds more than one spare chunk beyond what its entries need.
const chunkShift = 9

const (
	chunkLen  = 1 << chunkShift
	chunkMask = chunkLen - 1
)

// Heap is a min-heap of waiting items ordered by ready time, with an index
// from item to heap position. An item waits at most once.
//
// Its memory is the entry chunks plus the index. Both follow the heap down
// when it shrinks, unlike a Go map, which never gives memory back.
//
// The zero value is an empty heap; it allocates nothing until an item
// waits. A Heap is not safe for concurrent use.
type Heap[T comparable] struct {
	// chunks hold the entries: position i is chunks[i>>chunkShift]
	// [i&chunkMask]. Every chunk is full but the last, which is not
	// empty; the first grows by append up to chunkLen so that a small
	// heap stays small, the others are allocated at full capacity.
	chunks [][]Entry[T]
	spare  []Entry[T] // an empty full-size chunk kept for the next growth, or nil
	counts            // the number of entries and of batched calls
	index  index[T]
	seq    uint32 // the seq that the next push or lower assigns

	batch batch[T] // PushOrLower calls not applied yet (batch.go)
	// alwaysBatch makes PushOrLower batch whatever the heap's size, for the
	// tests of the batch.
	alwaysBatch bool
}

// counts is the sizes of a Heap. It is not generic, so that a caller's
// generic code inlines Len at the cost of two loads.
type counts struct {
	n       int // the number of entries
	batched int // the number of batched PushOrLower calls (batch.go)
}

// Len returns the number of entries plus the number of batched PushOrLower
// calls: more than zero exactly when an item waits, and the number of
// waiting items once the batch is applied (Contains, Remove and PopMin
// apply it).
func (c *counts) Len() int { return c.n + c.batched }

// entry returns the entry at position i < n.
func (h *Heap[T]) entry(i int) *Entry[T] {
	return &h.chunks[i>>chunkShift][i&chunkMask]
}

// MinAt returns the earliest ready time of a waiting item, batched or not.
// The heap must not be empty (Len() > 0).
//
// It leaves the batch alone, so that re-arming a timer after each
// PushOrLower stays cheap. A batched time earlier than every entry's is exact: applying
// it either pushes a new entry with that time or moves an entry earlier to
// it.
func (h *Heap[T]) MinAt() int64 {
	if h.batched > 0 && (h.n == 0 || h.batch.minAt < h.chunks[0][0].At) {
		return h.batch.minAt
	}
	return h.chunks[0][0].At
}

// Contains applies the batch and reports whether item waits.
func (h *Heap[T]) Contains(item T) bool { return h.find(item) >= 0 }

// Remove applies the batch and takes item out of the heap. It reports
// whether item waited.
func (h *Heap[T]) Remove(item T) bool {
	i := h.find(item)
	if i < 0 {
		return false
	}
	h.removeAt(i)
	return true
}

// At applies the batch and returns item's ready time, and whether it
// waits.
func (h *Heap[T]) At(item T) (int64, bool) {
	i := h.find(item)
	if i < 0 {
		return 0, false
	}
	return h.entry(i).At, true
}

// Set applies the batch and makes item wait until at, whether that is
// earlier or later than its current ready time; an item that does not wait
// is pushed. Either way, among equal ready times the item counts as set
// last. O(log n).
func (h *Heap[T]) Set(item T, at int64) {
	i := h.find(item)
	if i < 0 {
		h.push(item, at)
		return
	}
	e := h.entry(i)
	earlier := at < e.At
	e.At = at
	e.seq = h.nextSeq()
	if earlier {
		h.up(i)
	} else {
		h.down(i) // a later time, or the same one set last
	}
}

// find applies the batch and returns the heap position of item, or -1 if it
// does not wait.
func (h *Heap[T]) find(item T) int {
	h.apply()
	if h.n == 0 {
		return -1
	}
	return h.index.find(h, item)
}

// push applies the batch, then adds item, which must not be in the heap,
// with ready time at.
func (h *Heap[T]) push(item T, at int64) {
	h.apply()
	_, pr := h.index.lookup(h, item)
	h.pushProbed(item, at, pr)
}

// pushOrLowerHashed makes item, whose hash is hv (index.hashOf), wait until
// at, or until its current ready time if that is earlier. It is the one
// probe of the index per PushOrLower: a new item goes into the free slot
// where the lookup ended. The index table must exist (index.prepare).
func (h *Heap[T]) pushOrLowerHashed(item T, at int64, hv uint64) {
	i, pr := h.index.lookupHashed(h, item, hv)
	if i < 0 {
		h.pushProbed(item, at, pr)
	} else if at < h.entry(i).At {
		h.lower(i, at)
	}
}

// pushProbed adds item, which a lookup missed with probe pr.
func (h *Heap[T]) pushProbed(item T, at int64, pr probe) {
	c := h.n >> chunkShift
	if c == len(h.chunks) {
		chunk := h.spare
		h.spare = nil
		if chunk == nil && c > 0 {
			chunk = make([]Entry[T], 0, chunkLen)
		}
		h.chunks = append(h.chunks, chunk)
	}
	h.chunks[c] = append(h.chunks[c], Entry[T]{At: at, seq: h.nextSeq(), Item: item})
	i := h.n
	h.n++
	h.index.insert(h, i, pr)
	h.up(i)
}

// lower moves the entry at position i to the earlier ready time at. The
// entry takes a new seq: among equal ready times it now counts as set last.
func (h *Heap[T]) lower(i int, at int64) {
	e := h.entry(i)
	e.At = at
	e.seq = h.nextSeq()
	h.up(i)
}

// removeAt removes the entry at position i and returns it. Positions come
// from find, which applies the batch.
func (h *Heap[T]) removeAt(i int) Entry[T] {
	e := *h.entry(i)
	h.index.remove(h, i)
	last := h.n - 1
	if i != last {
		*h.entry(i) = *h.entry(last)
		h.index.moved(h, i)
	}
	h.dropLast()
	if i != last {
		if i > 0 && before(h.entry(i), h.entry((i-1)/arity)) {
			h.up(i)
		} else {
			h.down(i)
		}
	}
	h.index.shrink(h)
	return e
}

// dropLast removes the last entry, which is no longer indexed, and gives
// back the chunk it emptied (keeping one spare).
func (h *Heap[T]) dropLast() {
	h.n--
	c := h.n >> chunkShift
	chunk := h.chunks[c]
	chunk[len(chunk)-1] = Entry[T]{} // let the item be collected
	chunk = chunk[:len(chunk)-1]
	h.chunks[c] = chunk
	if len(chunk) == 0 && c > 0 {
		h.chunks[c] = nil
		h.chunks = h.chunks[:c]
		if h.spare == nil {
			h.spare = chunk
		}
	}
	if h.n < chunkLen/2 {
		h.spare = nil // back to a small heap: keep only the first chunk
	}
}

// PopMin applies the batch, then removes the earliest entry and returns it.
// The heap must not be empty.
func (h *Heap[T]) PopMin() Entry[T] {
	h.apply()
	return h.removeAt(0)
}

// up restores the heap order above position i after its entry moved
// earlier. It moves the entry through a hole instead of swapping, so each
// level costs one copy.
func (h *Heap[T]) up(i int) {
	e := *h.entry(i)
	for i > 0 {
		p := (i - 1) / arity
		pe := h.entry(p)
		if !before(&e, pe) {
			break
		}
		*h.entry(i) = *pe
		h.index.moved(h, i)
		i = p
	}
	*h.entry(i) = e
	h.index.moved(h, i)
}

// down restores the heap order below position i after its entry moved
// later.
func (h *Heap[T]) down(i int) {
	n := h.n
	e := *h.entry(i)
	for {
		c := arity*i + 1
		if c >= n {
			break
		}
		m, me := c, h.entry(c)
		for k := c + 1; k < c+arity && k < n; k++ {
			if ke := h.entry(k); before(ke, me) {
				m, me = k, ke
			}
		}
		if !before(me, &e) {
			break
		}
		*h.entry(i) = *me
		h.index.moved(h, i)
		i = m
	}
	*h.entry(i) = e
	h.index.moved(h, i)
}

// nextSeq returns a fresh seq. When the counter is about to wrap (after 2^32
// pushes and updates) it renumbers the waiting entries 0..n-1 in their
// current order, so the order of ties survives; that costs one sort per
// four billion operations.
func (h *Heap[T]) nextSeq() uint32 {
	if h.seq == math.MaxUint32 {
		h.renumber()
	}
	s := h.seq
	h.seq++
	return s
}

func (h *Heap[T]) renumber() {
	order := make([]int, h.n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return h.entry(order[a]).seq < h.entry(order[b]).seq })
	for n, i := range order {
		h.entry(i).seq = uint32(n)
	}
	h.seq = uint32(len(order))
}
