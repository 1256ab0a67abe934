// Package itemstate maps the items a work queue knows to small state values:
// the queue's "dirty" and "processing" sets in one table. An item whose
// state is 0 has no entry. Next to its state, each entry holds an aux byte
// the owner may use (the queue keeps the priority of an item's pending run
// there), 0 unless set.
//
// A Table is not safe for concurrent use: its owner serialises every call
// with its own lock, except Hash and Prefetch, which need none.
package itemstate

// State is an item's state: two bits, 1 to 3; 0 means no entry.
type State = uint8

// MaxState is the largest state a Table stores.
const MaxState State = 3

// KeepSize is the number of entries up to which a Table keeps its memory
// when it empties: a queue that oscillates between a few items and none
// then allocates nothing, while the memory of a burst goes back.
const KeepSize = 1024
