package backoff

// readyEntry is an item in a queue's FIFO of items ready to be handed out.
type readyEntry[T comparable] struct {
	item T
	at   int64 // when the item joined the FIFO, since the epoch (read only with metrics)
}

// readyMinSize is the smallest FIFO buffer, and the size below which it is
// never shrunk: a queue that holds a few items at a time allocates nothing
// after its first Add.
const readyMinSize = 16

// readyRing is the FIFO of ready items: a ring buffer whose size is a power
// of two. It grows by doubling and shrinks by half once it is less than a
// quarter full, so steady state reuses one buffer (client-go's queue slice
// reallocates as it slides along its backing array).
type readyRing[T comparable] struct {
	buf  []readyEntry[T]
	head int // index of the oldest entry
	n    int // number of entries
}

func (r *readyRing[T]) len() int { return r.n }

// push appends item, which joined at time at.
func (r *readyRing[T]) push(item T, at int64) {
	if r.n == len(r.buf) {
		r.resize(max(2*len(r.buf), readyMinSize))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = readyEntry[T]{item: item, at: at}
	r.n++
}

// pop removes and returns the oldest entry. The ring must not be empty.
func (r *readyRing[T]) pop() readyEntry[T] {
	e := r.buf[r.head]
	r.buf[r.head] = readyEntry[T]{} // let the item be collected
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > readyMinSize && r.n < len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return e
}

// resize moves the entries, oldest first, to a new buffer of size entries.
func (r *readyRing[T]) resize(size int) {
	buf := make([]readyEntry[T], size)
	if r.n > 0 {
		k := copy(buf, r.buf[r.head:min(r.head+r.n, len(r.buf))])
		copy(buf[k:], r.buf[:r.n-k])
	}
	r.buf, r.head = buf, 0
}
