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

// waitChunkShift sets the size of the chunks that hold the heap's entries:
// 512 entries, 12 KiB for int items.
//
// The entries live in fixed-size chunks rather than one slice so that
// growing the heap never copies it: appending to a slice of a million
// entries copies all of them each time its capacity runs out, about four
// times the final size in all, into freshly faulted memory. Measured on the
// 2-core VM of BENCHMARKS.md, that copying was 40% of the time of AddAfter
// into a queue growing to 2M waiting items. A chunk is also the unit in
// which the heap gives memory back, so it never holds more than one spare
// chunk beyond what its entries need.
const waitChunkShift = 9

const (
	waitChunkLen  = 1 << waitChunkShift
	waitChunkMask = waitChunkLen - 1
)

// waitHeap is a min-heap of waiting items ordered by waitBefore, with an
// index from item to heap position: finding an item is O(1) expected, and
// pushing, moving an item earlier and removing any item are O(log n).
//
// Its memory is the entry chunks plus the index. Both follow the heap down
// when it shrinks, unlike a Go map, which never gives memory back.
type waitHeap[T comparable] struct {
	// chunks hold the entries: position i is chunks[i>>waitChunkShift]
	// [i&waitChunkMask]. Every chunk is full but the last, which is not
	// empty; the first grows by append up to waitChunkLen so that a small
	// heap stays small, the others are allocated at full capacity.
	chunks [][]waitEntry[T]
	spare  []waitEntry[T] // an empty full-size chunk kept for the next growth, or nil
	n      int            // the number of entries
	index  waitIndex[T]
	seq    uint32 // the seq that the next push or lower assigns

	batch waitBatch[T] // pushOrLower calls not applied yet (queue_heap_batch.go)
}

// len returns the number of entries plus the number of batched pushOrLower
// calls: more than zero exactly when an item waits, and the number of
// waiting items once the batch is applied (find and popMin apply it).
func (h *waitHeap[T]) len() int { return h.n + h.batch.n }

// entry returns the entry at position i < n.
func (h *waitHeap[T]) entry(i int) *waitEntry[T] {
	return &h.chunks[i>>waitChunkShift][i&waitChunkMask]
}

// minAt returns the earliest ready time of a waiting item, batched or not.
// The heap must not be empty (len() > 0).
//
// It leaves the batch alone, so that re-arming the timer after an AddAfter
// stays cheap. A batched time earlier than every entry's is exact: applying
// it either pushes a new entry with that time or moves an entry earlier to
// it.
func (h *waitHeap[T]) minAt() int64 {
	if h.batch.n > 0 && (h.n == 0 || h.batch.minAt < h.chunks[0][0].at) {
		return h.batch.minAt
	}
	return h.chunks[0][0].at
}

// find applies the batch and returns the heap position of item, or -1 if it
// does not wait.
func (h *waitHeap[T]) find(item T) int {
	h.apply()
	if h.n == 0 {
		return -1
	}
	return h.index.find(h, item)
}

// push applies the batch, then adds item, which must not be in the heap,
// with ready time at.
func (h *waitHeap[T]) push(item T, at int64) {
	h.apply()
	_, pr := h.index.lookup(h, item)
	h.pushProbed(item, at, pr)
}

// pushOrLowerHashed makes item, whose hash is hv (index.hashOf), wait until
// at, or until its current ready time if that is earlier. It is the one
// probe of the index per AddAfter: a new item goes into the free slot where
// the lookup ended. The index table must exist (index.prepare).
func (h *waitHeap[T]) pushOrLowerHashed(item T, at int64, hv uint64) {
	i, pr := h.index.lookupHashed(h, item, hv)
	if i < 0 {
		h.pushProbed(item, at, pr)
	} else if at < h.entry(i).at {
		h.lower(i, at)
	}
}

// pushProbed adds item, which a lookup missed with probe pr.
func (h *waitHeap[T]) pushProbed(item T, at int64, pr waitProbe) {
	c := h.n >> waitChunkShift
	if c == len(h.chunks) {
		chunk := h.spare
		h.spare = nil
		if chunk == nil && c > 0 {
			chunk = make([]waitEntry[T], 0, waitChunkLen)
		}
		h.chunks = append(h.chunks, chunk)
	}
	h.chunks[c] = append(h.chunks[c], waitEntry[T]{at: at, seq: h.nextSeq(), item: item})
	i := h.n
	h.n++
	h.index.insert(h, i, pr)
	h.up(i)
}

// lower moves the entry at position i to the earlier ready time at. The
// entry takes a new seq: among equal ready times it now counts as set last.
func (h *waitHeap[T]) lower(i int, at int64) {
	e := h.entry(i)
	e.at = at
	e.seq = h.nextSeq()
	h.up(i)
}

// removeAt removes the entry at position i and returns it. Positions come
// from find, which applies the batch.
func (h *waitHeap[T]) removeAt(i int) waitEntry[T] {
	e := *h.entry(i)
	h.index.remove(h, i)
	last := h.n - 1
	if i != last {
		*h.entry(i) = *h.entry(last)
		h.index.moved(h, i)
	}
	h.dropLast()
	if i != last {
		if i > 0 && waitBefore(h.entry(i), h.entry((i-1)/waitArity)) {
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
func (h *waitHeap[T]) dropLast() {
	h.n--
	c := h.n >> waitChunkShift
	chunk := h.chunks[c]
	chunk[len(chunk)-1] = waitEntry[T]{} // let the item be collected
	chunk = chunk[:len(chunk)-1]
	h.chunks[c] = chunk
	if len(chunk) == 0 && c > 0 {
		h.chunks[c] = nil
		h.chunks = h.chunks[:c]
		if h.spare == nil {
			h.spare = chunk
		}
	}
	if h.n < waitChunkLen/2 {
		h.spare = nil // back to a small heap: keep only the first chunk
	}
}

// popMin applies the batch, then removes the earliest entry and returns it.
// The heap must not be empty.
func (h *waitHeap[T]) popMin() waitEntry[T] {
	h.apply()
	return h.removeAt(0)
}

// up restores the heap order above position i after its entry moved
// earlier. It moves the entry through a hole instead of swapping, so each
// level costs one copy.
func (h *waitHeap[T]) up(i int) {
	e := *h.entry(i)
	for i > 0 {
		p := (i - 1) / waitArity
		pe := h.entry(p)
		if !waitBefore(&e, pe) {
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
func (h *waitHeap[T]) down(i int) {
	n := h.n
	e := *h.entry(i)
	for {
		c := waitArity*i + 1
		if c >= n {
			break
		}
		m, me := c, h.entry(c)
		for k := c + 1; k < c+waitArity && k < n; k++ {
			if ke := h.entry(k); waitBefore(ke, me) {
				m, me = k, ke
			}
		}
		if !waitBefore(me, &e) {
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
func (h *waitHeap[T]) nextSeq() uint32 {
	if h.seq == math.MaxUint32 {
		h.renumber()
	}
	s := h.seq
	h.seq++
	return s
}

func (h *waitHeap[T]) renumber() {
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
