package backoff_test

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/backoff"
)

// BenchmarkQueueAddGetDone is one item's trip through a queue: 0 allocs/op.
func BenchmarkQueueAddGetDone(b *testing.B) {
	q := backoff.NewQueue[int]()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q.Add(i & 1023)
		item, _ := q.Get()
		q.Done(item)
	}
}

// BenchmarkQueueAddGetDoneParallel is the same trip from GOMAXPROCS
// goroutines sharing the queue, each with its own items: 0 allocs/op.
func BenchmarkQueueAddGetDoneParallel(b *testing.B) {
	q := backoff.NewQueue[int]()
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		base := int(next.Add(1)) << 20
		for i := 0; pb.Next(); i++ {
			q.Add(base + i&1023)
			item, _ := q.Get()
			q.Done(item)
		}
	})
}

// BenchmarkDelayingQueueAddAfter adds distinct items an hour ahead on the
// real clock: a heap push each, with no timer change. Every 100 000 items the
// heap is emptied (outside the timer), so memory stays bounded; its regrowth
// is the only allocation, 0 allocs/op amortised.
func BenchmarkDelayingQueueAddAfter(b *testing.B) {
	q := backoff.NewDelayingQueue[int]()
	defer q.ShutDown()
	const block = 100_000
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if i%block == block-1 {
			b.StopTimer()
			q.TakeWaiting()
			b.StartTimer()
		}
		q.AddAfter(i, time.Hour)
	}
}

// BenchmarkDelayingQueueAddAfterUpdate moves waiting items earlier and
// later at random in a heap of 10 000: the decrease-key path.
func BenchmarkDelayingQueueAddAfterUpdate(b *testing.B) {
	q := backoff.NewDelayingQueue[int]()
	defer q.ShutDown()
	const n = 10_000
	for i := 0; i < n; i++ {
		q.AddAfter(i, time.Hour)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.AddAfter(i*7919%n, time.Hour-time.Duration(i))
	}
}

// BenchmarkDelayingQueueBytesPerWaitingItem measures the heap memory of a
// million int items waiting in a queue, in B/item. client-go's delaying
// queue holds about 95 B per item.
func BenchmarkDelayingQueueBytesPerWaitingItem(b *testing.B) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		q := backoff.NewDelayingQueue[int](backoff.WithClock(newQueueClock()))
		for item := 0; item < n; item++ {
			q.AddAfter(item, time.Hour)
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/n, "B/item")
		runtime.KeepAlive(q)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkDelayingQueueLateness measures, on the real clock, how late items
// added with a 10 ms delay reach a worker blocked in Get, against a bare
// time.AfterFunc for the same deadlines. One item is added every 50 µs, so
// about 200 wait at once. It reports the 50th and 99th percentile and the
// maximum lateness in µs. It is the one benchmark that uses the real clock.
func BenchmarkDelayingQueueLateness(b *testing.B) {
	const delay = 10 * time.Millisecond
	b.Run("queue", func(b *testing.B) {
		q := backoff.NewDelayingQueue[int]()
		deadlines := make([]time.Time, b.N)
		late := make([]time.Duration, b.N)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < b.N; n++ {
				item, _ := q.Get()
				late[item] = time.Since(deadlines[item])
				q.Done(item)
			}
		}()
		for i := 0; i < b.N; i++ {
			deadlines[i] = time.Now().Add(delay)
			q.AddAfter(i, delay)
			time.Sleep(50 * time.Microsecond)
		}
		wg.Wait()
		q.ShutDown()
		reportLateness(b, late)
	})
	b.Run("time.AfterFunc", func(b *testing.B) {
		deadlines := make([]time.Time, b.N)
		late := make([]time.Duration, b.N)
		var wg sync.WaitGroup
		wg.Add(b.N)
		for i := 0; i < b.N; i++ {
			deadlines[i] = time.Now().Add(delay)
			time.AfterFunc(delay, func() {
				late[i] = time.Since(deadlines[i])
				wg.Done()
			})
			time.Sleep(50 * time.Microsecond)
		}
		wg.Wait()
		reportLateness(b, late)
	})
	b.Run("time.AfterFunc+chan", func(b *testing.B) {
		// The bare timer plus the hand-off to a worker goroutine that any
		// queue needs: the floor for a delaying queue.
		deadlines := make([]time.Time, b.N)
		late := make([]time.Duration, b.N)
		ch := make(chan int, b.N)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < b.N; n++ {
				i := <-ch
				late[i] = time.Since(deadlines[i])
			}
		}()
		for i := 0; i < b.N; i++ {
			deadlines[i] = time.Now().Add(delay)
			time.AfterFunc(delay, func() { ch <- i })
			time.Sleep(50 * time.Microsecond)
		}
		wg.Wait()
		reportLateness(b, late)
	})
}

func reportLateness(b *testing.B, late []time.Duration) {
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(late[len(late)/2]), "p50-µs")
	b.ReportMetric(us(late[len(late)*99/100]), "p99-µs")
	b.ReportMetric(us(late[len(late)-1]), "max-µs")
	b.ReportMetric(0, "ns/op") // the wall time per item is the 50 µs pacing
}
