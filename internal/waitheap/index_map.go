//go:build !go1.24

package waitheap

import "fmt"

// keepSize is the number of items up to which the map is kept when the heap
// empties.
const keepSize = 1024

// index maps a waiting item to its position in the Heap. Before Go
// 1.24 there is no allocation-free way to hash an arbitrary comparable value
// (hash/maphash.Comparable), so this build uses a Go map: more bytes
// per waiting item than index.go's table, and a map write for each move
// of an entry in the heap.
type index[T comparable] struct {
	pos  map[T]int
	peak int // the most items pos has held since it was made
}

// probe carries nothing in this build: a map insert hashes again.
type probe struct{}

func (x *index[T]) find(_ *Heap[T], item T) int {
	if p, ok := x.pos[item]; ok {
		return p
	}
	return -1
}

func (x *index[T]) lookup(h *Heap[T], item T) (int, probe) {
	return x.find(h, item), probe{}
}

// hashOf, prepare and lookupHashed exist for the batch (batch.go):
// a map needs no hash from its caller.
func (x *index[T]) hashOf(T) uint64 { return 0 }

func (x *index[T]) prepare(*Heap[T]) {}

// touch has nothing to load before a map lookup.
func (x *index[T]) touch([]uint64) {}

func (x *index[T]) lookupHashed(h *Heap[T], item T, _ uint64) (int, probe) {
	return x.lookup(h, item)
}

func (x *index[T]) insert(h *Heap[T], pos int, _ probe) {
	if x.pos == nil {
		x.pos = make(map[T]int)
	}
	x.pos[h.entry(pos).Item] = pos
	x.peak = max(x.peak, len(x.pos))
}

func (x *index[T]) moved(h *Heap[T], pos int) { x.pos[h.entry(pos).Item] = pos }

func (x *index[T]) remove(h *Heap[T], pos int) { delete(x.pos, h.entry(pos).Item) }

// shrink drops a map that once held many items when the heap empties: a Go
// map never gives back the memory of its peak size. A small map is kept, so
// a queue that keeps one item waiting does not allocate a map per wait.
func (x *index[T]) shrink(h *Heap[T]) {
	if h.n == 0 && x.peak > keepSize {
		x.pos, x.peak = nil, 0
	}
}

// check returns an error unless the map has one key per entry, at its
// position.
func (x *index[T]) check(h *Heap[T]) error {
	if len(x.pos) != h.n {
		return fmt.Errorf("index: %d keys for %d entries", len(x.pos), h.n)
	}
	for i := 0; i < h.n; i++ {
		if e := h.entry(i); x.pos[e.Item] != i {
			return fmt.Errorf("index: item %v at %d, map says %d", e.Item, i, x.pos[e.Item])
		}
	}
	return nil
}

// size returns 0: the size of a Go map cannot be observed.
func (x *index[T]) size() int { return 0 }
