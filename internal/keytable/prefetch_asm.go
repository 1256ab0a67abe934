//go:build go1.24 && (amd64 || arm64)

package keytable

// prefetch asks the processor to start loading the cache line that holds
// the byte at address p, and returns without waiting for it; it never
// faults, whatever p. It is assembly because Go has no prefetch a package
// outside the runtime can call, and a plain load would not do: the owner's next step, reading the clock, waits
// for earlier loads to complete (lfence, rdtscp), but not for prefetches.
//
//go:noescape
func prefetch(p uintptr)
