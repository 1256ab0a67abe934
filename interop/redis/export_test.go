package redis

// OnQueued makes k call f each time a decision joins the queue behind a
// round trip in flight, so that a test knows when its callers are queued.
// Set it before the calls it observes.
func OnQueued(k *KeyedLimiter, f func()) { k.l.co.onQueued = f }
