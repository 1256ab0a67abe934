// Package bench holds the side-by-side benchmarks of github.com/retrykit/backoff
// against the libraries it re-implements or competes with: client-go's
// workqueue and flowcontrol, apimachinery's wait, controller-runtime's priority
// queue, cenkalti/backoff/v5, golang.org/x/time/rate, failsafe-go's
// adaptivelimiter, adaptivethrottler, circuitbreaker and hedgepolicy,
// sony/gobreaker v2, the client-side rate limiter of aws-sdk-go-v2's
// adaptive retry mode, and grpc-go's own retry (against the interceptor of
// github.com/retrykit/backoff/interop/grpc).
//
// It is a module of its own so that the library never depends on what it is
// compared with. Everything lives in _test.go files; run.sh builds the test
// binary once, runs the implementations interleaved round by round and writes
// BENCHMARKS.md at the repository root through ./cmd/benchreport.
//
// # Layout of the benchmark names
//
// Every comparison is one Benchmark function. Its first sub-benchmark level
// names the implementation (impl=clientgo, impl=priorityqueue, impl=ours, ...)
// and every implementation runs the identical body, through a small
// interface that all of them satisfy (client-go's and our method sets are the
// same). Deeper levels name the parameters (mode=serial, keys=100000, n=1M).
// Putting impl first lets run.sh select one implementation with
// -test.bench='./^impl=NAME$' and lets benchstat put implementations side by
// side with -col /impl.
//
// # Fairness with asynchronous implementations
//
// client-go's AddAfter only hands the item to a goroutine over a 1000-slot
// channel, and controller-runtime's priority queue appends it to a buffer that
// another goroutine flushes. Timing the calls alone would time a channel send.
// So every benchmark that adds waiting items ends its timed region with a
// barrier (see absorb): it adds one sentinel item with a 1 ns delay and waits
// in Get until the sentinel comes out. Both asynchronous implementations
// process their input in order (a FIFO channel, an append-only buffer), so the
// sentinel can only come out after every earlier item has been inserted into
// their heap or tree. The same barrier runs for every implementation,
// including ours (which absorbs synchronously and pays only the barrier
// itself, one timer firing, amortised over b.N).
package bench
