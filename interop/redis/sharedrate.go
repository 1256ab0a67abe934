package redis

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrykit/backoff"
	"k8s.io/utils/clock"
)

// SharedRate is a backoff.AdaptiveRate whose quota the replicas of a
// service learn together, through one small record in Redis: a quota none
// of them can see (a cloud API's 100 requests/s for the whole account),
// shared by all of them, which answers 429 beyond it. Alone, each replica's
// AdaptiveRate must meet the quota itself to learn it, so that 50 replicas
// spend most of what the quota allows on finding it, again after every
// change; together, one throttling answer teaches all of them.
//
// Pace requests with [SharedRate.Pacer], an AdaptiveRate that takes
// backoff.WithPacer (in backoff.Retry, httpretry, interop/grpc) or is called
// directly; report answers to it as to any AdaptiveRate. The replicas
// share the estimate of the quota and divide it among themselves:
//
//   - The record holds the estimate as a curve of time that every replica
//     evaluates for itself: doubling every 250 ms from [WithInitialRate]
//     until the first cut, then AdaptiveRate's cubic curve around the rate
//     the last cut found (see backoff.AdaptiveRate). The estimate grows with
//     no round trip.
//   - A throttling answer cuts the estimate once, however many replicas
//     meet it: a replica reports it with the generation of the curve it was
//     paced by, and the record cuts only the current one, at the lower of
//     the estimate and what the quota granted all replicas in the last
//     second or so (their successes per second together). The new curve is
//     published at once (Redis pub/sub), so every replica slows down within
//     a round trip of the first throttled request, not at its next sync.
//     The replica that met it also holds its requests for the Retry-After.
//   - Each replica holds a lease in the record with its demand: what it
//     sends, or more than it is given when its requests wait for their
//     turn, when it sends nine tenths of its share or more, and until its
//     second round trip. The estimate is divided max-min fairly: a replica
//     that wants less than an equal share gets what it wants, with room to
//     grow, and the others divide the rest. A replica that joins is counted
//     at its first round trip, one that closes leaves at once, and one that
//     dies is dropped when its lease ends (three sync intervals).
//
// Each replica makes one round trip every one to 1.2 [WithSyncInterval]s
// (default one second), and one more for each cut it reports (at most one per cut), on a
// goroutine of its own; requests never wait for Redis. The instants in the
// record are read from the replicas' clocks ([WithClock]): clocks that
// disagree by a fraction of a second shift the curve by as much, and are
// harmless.
//
// While Redis is unavailable (a round trip fails or takes longer than
// [WithTimeout]), each replica goes on with its AdaptiveRate's own law,
// from its share, as a replica alone would (logged once, with
// [WithOnStateChange] and [SharedRate.Stats] as the limiters'), and tries
// again every sync interval; the first round trip that succeeds shares
// again, and a record that Redis lost meanwhile is recreated from the
// estimate the replica knew. A throttling answer is then learned alone
// until Redis answers.
//
// Keys: the record is the hash <prefix>rate:{<name>}, and cuts travel on the
// channel of the same name; on a Redis Cluster the record lives in the slot
// of {<name>}.
//
// Close the SharedRate when the replica stops: its goroutine ends, and its
// lease is given up so that the others take its share at their next sync.
type SharedRate struct {
	rate     *backoff.AdaptiveRate
	client   goredis.UniversalClient
	key      string
	channel  string
	id       string
	interval time.Duration
	lease    time.Duration
	initial  float64
	clock    clock.WithDelayedExecution
	guard    *guard
	pubsub   *goredis.PubSub

	cutAsked chan struct{} // a throttling answer at the current curve: report it
	stop     context.CancelFunc
	done     chan struct{}
	close    sync.Once

	mu       sync.Mutex
	curve    curve
	members  map[string]float64 // the live replicas' demands by id, mine included
	demands  []float64          // the same demands, sorted
	mine     float64            // the demand this replica reported last
	shared   bool               // the last round trip succeeded
	reported int64              // the generation whose cut this replica has asked for
	seed     float64            // the estimate last seen, to recreate a lost record with
	// What the AdaptiveRate had seen at the last round trip, and when: a
	// round trip reports the difference.
	lastStats     backoff.AdaptiveRateStats
	lastAt        time.Time
	trips         int     // round trips that succeeded
	demandForTest float64 // the demand reported, if not 0 (tests)

	replicas atomic.Int64
}

// DefaultSyncInterval is how often a [SharedRate] makes a round trip to
// Redis unless [WithSyncInterval] says otherwise.
const DefaultSyncInterval = time.Second

// DefaultSharedRateTimeout bounds a [SharedRate]'s round trips to Redis
// unless [WithTimeout] says otherwise: longer than a limiter's, since no
// request waits for them, so that a busy Redis or client is not taken for
// an unavailable one.
const DefaultSharedRateTimeout = 500 * time.Millisecond

