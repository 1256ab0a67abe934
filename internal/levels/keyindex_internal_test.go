package levels

import (
	"strconv"
	"strings"
	"testing"
)

// TestKeyIndexFindsWhatItHolds inserts keys of every length from 0 to 40
// bytes, finds each, misses absent ones, and drops half with deleteIf.
func TestKeyIndexFindsWhatItHolds(t *testing.T) {
	var x keyIndex[int]
	var keys []string
	for i := range 3000 {
		k := strings.Repeat("x", i%41) + strconv.Itoa(i)
		keys = append(keys, k)
		if x.find(x.hash(k), k) != nil {
			t.Fatalf("key %q found before it was inserted", k)
		}
		x.insert(&keyQueue[int]{key: k, hash: x.hash(k), n: i % 2})
	}
	check := func(want func(i int) bool) {
		t.Helper()
		for i, k := range keys {
			kq := x.find(x.hash(k), k)
			switch {
			case want(i) && (kq == nil || kq.key != k):
				t.Fatalf("key %q: found %v", k, kq)
			case !want(i) && kq != nil:
				t.Fatalf("key %q found after its deletion", k)
			}
		}
		if x.find(x.hash("absent"), "absent") != nil {
			t.Fatal("an absent key was found")
		}
	}
	check(func(int) bool { return true })
	if x.n != len(keys) || 2*x.n > len(x.slots) {
		t.Fatalf("n = %d in %d slots, want %d at most half full", x.n, len(x.slots), len(keys))
	}
	x.deleteIf(func(kq *keyQueue[int]) bool { return kq.n == 0 })
	check(func(i int) bool { return i%2 == 1 })
	if x.n != len(keys)/2 || len(x.slots) > 4*x.n {
		t.Fatalf("after deleteIf: n = %d in %d slots, want %d in at most %d", x.n, len(x.slots), len(keys)/2, 4*x.n)
	}
}

// TestStrHashSpreadsKeys: namespace-like keys hash apart, every byte of a
// key counts, and the seed changes every hash.
func TestStrHashSpreadsKeys(t *testing.T) {
	const seed = 12345
	seen := map[uint64]string{}
	for i := range 20000 {
		k := "ns-" + strconv.Itoa(i)
		h := strHash(seed, k)
		if other, ok := seen[h]; ok {
			t.Fatalf("%q and %q have the same hash", k, other)
		}
		seen[h] = k
		if strHash(seed+1, k) == h {
			t.Fatalf("%q: the seed does not change the hash", k)
		}
	}
	// Low bits pick the slot: 1,000 keys in 2,048 buckets should not pile
	// up.
	var buckets [2048]int
	for i := range 1000 {
		buckets[strHash(seed, "ns-"+strconv.Itoa(i))&2047]++
	}
	for b, n := range buckets {
		if n > 6 {
			t.Fatalf("bucket %d holds %d of 1,000 keys", b, n)
		}
	}
	base := strings.Repeat("abcdefghij", 4)
	for n := 0; n <= len(base); n++ {
		k := base[:n]
		h := strHash(seed, k)
		for i := range n {
			flipped := k[:i] + string(k[i]^1) + k[i+1:]
			if strHash(seed, flipped) == h {
				t.Fatalf("%q: byte %d does not change the hash", k, i)
			}
		}
	}
}
