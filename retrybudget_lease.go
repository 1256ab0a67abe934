package backoff

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Leases: how a RetryBudget allows retries from parallel goroutines without
// all of them writing one word.
//
// Counting every allowed retry in cur, the one word that holds the current
// bucket's counts, makes goroutines that retry at once take turns at its
// cache line. Instead, when the bucket has room to spare, a decision takes a
// lease: it counts a few retries in cur at once (under mu, with the flag
// budgetLeased) and leaves the ones it did not use in its stripe, from which
// the next decisions of the goroutines that share the stripe take them, one
// compare-and-swap on the stripe each. cur's retries are then the retries
// allowed plus the leases not yet used, never fewer, so that a decision that
// fits against cur fits against the retries really allowed: the bound of
// "What it guarantees" holds for every retry granted from a lease, since the
// lease was taken in the same bucket, against the same older buckets and
// fewer requests.
//
// Two rules keep the rest of the guarantee:
//   - A lease belongs to the bucket it was taken in. Moving the window ends
//     every lease (endLeases) and counts only the retries used from them in
//     the bucket that closes; a stripe's word carries the generation of its
//     lease, so a compare-and-swap prepared before the move fails after it.
//   - A refusal counts only retries really allowed: while budgetLeased is
//     set, a decision that does not fit takes back every unused lease first
//     (takeBackLeasesLocked) and decides again, under mu. budgetLeased is set
//     in the same compare-and-swap that counts a lease, and cleared only
//     under mu once every stripe is empty, so a decision that reads cur with
//     the flag clear reads the exact count, and may refuse without the lock.
//
// Leases are taken under mu, so that taking one never overlaps a move of the
// window or a take-back; granting from a lease takes no lock.

// budgetStripe is one stripe of a budget's leases, padded so that the words
// of neighbouring stripes never share a cache line.
type budgetStripe struct {
	// lease holds the generation of the bucket its lease belongs to (high
	// 32 bits) and how many retries of it are left (low 32 bits). Only
	// decrements happen without mu.
	lease atomic.Uint64
	// refused counts the refusals of the goroutines that use the stripe.
	refused atomic.Int64
	_       [128 - 16]byte
}

const (
	budgetLeaseCountMask = 1<<32 - 1
	// budgetLeaseMax is the most retries a lease holds: a lease costs a
	// lock and a write of cur, shared by that many decisions.
	budgetLeaseMax = 32
	// budgetLeaseMin is the smallest lease worth the lock: with less room,
	// decisions count in cur directly.
	budgetLeaseMin = 2
	// budgetStripesMin and budgetStripesMax bound the number of stripes.
	budgetStripesMin = 16
	budgetStripesMax = 64
)

// budgetStripeCount returns the number of stripes of a new budget: a power
// of two ≥ 4·GOMAXPROCS within [budgetStripesMin, budgetStripesMax], so
// that goroutines running at once seldom share one.
func budgetStripeCount() int {
	n := budgetStripesMin
	for n < 4*runtime.GOMAXPROCS(0) && n < budgetStripesMax {
		n <<= 1
	}
	return n
}

// stripe returns the stripe of the calling goroutine: a hash of the address
// of a variable on its stack, which is the same from call to call as long as
// the goroutine calls from the same depth, and differs between goroutines,
// whose stacks lie apart. Which stripe a goroutine uses matters only for
// speed.
func (b *RetryBudget) stripe() *budgetStripe {
	var onStack byte
	p := uint64(uintptr(unsafe.Pointer(&onStack)))
	// Fibonacci hashing of the address in units of the smallest stack
	// (2 KiB) spreads neighbouring stacks over distant stripes.
	i := (p >> 11) * 0x9e3779b97f4a7c15 >> 32
	return &b.stripes[i&uint64(len(b.stripes)-1)]
}

// grant takes one retry from the stripe's lease, and reports whether there
// was one.
func (st *budgetStripe) grant() bool {
	for {
		l := st.lease.Load()
		if l&budgetLeaseCountMask == 0 {
			return false
		}
		if st.lease.CompareAndSwap(l, l-1) {
			return true
		}
	}
}

// leaseSize returns how many retries a lease taken now would hold: half the
// room left in the bucket, so that other stripes find some too, at most
// budgetLeaseMax, and no more than cur's retry count can hold. w is cur,
// requests and retries the counts of the window with it.
func (b *RetryBudget) leaseSize(w uint64, requests, retries int64) int64 {
	room := b.ratio*float64(requests) + b.floor - float64(retries)
	if !(room >= 2*budgetLeaseMin) {
		return 0
	}
	n := int64(budgetLeaseMax)
	if room < 2*budgetLeaseMax {
		n = int64(room / 2)
	}
	n = min(n, int64(budgetCountMax-w&budgetCountMax))
	// room is rounded; fits decides.
	for n > 0 && !b.fits(requests, retries+n) {
		n--
	}
	return n
}

// decideLocked decides a retry for a goroutine of stripe st, with mu held
// and the window at or after the decision's bucket: from st's lease if
// another goroutine of st has just taken one, else from cur, taking a new
// lease when there is room for one; when the retry does not fit and leases
// are out, it takes them back and decides again. It reports whether the
// retry is allowed.
func (b *RetryBudget) decideLocked(st *budgetStripe) bool {
	if st.grant() {
		return true
	}
	// The window cannot move while mu is held.
	gen := b.seq.Load() >> 1
	olderRequests, olderRetries := b.olderRequests.Load(), b.olderRetries.Load()
	for {
		w := b.cur.Load()
		requests := olderRequests + int64(w>>budgetCountBits&budgetCountMax)
		retries := olderRetries + int64(w&budgetCountMax)
		if w&budgetCountMax == budgetCountMax || !b.fits(requests, retries+1) {
			if w&budgetLeased == 0 {
				return false
			}
			b.takeBackLeasesLocked()
			continue
		}
		n := b.leaseSize(w, requests, retries)
		if n < budgetLeaseMin {
			if b.cur.CompareAndSwap(w, w+1) {
				return true
			}
			continue
		}
		if b.cur.CompareAndSwap(w, (w+uint64(n))|budgetLeased) {
			// st's lease is empty, and only goroutines holding mu fill it.
			st.lease.Store(gen<<32 | uint64(n-1))
			return true
		}
	}
}

// takeBackLeasesLocked empties every stripe's lease and removes what was left
// of them from cur's retries, so that cur counts the retries allowed and no
// more. mu must be held.
func (b *RetryBudget) takeBackLeasesLocked() {
	if b.cur.Load()&budgetLeased == 0 {
		return
	}
	var unused uint64
	for i := range b.stripes {
		st := &b.stripes[i]
		for {
			l := st.lease.Load()
			if l&budgetLeaseCountMask == 0 {
				break
			}
			if st.lease.CompareAndSwap(l, l&^budgetLeaseCountMask) {
				unused += l & budgetLeaseCountMask
				break
			}
		}
	}
	// No lease can be taken while mu is held: every stripe stays empty.
	for {
		w := b.cur.Load()
		if b.cur.CompareAndSwap(w, (w-unused)&^budgetLeased) {
			return
		}
	}
}

// endLeases ends every lease when the window moves to generation gen, with
// mu held and seq odd, and returns how many retries were left in them: the
// closing bucket's retries are cur's minus those.
func (b *RetryBudget) endLeases(gen uint64) int64 {
	var unused int64
	for i := range b.stripes {
		unused += int64(b.stripes[i].lease.Swap(gen<<32) & budgetLeaseCountMask)
	}
	return unused
}
