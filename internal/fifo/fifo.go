// Package fifo is a first-in first-out queue of values that grows in chunks,
// never copying what it holds, and gives its memory back as it drains.
package fifo

const (
	// minChunk is the size of the first chunk: a queue that holds a few
	// values at a time allocates nothing after its first Push.
	minChunk = 16
	// MaxChunk is the size that chunks double up to.
	MaxChunk = 512
)

// chunk is a block of the queue: its live values are buf[head:tail].
type chunk[E any] struct {
	buf        []E
	head, tail int
	next       *chunk[E]
}

// Queue is a FIFO of values of type E: a linked list of chunks, pushed at
// the tail chunk and popped at the head chunk.
//
// Chunks, rather than one ring buffer that doubles, so that growing never
// copies the values: a work queue's backlog reaches millions of items, and
// a doubling that copies them all stalls its owner's lock (see
// BenchmarkQueueAddGetDone). A chunk that empties is kept as the one spare
// for the next growth, so a queue that stays around one chunk's worth of
// values allocates nothing, and the memory follows the queue down chunk by
// chunk.
//
// The zero value is an empty queue. A Queue is not safe for concurrent use.
type Queue[E any] struct {
	head, tail *chunk[E]
	spare      *chunk[E]
	n          int // number of values
}

// Len returns the number of values.
func (q *Queue[E]) Len() int { return q.n }

// Push appends v. O(1); it allocates only when the chunks are full and there
// is no spare.
func (q *Queue[E]) Push(v E) {
	c := q.tail
	if c == nil || c.tail == len(c.buf) {
		c = q.newChunk()
		if q.tail == nil {
			q.head = c
		} else {
			q.tail.next = c
		}
		q.tail = c
	}
	c.buf[c.tail] = v
	c.tail++
	q.n++
}

// Pop removes and returns the oldest value. The queue must not be empty.
func (q *Queue[E]) Pop() E {
	c := q.head
	v := c.buf[c.head]
	var zero E
	c.buf[c.head] = zero // let what v refers to be collected
	c.head++
	q.n--
	if c.head == c.tail {
		// The chunk is empty. The last chunk is reused in place; another is
		// unlinked and kept as the spare if it is the larger.
		if c == q.tail {
			c.head, c.tail = 0, 0
		} else {
			q.head = c.next
			c.head, c.tail, c.next = 0, 0, nil
			if q.spare == nil || len(c.buf) > len(q.spare.buf) {
				q.spare = c
			}
		}
	}
	return v
}

// newChunk returns an empty chunk for the tail: the spare if there is one,
// else a new chunk twice the size of the current tail's, up to MaxChunk.
func (q *Queue[E]) newChunk() *chunk[E] {
	if c := q.spare; c != nil {
		q.spare = nil
		return c
	}
	size := minChunk
	if q.tail != nil {
		size = min(2*len(q.tail.buf), MaxChunk)
	}
	return &chunk[E]{buf: make([]E, size)}
}

// Cap returns the number of values the queue's chunks, the spare included,
// can hold: its memory, for tests that check that a burst's memory goes
// back.
func (q *Queue[E]) Cap() int {
	n := 0
	for c := q.head; c != nil; c = c.next {
		n += len(c.buf)
	}
	if q.spare != nil {
		n += len(q.spare.buf)
	}
	return n
}

// Peek returns the oldest value without removing it. The queue must not be
// empty.
func (q *Queue[E]) Peek() E {
	c := q.head
	return c.buf[c.head]
}