// sharedSteerEvery is how often a replica moves its share along the curve
// between round trips.
const sharedSteerEvery = 100 * time.Millisecond

// NewSharedRate returns the SharedRate of this replica for the quota name,
// shared with every replica that uses the same client's Redis, prefix and
// name. It makes its first round trip before it returns (bounded by
// [WithTimeout], [DefaultSharedRateTimeout] by default), so that the
// replica starts at its share, and starts a
// goroutine that [SharedRate.Close] ends. Options that concern only the
// limiters are ignored. NewSharedRate panics if client is nil or name is
// empty or contains '{' or '}'.
func NewSharedRate(client goredis.UniversalClient, name string, opts ...Option) *SharedRate {
	return newSharedRate(client, name, true, opts)
}

// newSharedRate is NewSharedRate; without start, no goroutine runs (tests
// make the round trips).
func newSharedRate(client goredis.UniversalClient, name string, start bool, opts []Option) *SharedRate {
	mustBeClient("NewSharedRate", client)
	checkName("NewSharedRate", name)
	c := newConfig(opts)
	if !c.timeoutSet {
		c.timeout = DefaultSharedRateTimeout
	}
	checkClient(client, c, "NewSharedRate")
	key := c.prefix + "rate:{" + name + "}"
	s := &SharedRate{
		client:   client,
		key:      key,
		channel:  key,
		id:       replicaID(),
		interval: c.syncInterval,
		lease:    3 * c.syncInterval,
		initial:  c.initialRate,
		clock:    c.clock,
		guard:    newGuard(key, client, c),
		cutAsked: make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	s.rate = backoff.NewAdaptiveRate(backoff.WithClock(c.clock), backoff.WithInitialRate(c.initialRate), backoff.WithOnThrottled(s.throttled))
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.pubsub = client.Subscribe(ctx, s.channel)
	s.lastAt = s.clock.Now()
	s.roundTrip(ctx, "sync")
	if start {
		go s.run(ctx)
	} else {
		close(s.done)
	}
	return s
}

// Pacer returns the replica's AdaptiveRate, steered to its share of the
// shared estimate while Redis is available. Pass it to backoff.WithPacer, or
// call its Wait and report answers to it.
func (s *SharedRate) Pacer() *backoff.AdaptiveRate { return s.rate }

// Estimate returns the quota the replicas have learned together, in
// requests per second, as this replica sees it now.
func (s *SharedRate) Estimate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.estimateLocked(s.now())
}

// Replicas returns how many replicas held a lease at this replica's last
// round trip, itself included; 0 before any succeeded.
func (s *SharedRate) Replicas() int { return int(s.replicas.Load()) }

// Stats counts the replica's round trips to Redis: Shared those that
// succeeded, Errors those that failed, Outages the times Redis became
// unavailable; Available says whether the last one succeeded. Fallback and
// Refused stay 0.
func (s *SharedRate) Stats() Stats { return s.guard.stats() }

// Close ends the replica's goroutine and gives up its lease (one round trip,
// bounded by [WithTimeout]), so that the other replicas take its share at
// their next round trip. The Pacer goes on at its own law. Close returns
// the error of closing the subscription, if any; it is safe to call more
// than once.
func (s *SharedRate) Close() error {
	var err error
	s.close.Do(func() {
		s.stop()
		<-s.done
		s.rate.Unsteer()
		if s.Stats().Available {
			ctx, cancel := context.WithTimeout(context.Background(), s.guard.timeout)
			_, _, _ = s.runScript(ctx, sharedReport{call: "leave", now: s.now()})
			cancel()
		}
		err = s.pubsub.Close()
	})
	return err
}

// run is the replica's goroutine: a round trip every interval or when a cut
// is to be reported, the cuts of the others as they are published, and the
// share moved along the curve in between.
func (s *SharedRate) run(ctx context.Context) {
	defer close(s.done)
	cuts := s.pubsub.Channel()
	syncTimer := s.clock.NewTimer(s.syncWait())
	defer syncTimer.Stop()
	steer := s.clock.NewTimer(jittered(sharedSteerEvery))
	defer steer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-syncTimer.C():
			s.roundTrip(ctx, "sync")
			syncTimer.Reset(s.syncWait())
		case <-s.cutAsked:
			s.roundTrip(ctx, "cut")
			// The cut's round trip reported what a sync would: the next
			// sync is an interval later.
			if !syncTimer.Stop() {
				select {
				case <-syncTimer.C():
				default:
				}
			}
			syncTimer.Reset(s.syncWait())
		case m, ok := <-cuts:
			if !ok {
				cuts = nil
				continue
			}
			s.heard(m.Payload)
		case <-steer.C():
			s.mu.Lock()
			s.steerLocked()
			s.mu.Unlock()
			steer.Reset(jittered(sharedSteerEvery))
		}
	}
}

