package backoff

// readyEntry is an item in a queue's FIFO of items ready to be handed out.
type readyEntry[T comparable] struct {
	item T
	at   int64  // when the item joined the FIFO, since the epoch (read only with metrics)
	hash uint64 // the item's hash in the queue's itemStates, which Get needs under the lock
}

const (
	// readyMinChunk is the size of a FIFO's first chunk: a queue that holds
	// a few items at a time allocates nothing after its first Add.
	readyMinChunk = 16
	// readyMaxChunk is the size that chunks double up to: 8 KiB for int
	// items.
	readyMaxChunk = 512
)

// readyChunk is a block of the FIFO: its live entries are buf[head:tail].
type readyChunk[T comparable] struct {
	buf        []readyEntry[T]
	head, tail int
	next       *readyChunk[T]
}

// readyFIFO is the FIFO of ready items: a linked list of chunks, pushed at
// the tail chunk and popped at the head chunk.
//
// Chunks, rather than one ring buffer that doubles, so that growing never
// copies the entries: under a burst the FIFO reaches millions of items, and
// each doubling of a ring copied all of them while the queue's mutex was
// held, stalling every producer and worker (with 2 producers and 2 workers,
// 10% of the time went to those copies). A chunk that empties is kept as
// the one spare for the next growth, so a queue that stays around one
// chunk's worth of items allocates nothing, and the memory follows the
// FIFO down chunk by chunk.
type readyFIFO[T comparable] struct {
	head, tail *readyChunk[T]
	spare      *readyChunk[T]
	n          int // number of entries
}

func (r *readyFIFO[T]) len() int { return r.n }

// push appends item, which has hash h and joined at time at.
func (r *readyFIFO[T]) push(item T, h uint64, at int64) {
	c := r.tail
	if c == nil || c.tail == len(c.buf) {
		c = r.newChunk()
		if r.tail == nil {
			r.head = c
		} else {
			r.tail.next = c
		}
		r.tail = c
	}
	c.buf[c.tail] = readyEntry[T]{item: item, at: at, hash: h}
	c.tail++
	r.n++
}

// pop removes and returns the oldest entry. The FIFO must not be empty.
func (r *readyFIFO[T]) pop() readyEntry[T] {
	c := r.head
	e := c.buf[c.head]
	c.buf[c.head] = readyEntry[T]{} // let the item be collected
	c.head++
	r.n--
	if c.head == c.tail {
		// The chunk is empty. The last chunk is reused in place; another is
		// unlinked and kept as the spare if it is the larger.
		if c == r.tail {
			c.head, c.tail = 0, 0
		} else {
			r.head = c.next
			c.head, c.tail, c.next = 0, 0, nil
			if r.spare == nil || len(c.buf) > len(r.spare.buf) {
				r.spare = c
			}
		}
	}
	return e
}

// newChunk returns an empty chunk for the tail: the spare if there is one,
// else a new chunk twice the size of the current tail's, up to
// readyMaxChunk.
func (r *readyFIFO[T]) newChunk() *readyChunk[T] {
	if c := r.spare; c != nil {
		r.spare = nil
		return c
	}
	size := readyMinChunk
	if r.tail != nil {
		size = min(2*len(r.tail.buf), readyMaxChunk)
	}
	return &readyChunk[T]{buf: make([]readyEntry[T], size)}
}
