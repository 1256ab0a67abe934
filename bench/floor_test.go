package bench

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// The floor: what the cheapest possible implementation of a hot path must
// still pay on this machine, so that a target out of reach is shown to be so
// with numbers measured in the same run as the comparisons (impl=floor). None of them is an implementation of
// anything.

// floorEntry is the state Backoff.Next keeps per key.
type floorEntry struct {
	updated, delay time.Duration
	attempts       int
}

// next is Backoff.Next's write to the entry: one more attempt, the delay
// doubled up to a cap, the time of the update.
func (e *floorEntry) next(now time.Duration) {
	e.attempts++
	e.delay = min(2*e.delay+time.Second, time.Minute)
	e.updated = now
}

var (
	sinkTime  time.Time
	sinkSince time.Duration
	sinkInt   int
)

// BenchmarkFloor measures the primitives the hot paths are made of:
//   - op=now, op=since: reading the clock with and without the wall clock
//     (time.Now against time.Since of a monotonic time);
//   - op=mutex: an uncontended Lock+Unlock;
//   - op=map/keys=100k: finding an entry by string key among 100,000, and
//     writing to it (a map of pointers, as in client-go's Backoff), which is
//     Backoff.Next without its arithmetic;
//   - op=next-floor/keys=100k: that, plus time.Since and a mutex: no
//     implementation of Backoff.Next that reads the clock and finds the key
//     can be cheaper;
//   - op=fresh-24B: storing 24 bytes per item into memory obtained fresh
//     from the operating system as a collection grows to 4M items (in 12 KiB
//     chunks, never copied), the cost of the memory a waiting item needs,
//     before any hashing or ordering. Each 4M-item round starts after the
//     previous round's memory has been returned to the operating system
//     (debug.FreeOSMemory, outside the timed region), so that every page is
//     touched for the first time, as when a queue grows in a fresh process;
//     memory the Go runtime has already faulted in and reuses costs a tenth
//     of that or less. The page faults are the cost: multiplied by 4096/24,
//     this is the price of a first touch of a 4 KiB page;
//   - op=map-insert: inserting a new int key into a Go map that grows to 4M
//     keys (then starts afresh), the cost of remembering that an item
//     waits, which AddAfter must do to find it again (client-go does it
//     too, in its waiting loop's map);
//   - op=index-floor/slots=4M: under a mutex, time.Since, the read of a
//     1-byte tag at a random slot of 4M and a 4-byte store at the same slot
//     of another array: the memory work that our AddAfter's index does for
//     a new item at the size a one-second run reaches (internal/waitheap/index.go:
//     tags, then the heap position), without hashing, growth or the heap.
//     With the position array far larger than the caches, the store's
//     cache miss is paid at the Unlock, which must wait for it;
//   - op=next-floor/keys=100k/mode=striped-parallel: next-floor run by
//     b.RunParallel (one goroutine per core), with the key's entry guarded by
//     one of 8 mutexes on separate cache lines, as any sharded, locked
//     Backoff does. Both goroutines update every key, so each call finds its
//     mutex's cache line last written by the other core about half the time
//     and has to fetch it from there;
//   - op=next-floor/keys=100k/mode=lockfree-parallel: the same without any
//     mutex (the entry updated with atomics), the floor of a Backoff whose
//     Next takes no lock on its common path.
//
// Comparing the last two with op=next-floor shows what a cross-core
// cache-line transfer costs on this machine, which bounds how far a locked
// Next can scale.
func BenchmarkFloor(b *testing.B) {
	b.Run("impl=floor", func(b *testing.B) {
		b.Run("op=now", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				sinkTime = time.Now()
			}
		})
		b.Run("op=since", func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				sinkSince = time.Since(start)
			}
		})
		b.Run("op=mutex", func(b *testing.B) {
			b.ReportAllocs()
			var mu sync.Mutex
			for i := 0; i < b.N; i++ {
				mu.Lock()
				sinkInt++
				mu.Unlock()
			}
		})
		ks := keys(100_000)
		m := make(map[string]*floorEntry, len(ks))
		for _, k := range ks {
			m[k] = &floorEntry{}
		}
		b.Run("op=map/keys=100k", func(b *testing.B) {
			b.ReportAllocs()
			j := 0
			for i := 0; i < b.N; i++ {
				e := m[ks[j]]
				e.attempts++
				if j++; j == len(ks) {
					j = 0
				}
			}
		})
		b.Run("op=next-floor/keys=100k", func(b *testing.B) {
			b.ReportAllocs()
			var mu sync.Mutex
			start := time.Now()
			j := 0
			for i := 0; i < b.N; i++ {
				now := time.Since(start)
				mu.Lock()
				m[ks[j]].next(now)
				mu.Unlock()
				if j++; j == len(ks) {
					j = 0
				}
			}
		})
		b.Run("op=fresh-24B", func(b *testing.B) {
			b.ReportAllocs()
			const chunkLen = 512
			var chunks [][]floorEntry
			n := 0
			debug.FreeOSMemory() // what earlier runs left behind, too
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if n%chunkLen == 0 {
					if n >= 4_000_000 {
						b.StopTimer()
						chunks, n = nil, 0
						debug.FreeOSMemory()
						b.StartTimer()
					}
					chunks = append(chunks, make([]floorEntry, 0, chunkLen))
				}
				c := len(chunks) - 1
				chunks[c] = append(chunks[c], floorEntry{updated: time.Duration(i)})
				n++
			}
			sinkInt = len(chunks)
		})
		b.Run("op=map-insert", func(b *testing.B) {
			b.ReportAllocs()
			m := map[int]uint32{}
			for i := 0; i < b.N; i++ {
				if len(m) == 4_000_000 {
					m = map[int]uint32{}
				}
				m[i] = uint32(i)
			}
			sinkInt = len(m)
		})
		b.Run("op=index-floor/slots=4M", func(b *testing.B) {
			b.ReportAllocs()
			const slots = 1 << 22
			tags := make([]uint8, slots)
			positions := make([]uint32, slots)
			for i := range tags { // fault the memory in first
				tags[i], positions[i] = 0x80, 1
			}
			var mu sync.Mutex
			epoch := time.Now()
			x := uint64(0x9E3779B97F4A7C15)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x ^= x << 13 // xorshift: the slot a hash would pick
				x ^= x >> 7
				x ^= x << 17
				s := x & (slots - 1)
				mu.Lock()
				now := time.Since(epoch)
				if tags[s] != 0 {
					positions[s] = uint32(now)
				}
				mu.Unlock()
			}
		})
		b.Run("op=next-floor/keys=100k/mode=striped-parallel", func(b *testing.B) {
			b.ReportAllocs()
			type stripe struct {
				mu sync.Mutex
				_  [128 - unsafe.Sizeof(sync.Mutex{})]byte
			}
			stripes := make([]stripe, 8)
			benchParallelKeys(b, ks, func(j int, now time.Duration) {
				s := &stripes[uint32(j*0x9E3779B1)>>29]
				s.mu.Lock()
				m[ks[j]].next(now)
				s.mu.Unlock()
			})
		})
		atomicEntries := make(map[string]*floorAtomicEntry, len(ks))
		for _, k := range ks {
			atomicEntries[k] = &floorAtomicEntry{}
		}
		b.Run("op=next-floor/keys=100k/mode=lockfree-parallel", func(b *testing.B) {
			b.ReportAllocs()
			benchParallelKeys(b, ks, func(j int, now time.Duration) {
				e := atomicEntries[ks[j]]
				e.attempts.Add(1)
				e.delay.Store(int64(min(2*time.Duration(e.delay.Load())+time.Second, time.Minute)))
				e.updated.Store(int64(now))
			})
		})
	})
}

// floorAtomicEntry is floorEntry updated without a lock (the same write as
// floorEntry.next, with atomics).
type floorAtomicEntry struct {
	updated, delay, attempts atomic.Int64
}

// benchParallelKeys calls op from b.RunParallel with successive indices into
// ks, each goroutine starting at its own place, and the time since the start
// (read before op, as Backoff.Next reads the clock before it locks).
func benchParallelKeys(b *testing.B, ks []string, op func(j int, now time.Duration)) {
	var offset atomic.Int64
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		j := int(offset.Add(7919)) % len(ks)
		for pb.Next() {
			op(j, time.Since(start))
			if j++; j == len(ks) {
				j = 0
			}
		}
	})
}
