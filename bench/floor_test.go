package bench

import (
	"sync"
	"testing"
	"time"
)

// The floor: what the cheapest possible implementation of a hot path must
// still pay on this machine. Issue 5 asks that a target out of reach be shown
// to be so with numbers; these are the numbers, measured in the same run as
// the comparisons (impl=floor). None of them is an implementation of
// anything.

type floorEntry struct {
	updated, delay time.Duration
	attempts       int
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
//   - op=fresh-24B: storing 24 bytes per item into memory obtained fresh as
//     a collection grows to 4M items (in 12 KiB chunks, never copied), the
//     cost of the memory a waiting item needs, before any hashing or
//     ordering;
//   - op=map-insert: inserting a new int key into a Go map that grows to 4M
//     keys (then starts afresh), the cost of remembering that an item
//     waits, which AddAfter must do to find it again (client-go does it
//     too, in its waiting loop's map).
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
				e := m[ks[j]]
				e.attempts++
				e.delay = min(2*e.delay+time.Second, time.Minute)
				e.updated = now
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
			for i := 0; i < b.N; i++ {
				if n%chunkLen == 0 {
					if n >= 4_000_000 {
						chunks, n = nil, 0
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
	})
}
