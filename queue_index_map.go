//go:build !go1.24

package backoff

// waitIndex maps a waiting item to its position in the waitHeap. Before Go
// 1.24 there is no allocation-free way to hash an arbitrary comparable value
// (hash/maphash.Comparable), so this build uses a Go map: about 30 bytes more
// per waiting item than queue_index.go's table, and a map write for each move
// of an entry in the heap.
type waitIndex[T comparable] struct {
	pos  map[T]int
	peak int // the most items pos has held since it was made
}

// waitProbe carries nothing in this build: a map insert hashes again.
type waitProbe struct{}

func (x *waitIndex[T]) find(_ *waitHeap[T], item T) int {
	if p, ok := x.pos[item]; ok {
		return p
	}
	return -1
}

func (x *waitIndex[T]) lookup(h *waitHeap[T], item T) (int, waitProbe) {
	return x.find(h, item), waitProbe{}
}

// hashOf, prepare and lookupHashed exist for the batch (queue_heap_batch.go):
// a map needs no hash from its caller.
func (x *waitIndex[T]) hashOf(T) uint64 { return 0 }

func (x *waitIndex[T]) prepare(*waitHeap[T]) {}

func (x *waitIndex[T]) lookupHashed(h *waitHeap[T], item T, _ uint64) (int, waitProbe) {
	return x.lookup(h, item)
}

func (x *waitIndex[T]) insert(h *waitHeap[T], pos int, _ waitProbe) {
	if x.pos == nil {
		x.pos = make(map[T]int)
	}
	x.pos[h.entry(pos).item] = pos
	x.peak = max(x.peak, len(x.pos))
}

func (x *waitIndex[T]) moved(h *waitHeap[T], pos int) { x.pos[h.entry(pos).item] = pos }

func (x *waitIndex[T]) remove(h *waitHeap[T], pos int) { delete(x.pos, h.entry(pos).item) }

// shrink drops a map that once held many items when the heap empties: a Go
// map never gives back the memory of its peak size. A small map is kept, so
// a queue that keeps one item waiting does not allocate a map per wait.
func (x *waitIndex[T]) shrink(h *waitHeap[T]) {
	if h.n == 0 && x.peak > queueKeepSize {
		x.pos, x.peak = nil, 0
	}
}
