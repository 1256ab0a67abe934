package bench

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// farDelays are deterministic pseudo-random delays between 1 h and 2 h: far
// enough that nothing fires during a benchmark, spread so that each AddAfter
// lands at a random place in the heap rather than always at its end.
var farDelays = func() []time.Duration {
	r := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, 1<<16)
	for i := range ds {
		ds[i] = time.Hour + time.Duration(r.Int64N(int64(time.Hour)))
	}
	return ds
}()

const farMask = 1<<16 - 1

// sentinel is the item absorb adds; every other item is non-negative.
const sentinel = -1

// absorb returns once q has absorbed every AddAfter made before it: it adds
// sentinel with a 1 ns delay and waits in Get until the sentinel comes out.
// client-go's delaying queue feeds its heap from a FIFO channel and
// controller-runtime's priority queue from an append-only buffer, so the
// sentinel comes out only after everything queued before it has been
// inserted. See the package comment.
func absorb(b testing.TB, q queue) {
	b.Helper()
	q.AddAfter(sentinel, time.Nanosecond)
	for {
		item, shutdown := q.Get()
		if shutdown {
			b.Fatal("queue shut down before the sentinel came out")
		}
		q.Done(item)
		if item == sentinel {
			return
		}
	}
}

// fillFar adds items from..to-1, each waiting 1–2 h.
func fillFar(q queue, from, to int) {
	for i := from; i < to; i++ {
		q.AddAfter(i, farDelays[i&farMask])
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// shutDownAndSettle shuts q down and waits (outside any timed region) until
// what it held is garbage and collected, so that it does not count in the
// next measurement: until the goroutines it ran have exited (goroutines is
// the count before q was built) and the live heap is back to within 1 MiB of
// heapBefore (the live heap before q was built). The second condition is not
// only for the goroutines of client-go and controller-runtime: a stopped
// time.AfterFunc timer stays in the Go runtime's timer heap until the runtime
// lazily deletes it, and its callback keeps the queue reachable until then.
// It gives up after 10 s (some implementations never get back within 1 MiB),
// or 1 s with -short, where the figures are not read: CI's run of every
// benchmark once spent most of its time here.
func shutDownAndSettle(q queue, goroutines int, heapBefore uint64) {
	q.ShutDown()
	settle := 10 * time.Second
	if testing.Short() {
		settle = time.Second
	}
	deadline := time.Now().Add(settle)
	for time.Now().Before(deadline) {
		if runtime.NumGoroutine() <= goroutines && liveHeap() <= heapBefore+1<<20 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkQueueAddGetDone measures the hot path of every controller: an item
// added, handed to a worker, and marked done. mode=serial does all three on
// one goroutine; mode=2p2w runs 2 producers adding distinct items and 2
// workers draining them, and reports throughput in items/s (ns/op is then per
// item).
func BenchmarkQueueAddGetDone(b *testing.B) {
	forEach(b, queueImpls, func(b *testing.B, mk func() queue) {
		b.Run("mode=serial", func(b *testing.B) {
			b.ReportAllocs()
			q := mk()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.Add(i)
				item, _ := q.Get()
				q.Done(item)
			}
			b.StopTimer()
			q.ShutDown()
		})
		b.Run("mode=2p2w", func(b *testing.B) {
			b.ReportAllocs()
			q := mk()
			run2p2w(b, q, func(i int) { q.Add(i) })
		})
	})
}

// BenchmarkAddAfter measures AddAfter of distinct items 1–2 h in the future
// (nothing fires), per call, including the time an asynchronous queue takes
// to absorb them (absorb); cpu-ns/op is the CPU time per call of every
// goroutine (reportCPU).
//
// The queue grows to b.N items, and a call costs more in a larger queue, so
// run it with a fixed count, the same for every implementation
// (-benchtime=3000000x): with a time-based benchtime each implementation
// would be measured at a different size, the fastest at the largest.
func BenchmarkAddAfter(b *testing.B) {
	forEach(b, queueImpls, func(b *testing.B, mk func() queue) {
		b.ReportAllocs()
		q := mk()
		b.ResetTimer()
		cpu := cpuTime()
		fillFar(q, 0, b.N)
		absorb(b, q)
		reportCPU(b, cpuTime()-cpu)
		b.StopTimer()
		q.ShutDown()
	})
}

// BenchmarkAddAfterSmall is BenchmarkAddAfter in queues that hold at most
// 10,000 waiting items, nearer what a controller holds: every 10,000 calls
// the queue is shut down and a new one is made, both counted. It runs at
// the hot paths' -benchtime, so the queues are made again and again.
func BenchmarkAddAfterSmall(b *testing.B) {
	const size = 10_000
	forEach(b, queueImpls, func(b *testing.B, mk func() queue) {
		b.ReportAllocs()
		cpu := cpuTime()
		q := mk()
		for i := range b.N {
			if i%size == 0 && i > 0 {
				absorb(b, q)
				q.ShutDown()
				q = mk()
			}
			q.AddAfter(i%size, farDelays[i&farMask])
		}
		absorb(b, q)
		reportCPU(b, cpuTime()-cpu)
		b.StopTimer()
		q.ShutDown()
	})
}

// BenchmarkAddAfterPrefaulted is BenchmarkAddAfter in a process whose heap
// has already been faulted in, as in a long-running controller: before the
// timed region, a ballast of 512 bytes per op (more than any implementation
// allocates per AddAfter) is written page by page and freed, so that the
// queue's allocations reuse memory the process already holds instead of
// taking fresh pages from the operating system. It separates the price of
// first touches, which is high on the VM of BENCHMARKS.md (BenchmarkFloor
// op=fresh-24B), from the rest of each implementation's cost. faults/kop is
// the minor page faults per 1,000 ops in the timed region (getrusage): near
// zero when the premise held. Run it with a fixed count, the same for every
// implementation (-benchtime=3000000x), so that all queues reach the same
// size; with -benchtime=1x (CI) there is no ballast.
func BenchmarkAddAfterPrefaulted(b *testing.B) {
	forEach(b, queueImpls, func(b *testing.B, mk func() queue) {
		b.ReportAllocs()
		if b.N > 1 {
			prefault(512 * b.N)
		}
		faults := minorFaults()
		q := mk()
		b.ResetTimer()
		cpu := cpuTime()
		fillFar(q, 0, b.N)
		absorb(b, q)
		reportCPU(b, cpuTime()-cpu)
		b.StopTimer()
		b.ReportMetric(float64(minorFaults()-faults)/float64(b.N)*1000, "faults/kop")
		q.ShutDown()
	})
}

// ballast keeps prefault's allocation reachable while it is written.
var ballast []byte

// prefault makes the process hold n bytes of heap memory that are faulted in
// and free: it writes one byte per 4 KiB page of a fresh n-byte allocation,
// then frees it. The Go runtime returns free memory to the operating system
// only gradually (its background scavenger), so allocations made in the next
// seconds reuse these pages.
func prefault(n int) {
	ballast = make([]byte, n)
	for i := 0; i < n; i += 4096 {
		ballast[i] = 1
	}
	ballast = nil
	runtime.GC()
}

// minorFaults returns the minor page faults this process has taken.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Minflt
}

// waitingHeapItems is how many items BenchmarkWaitingHeap holds: 1,000,000,
// or 100,000 with -short (CI's run of every benchmark once, where the
// figures are not read).
func waitingHeapItems() int {
	if testing.Short() {
		return 100_000
	}
	return 1_000_000
}

// BenchmarkWaitingHeap measures the live heap per waiting item with 1,000,000
// int items waiting 1–2 h (B/item: runtime.ReadMemStats after a full GC, the
// queue's whole footprint divided by the item count). One op builds such a
// queue from empty, so ns/op is the time to fill it; run it with
// -benchtime=1x.
func BenchmarkWaitingHeap(b *testing.B) {
	forEach(b, queueImpls, func(b *testing.B, mk func() queue) {
		b.ReportAllocs()
		var bytes uint64
		items := waitingHeapItems()
		for op := 0; op < b.N; op++ {
			b.StopTimer()
			g0 := runtime.NumGoroutine()
			before := liveHeap()
			b.StartTimer()
			q := mk()
			fillFar(q, 0, items)
			absorb(b, q)
			b.StopTimer()
			bytes += liveHeap() - before
			runtime.KeepAlive(q)
			shutDownAndSettle(q, g0, before)
			b.StartTimer()
		}
		b.ReportMetric(float64(bytes)/float64(b.N*items), "B/item")
	})
}

// growthSizes are the waiting-item counts of BenchmarkGrowth.
var growthSizes = []int{10_000, 100_000, 1_000_000, 10_000_000}

// growthState is a queue filled to n waiting items, kept between the calls
// the testing package makes of one sub-benchmark (b.N = 1, then the real
// b.N), so that a 10M-item fill happens once per sub-benchmark, not per call.
type growthState struct {
	name         string // b.Name() of the sub-benchmark that owns it
	q            queue
	g0           int    // goroutines before q was built
	heap0        uint64 // live heap before q was built
	n            int    // items it was filled with
	next         int    // next distinct item to add
	sinceFill    int    // AddAfter calls since the fill
	bytesPerItem float64
}

var growth *growthState

func releaseGrowth() {
	if growth != nil {
		shutDownAndSettle(growth.q, growth.g0, growth.heap0)
		growth = nil
	}
}

// refill replaces the state's queue by a fresh one holding n waiting items
// and records its heap bytes per item.
func (g *growthState) refill(b *testing.B, mk func() queue) {
	if g.q != nil {
		shutDownAndSettle(g.q, g.g0, g.heap0)
		g.q = nil
	}
	g.g0 = runtime.NumGoroutine()
	g.heap0 = liveHeap()
	g.q = mk()
	fillFar(g.q, 0, g.n)
	absorb(b, g.q)
	g.bytesPerItem = float64(liveHeap()-g.heap0) / float64(g.n)
	g.next, g.sinceFill = g.n, 0
}

// BenchmarkGrowth measures AddAfter (ns/op) into a queue that already holds n
// items waiting 1–2 h, and the live heap per waiting item at n (B/item), for
// n = 10k, 100k, 1M and 10M: O(log n) time, flat memory. The queue is
// refilled (untimed) after every n/4 timed adds, so its size stays within
// [n, 1.25n]. Every timed stretch of n/4 adds ends with the barrier
// (absorb), timed, so that an asynchronous queue is charged for the work it
// still had queued when the stretch ended; cpu-ns/op is the process's CPU
// time over the timed stretches (reportCPU). run.sh runs it with a fixed
// -benchtime=Nx. -short skips 1M and 10M.
func BenchmarkGrowth(b *testing.B) {
	defer releaseGrowth()
	forEach(b, queueImpls, func(b *testing.B, mk func() queue) {
		for _, n := range growthSizes {
			b.Run("n="+count(n), func(b *testing.B) {
				if n > 100_000 && testing.Short() {
					b.Skip("1M and 10M waiting items take seconds to minutes to fill; skipped with -short")
				}
				b.ReportAllocs()
				b.StopTimer()
				if growth == nil || growth.name != b.Name() {
					releaseGrowth()
					growth = &growthState{name: b.Name(), n: n}
					growth.refill(b, mk)
				}
				g := growth
				chunk := max(n/4, 1)
				var cpu time.Duration
				cpu0 := cpuTime()
				b.StartTimer()
				for i := 0; i < b.N; i++ {
					if g.sinceFill == chunk {
						absorb(b, g.q)
						b.StopTimer()
						cpu += cpuTime() - cpu0
						g.refill(b, mk)
						cpu0 = cpuTime()
						b.StartTimer()
					}
					g.q.AddAfter(g.next, farDelays[g.next&farMask])
					g.next++
					g.sinceFill++
				}
				absorb(b, g.q)
				b.StopTimer()
				reportCPU(b, cpu+cpuTime()-cpu0)
				b.ReportMetric(g.bytesPerItem, "B/item")
			})
		}
	})
}

// BenchmarkLateness measures how late Get hands out items, on the real clock:
// one op adds 1,000 items 1 ms apart, each with a 10 ms delay, while one
// worker blocks in Get. Lateness is the time Get returned minus (time of the
// AddAfter call + 10 ms); p50, p99 and max over all items of all ops are
// reported in µs (units p50-us, p99-us, max-us). impl=timer is the floor: a bare time.AfterFunc whose
// callback hands the item to the worker over a channel. Run with
// -benchtime=1x (one op takes about a second; with -short, 200 items).
func BenchmarkLateness(b *testing.B) {
	const (
		gap   = time.Millisecond
		delay = 10 * time.Millisecond
	)
	items := 1000
	if testing.Short() {
		items = 200 // CI's run once, where the figures are not read
	}
	impls := append(slices.Clip(latenessImplsOnly), queueImpls...)
	forEach(b, impls, func(b *testing.B, mk func() queue) {
		b.ReportAllocs()
		late := make([]time.Duration, 0, b.N*items)
		for op := 0; op < b.N; op++ {
			// Start each op with no garbage left by earlier benchmarks, so
			// that a collection does not land in the middle of the pattern.
			b.StopTimer()
			runtime.GC()
			b.StartTimer()
			q := mk()
			due := make([]time.Time, items)
			got := make([]time.Time, items)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for k := 0; k < items; k++ {
					item, shutdown := q.Get()
					if shutdown {
						return
					}
					got[item] = time.Now()
					q.Done(item)
				}
			}()
			start := time.Now()
			for i := 0; i < items; i++ {
				if d := time.Until(start.Add(time.Duration(i) * gap)); d > 0 {
					time.Sleep(d)
				}
				due[i] = time.Now().Add(delay)
				q.AddAfter(i, delay)
			}
			<-done
			q.ShutDown()
			for i := range due {
				late = append(late, got[i].Sub(due[i]))
			}
		}
		b.StopTimer()
		slices.Sort(late)
		us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
		b.ReportMetric(us(late[len(late)/2]), "p50-us")
		b.ReportMetric(us(late[len(late)*99/100]), "p99-us")
		b.ReportMetric(us(late[len(late)-1]), "max-us")
	})
}

// reportCPU reports cpu-ns/op: the process's CPU time over the timed region
// (every goroutine's, the garbage collector's and the kernel's on its behalf,
// from getrusage) per op. Beside ns/op, which is wall time, it shows what an
// implementation costs the machine when it spreads one call's work over
// several cores: client-go's AddAfter hands each item to a goroutine that
// files it on the other core, so on an idle 2-core machine its ns/op counts
// only the slower of the two stages while its cpu-ns/op counts both.
// getrusage's resolution is coarse (a few ms), so use it over long runs.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime returns the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdle measures what 10,000 queues cost while each holds one item
// waiting an hour: the goroutines they keep (goroutines, for all 10,000
// queues) and the CPU the process burns over a real-time window in which
// nothing is due (cpu-ms/s: process CPU time, from getrusage, per second of
// wall time; 1000 is one core busy). The benchmark goroutine only sleeps in
// that window. base-cpu-ms/s is the same measure over an equal window just
// before the queues are built: what the process burns with no queue at all.
// Run with -benchtime=1x. With -short (CI's run once), 1,000 queues over
// 200 ms windows.
func BenchmarkIdle(b *testing.B) {
	queues := 10_000
	window := 2 * time.Second
	if testing.Short() {
		queues, window = 1_000, 200*time.Millisecond
	}
	forEach(b, queueImpls, func(b *testing.B, mk func() queue) {
		b.ReportAllocs()
		var goroutines int
		var cpu, base time.Duration
		for op := 0; op < b.N; op++ {
			heap0 := liveHeap()
			g0 := runtime.NumGoroutine()
			// The same window with no queue: what the process burns anyway.
			cpu0 := cpuTime()
			time.Sleep(window)
			base += cpuTime() - cpu0
			qs := make([]queue, queues)
			for i := range qs {
				qs[i] = mk()
				qs[i].AddAfter(1, time.Hour)
			}
			// Let asynchronous implementations absorb the item and park.
			time.Sleep(200 * time.Millisecond)
			runtime.GC()
			goroutines += runtime.NumGoroutine() - g0
			cpu0 = cpuTime()
			time.Sleep(window)
			cpu += cpuTime() - cpu0
			for _, q := range qs {
				q.ShutDown()
			}
			shutDownAndSettle(newTimerQueue(), g0, heap0)
		}
		b.ReportMetric(float64(goroutines)/float64(b.N), "goroutines")
		perSecond := func(d time.Duration) float64 {
			return float64(d) / float64(time.Millisecond) / (window.Seconds() * float64(b.N))
		}
		b.ReportMetric(perSecond(cpu), "cpu-ms/s")
		b.ReportMetric(perSecond(base), "base-cpu-ms/s")
	})
}

// workQueue is what run2p2w needs of a queue.
type workQueue interface {
	Get() (item int, shutdown bool)
	Done(item int)
	ShutDown()
}

// run2p2w times b.N items through q with 2 producers, each calling add for
// every other item, and 2 workers that Get and Done them; the worker that
// finishes the last item shuts the queue down, which releases the other.
// It reports items/s and cpu-ns/op (see reportCPU) over the timed region.
// Nothing is queued before it starts, but the producers are not paced: an
// Add costs less than a Get and a Done, so the queue holds a growing backlog
// of the producers' items for most of the run.
func run2p2w(b *testing.B, q workQueue, add func(i int)) {
	run2p2wDepth(b, q, add, 0)
}

// run2p2wDepth is run2p2w with the producers paced so that at most about
// maxDepth items are in the queue or being processed (0: not paced).
// Unpaced, the producers outrun the workers and the queue's depth grows
// with b.N, so ns/op is a figure at a depth the scheduler chose; paced,
// every queue is measured in the same steady state, the one the serial rows
// set up with their backlog. Pacing is by batches, so that it costs the
// queues' figures little: a producer puts a token in a channel of
// maxDepth/pacingBatch slots before each batch of pacingBatch adds (and
// blocks, without spinning, while it is full), and a worker takes one out
// after each pacingBatch items it has finished. Tokens taken never exceed
// tokens put (an item is finished after its batch's token went in), and at
// most one partial batch per worker holds a token back, so nothing blocks
// for ever as long as there are more than 2 slots.
func run2p2wDepth(b *testing.B, q workQueue, add func(i int), maxDepth int) {
	const pacingBatch = 32
	var slots chan struct{}
	if maxDepth > 0 {
		slots = make(chan struct{}, max(maxDepth/pacingBatch, 3))
	}
	n := int64(b.N)
	var processed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			finished := 0
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(item)
				if finished++; slots != nil && finished%pacingBatch == 0 {
					<-slots
				}
				if processed.Add(1) == n {
					q.ShutDown()
				}
			}
		}()
	}
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func(first int) {
			defer wg.Done()
			for i := first; i < b.N; i += 2 {
				if slots != nil && (i/2)%pacingBatch == 0 {
					slots <- struct{}{}
				}
				add(i)
			}
		}(p)
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
	reportCPU(b, cpu)
}
