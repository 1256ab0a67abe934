package redis

import (
	"testing"
	"time"
)

var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

func TestLocalBucketsAdmitBurstThenRate(t *testing.T) {
	b := newLocalBuckets(10, 2, 100) // a token per 100 ms
	steps := []struct {
		at      time.Duration
		allowed bool
	}{{0, true}, {0, true}, {0, false}, {99 * time.Millisecond, false}, {100 * time.Millisecond, true}, {150 * time.Millisecond, false}, {time.Hour, true}, {time.Hour, true}, {time.Hour, false}}
	for i, s := range steps {
		d := b.reserve("k", 1, epoch.Add(s.at), 0)
		if d.Allowed != s.allowed {
			t.Fatalf("step %d at %v: allowed %v, want %v", i, s.at, d.Allowed, s.allowed)
		}
	}
}

func TestLocalBucketsClockSteppedBackEarnsNothing(t *testing.T) {
	b := newLocalBuckets(10, 1, 100)
	later := epoch.Add(time.Second)
	if !b.reserve("k", 1, later, 0).Allowed {
		t.Fatal("first event refused")
	}
	if b.reserve("k", 1, epoch, 0).Allowed {
		t.Fatal("a clock stepped back admitted an event")
	}
	if !b.reserve("k", 1, later.Add(100*time.Millisecond), 0).Allowed {
		t.Fatal("refill after the clock came back refused")
	}
}

func TestLocalBucketsReserveWaitAndCancel(t *testing.T) {
	b := newLocalBuckets(10, 1, 100)
	b.reserve("k", 1, epoch, -1)
	d := b.reserve("k", 1, epoch, -1)
	if !d.Allowed || d.delay != 100*time.Millisecond {
		t.Fatalf("reservation %+v, want a 100ms delay", d)
	}
	if d := b.reserve("k", 1, epoch, 150*time.Millisecond); d.Allowed {
		t.Fatalf("a 200ms wait was accepted under a 150ms bound: %+v", d)
	}
	b.cancel("k", 1, epoch.Add(100*time.Millisecond), epoch)
	if d := b.reserve("k", 1, epoch, -1); d.delay != 100*time.Millisecond {
		t.Fatalf("after Cancel: delay %v, want 100ms", d.delay)
	}
	if d := b.reserve("k", 2, epoch, -1); d.Allowed || d.RetryAfter != -1 {
		t.Fatalf("n above the burst: %+v", d)
	}
}

func TestLocalBucketsBoundTheirKeysAndNeverAdmitUnlimited(t *testing.T) {
	b := newLocalBuckets(1, 1, 2)
	if !b.reserve("a", 1, epoch, 0).Allowed || !b.reserve("b", 1, epoch, 0).Allowed {
		t.Fatal("first events refused")
	}
	// Full, and neither a nor b has refilled: a third key is refused.
	if d := b.reserve("c", 1, epoch, 0); d.Allowed {
		t.Fatal("a key beyond the bound was admitted")
	}
	if b.reserve("a", 1, epoch, 0).Allowed {
		t.Fatal("a's bucket was reset")
	}
	// Once a and b have refilled, they are dropped to make room.
	later := epoch.Add(time.Second)
	if !b.reserve("c", 1, later, 0).Allowed {
		t.Fatal("c refused although refilled buckets could be dropped")
	}
	if len(b.buckets) > 2 {
		t.Fatalf("%d buckets, bound 2", len(b.buckets))
	}
}