// heard adopts a published message: a cut's new curve, or a replica that
// joined or left, counted until the next round trip says what the record
// holds.
func (s *SharedRate) heard(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if join, id, d, ok := parseMember(msg); ok {
		if id == s.id || !s.shared {
			return
		}
		if _, known := s.members[id]; known == join {
			return // counted already, or never
		}
		if join {
			s.members[id] = d
		} else {
			delete(s.members, id)
		}
		s.membersChangedLocked()
		s.steerLocked()
		return
	}
	if c, ok := parseCut(msg); ok && c.gen > s.curve.gen {
		s.curve = c
		s.steerLocked()
	}
}

// throttled hears of a throttling answer that is not stale, on the
// goroutine that reported it: the first one at the current curve asks for
// a cut.
func (s *SharedRate) throttled(time.Duration) {
	s.mu.Lock()
	ask := s.shared && s.reported < s.curve.gen
	if ask {
		s.reported = s.curve.gen
	}
	s.mu.Unlock()
	if ask {
		select {
		case s.cutAsked <- struct{}{}:
		default:
		}
	}
}

// roundTrip reports the replica's demand and successes since the last
// round trip, with a cut if call is "cut", and adopts the record's curve
// and demands; on failure the AdaptiveRate goes on at its own law.
func (s *SharedRate) roundTrip(ctx context.Context, call string) {
	now := s.clock.Now()
	st := s.rate.Stats()
	s.mu.Lock()
	r := sharedReport{call: call, now: s.micros(now), initial: s.initial}
	elapsed := now.Sub(s.lastAt).Seconds()
	r.demand = st.Sent
	if wantsMore(st, s.lastStats, s.trips < 2) {
		r.demand = math.Inf(1)
	}
	if s.demandForTest != 0 {
		r.demand = s.demandForTest
	}
	if elapsed > 0 {
		r.ok = float64(st.Succeeded-s.lastStats.Succeeded) / elapsed
	}
	switch {
	case call == "cut":
		r.gen, r.est = s.reported, s.estimateLocked(r.now)
	case s.shared:
		// Demand holds the estimate down: the curve starts again from
		// there, rather than growing unseen.
		if held := s.estimateLocked(r.now); held < s.curve.at(r.now) {
			r.gen, r.rebase = s.curve.gen, held
		}
	}
	if !s.shared {
		r.seed = s.seed
	}
	s.mu.Unlock()

	callCtx, cancel := s.guard.begin(ctx)
	c, members, err := s.runScript(callCtx, r)
	if err = s.guard.end(ctx, cancel, err); err != nil {
		if ctx.Err() != nil {
			return // closing
		}
		s.mu.Lock()
		if s.shared {
			s.shared = false
			s.rate.Unsteer()
		}
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastStats, s.lastAt = st, now
	s.trips++
	s.curve, s.members, s.mine, s.shared = c, members, r.demand, true
	s.membersChangedLocked()
	s.steerLocked()
}

// membersChangedLocked sorts the live replicas' demands for shareOf.
func (s *SharedRate) membersChangedLocked() {
	s.demands = s.demands[:0]
	for _, d := range s.members {
		s.demands = append(s.demands, d)
	}
	sort.Float64s(s.demands)
	s.replicas.Store(int64(len(s.demands)))
}

// steerLocked sets the AdaptiveRate to this replica's share of the
// estimate now, while Redis is available.
func (s *SharedRate) steerLocked() {
	if !s.shared {
		return
	}
	est := s.estimateLocked(s.now())
	s.seed = est
	s.rate.Steer(shareOf(est, s.mine, s.demands))
}

// estimateLocked is the shared estimate at now (µs since sharedEpoch): the
// curve, held down by what the live replicas want.
func (s *SharedRate) estimateLocked(now int64) float64 {
	return capped(s.curve.at(now), s.curve, s.demands)
}

// now returns the local clock's reading in µs since sharedEpoch.
func (s *SharedRate) now() int64 { return s.micros(s.clock.Now()) }

// micros returns t in µs since sharedEpoch.
func (s *SharedRate) micros(t time.Time) int64 { return t.Sub(sharedEpoch).Microseconds() }

// syncWait returns the time to the next sync: the interval to 1.2 times
// it, at random, so that replicas started together spread their round
// trips, and none makes more than one per interval.
func (s *SharedRate) syncWait() time.Duration { return s.interval + rand.N(s.interval/5) }

// jittered returns d ± 10%, at random: replicas started together would
// otherwise move their shares, and release the requests waiting for them,
// at the same instants, in bursts that a quota's bucket answers with 429s.
func jittered(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5)
}

// replicaID returns a random name for a replica's lease.
func replicaID() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
