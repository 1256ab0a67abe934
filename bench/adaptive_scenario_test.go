package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The scenarios of the adaptive pacers, driven in real time: the anchors
// read the wall clock (failsafe-go's windows, the AWS limiter's half-second
// buckets), so every implementation runs on it alike, at a reduced scale
// (1 ms service times, 1–2 s phases). Each run takes a few seconds; the
// figures are reported with b.ReportMetric from one run (-benchtime=1x).
// Random draws (arrivals, service times, the backend's refusals) come from
// generators with fixed seeds.

// The capacity drop: a server of dropWorkers workers, with lognormal
// service times (median 1 ms, σ 0.5), loses half of them for the middle of
// three phases. Clients offer Poisson arrivals at 1.5 times the reduced
// capacity (0.75 times the full one) throughout, each admitted by the
// limiter's TryAcquire (shed when refused) and recorded as a success when
// its response comes.
const (
	dropWorkers       = 8
	dropServiceMedian = time.Millisecond
	dropServiceSigma  = 0.5
	dropOverload      = 1.5
	dropDriftAfter    = time.Second // the reference limit: this long into the drop
	dropLimitAverage  = 100 * time.Millisecond
)

// dropPhase is the length of each phase of the capacity drop.
func dropPhase() time.Duration {
	if testing.Short() {
		return 1200 * time.Millisecond
	}
	return 2 * time.Second
}

// The outage: a backend that accepts everything for a phase, then refuses
// 80% of what it receives (at random) for a phase, then accepts everything
// again for two phases (so that a recovery slower than a phase is still
// measured); requests are offered at a steady outageRate.
const (
	outageRate   = 2000 // requests offered per second
	outageWindow = 250 * time.Millisecond
	outageAccept = 0.2
	outageBucket = 20 * time.Millisecond // the resolution of the recovery time
)

func outagePhase() time.Duration {
	if testing.Short() {
		return 500 * time.Millisecond
	}
	return time.Second
}

// The shared quota: quotaClients clients, each with its own pacer and
// quotaGoroutines goroutines, must each complete quotaRequests requests
// against a quota of quotaRate requests per second (bursts of quotaBurst)
// shared by all, which answers 429 beyond it, without Retry-After. A
// response takes quotaRTT; a throttled request is reported and sent again
// when the pacer allows.
const (
	quotaClients    = 4
	quotaGoroutines = 4
	quotaRate       = 200
	quotaBurst      = 20
	quotaRTT        = 2 * time.Millisecond
	quotaDeadline   = 20 * time.Second
)

func quotaRequests() int {
	if testing.Short() {
		return 50
	}
	return 150
}

// BenchmarkAdaptiveScenario runs each implementation through the scenarios
// that compare it, once per b.N (run it with -benchtime=1x):
//   - scenario=drop (ours, failsafe): goodput% is the responses completed
//     during the drop over what the reduced server could complete (its
//     workers over the mean service time measured during the drop); p99x
//     is the p99 latency (admission to response) of the requests admitted
//     during the drop over the no-load p99 (the service time alone,
//     measured before the run with as many clients as workers); drift is
//     the limit at the end of the drop over the limit 1 s into it (each the
//     mean of 100 ms of samples), above 1 when the limit creeps back up
//     during the overload; shed% is the share of arrivals refused during the
//     drop; limit is the limit at the end of the drop (the reduced server
//     has 4 workers); noload-p99-us is the no-load p99. failsafe-go's
//     limiter updates at most once per recent window, 1 s by default, which
//     is half a phase at this scale: the row recent-window=100ms runs it
//     with that window scaled down tenfold (ours has no such window and
//     runs only the default row).
//   - scenario=outage (ours, failsafe): k = 2 over a 250 ms window on both
//     sides. reach% is the share of the requests offered during the outage
//     that were sent to the backend; recovery-ms is the time from the end
//     of the outage until every later 20 ms has at least 95% of its
//     requests sent (2000 when it has not recovered 2 s after).
//   - scenario=quota (ours, aws): 429s is the number of 429 answers,
//     done-s the time until all requests completed (ideal: all of them over
//     the quota, 3 s), completed% the share completed by the 20 s deadline.
func BenchmarkAdaptiveScenario(b *testing.B) {
	names := []string{}
	add := func(name string) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, im := range adaptiveLimiterImpls {
		add(im.name)
	}
	for _, im := range throttlerImpls {
		add(im.name)
	}
	for _, im := range adaptivePacerImpls {
		add(im.name)
	}
	for _, name := range names {
		b.Run("impl="+name, func(b *testing.B) {
			for _, im := range adaptiveLimiterImpls {
				if im.name != name {
					continue
				}
				b.Run("scenario=drop", func(b *testing.B) {
					benchDrop(b, func() adaptiveLimiter { return im.make(limiterConfig{}) })
				})
				if im.name == "failsafe" {
					b.Run("scenario=drop/recent-window=100ms", func(b *testing.B) {
						benchDrop(b, func() adaptiveLimiter { return im.make(limiterConfig{recentWindow: 100 * time.Millisecond}) })
					})
				}
			}
			for _, im := range throttlerImpls {
				if im.name == name {
					b.Run("scenario=outage", func(b *testing.B) { benchOutage(b, im.make) })
				}
			}
			for _, im := range adaptivePacerImpls {
				if im.name == name {
					b.Run("scenario=quota", func(b *testing.B) { benchQuota(b, im.make) })
				}
			}
		})
	}
}

// dropServer is the server of the capacity drop: up to workers requests in
// service at once, the others waiting in FIFO order. A request's service
// time is drawn when it starts, so the sequence of service times is the
// same whatever admits the requests; the service is a runtime timer.
type dropServer struct {
	epoch time.Time

	mu      sync.Mutex
	workers int
	busy    int
	queue   []*dropRequest
	rng     *rand.Rand
}

type dropRequest struct {
	admitted, started, finished time.Duration // since the server's epoch
	permit                      permit
	done                        func(*dropRequest)
}

func newDropServer(seed uint64) *dropServer {
	return &dropServer{epoch: time.Now(), workers: dropWorkers, rng: rand.New(rand.NewPCG(seed, seed))}
}

func (s *dropServer) now() time.Duration { return time.Since(s.epoch) }

func (s *dropServer) submit(r *dropRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy < s.workers {
		s.startLocked(r)
		return
	}
	s.queue = append(s.queue, r)
}

func (s *dropServer) startLocked(r *dropRequest) {
	s.busy++
	d := time.Duration(float64(dropServiceMedian) * math.Exp(dropServiceSigma*s.rng.NormFloat64()))
	r.started = s.now()
	time.AfterFunc(d, func() { s.finish(r) })
}

func (s *dropServer) finish(r *dropRequest) {
	r.finished = s.now()
	s.mu.Lock()
	s.busy--
	s.startQueuedLocked()
	s.mu.Unlock()
	r.done(r)
}

func (s *dropServer) startQueuedLocked() {
	for s.busy < s.workers && len(s.queue) > 0 {
		r := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.startLocked(r)
	}
}

func (s *dropServer) setWorkers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workers = n
	s.startQueuedLocked()
}

// dropNoLoad measures the no-load latency of the drop's server: as many
// closed-loop clients as workers, so that nothing waits, for 300 ms. It
// returns the mean and the p99 of the service times as the timers delivered
// them.
func dropNoLoad() (mean, p99 time.Duration) {
	s := newDropServer(99)
	var mu sync.Mutex
	var ds []time.Duration
	var wg sync.WaitGroup
	for range dropWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan *dropRequest, 1)
			for s.now() < 300*time.Millisecond {
				r := &dropRequest{done: func(r *dropRequest) { done <- r }}
				s.submit(r)
				<-done
				mu.Lock()
				ds = append(ds, r.finished-r.started)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return meanDuration(ds), durationPercentile(ds, 0.99)
}

type limitSample struct {
	at    time.Duration
	limit int
}

func benchDrop(b *testing.B, mk func() adaptiveLimiter) {
	var goodput, p99x, drift, shed, limit, noLoad float64
	for range b.N {
		b.StopTimer()
		noLoadMean, noLoadP99 := dropNoLoad()
		b.StartTimer()
		r := runDrop(mk(), noLoadMean, noLoadP99)
		noLoad += float64(noLoadP99) / float64(time.Microsecond)
		goodput += r.goodput
		p99x += r.p99x
		drift += r.drift
		shed += r.shed
		limit += r.limit
	}
	n := float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(goodput/n, "goodput%")
	b.ReportMetric(p99x/n, "p99x")
	b.ReportMetric(drift/n, "drift")
	b.ReportMetric(shed/n, "shed%")
	b.ReportMetric(limit/n, "limit")
	b.ReportMetric(noLoad/n, "noload-p99-us")
}

type dropResult struct{ goodput, p99x, drift, shed, limit float64 }

// runDrop runs the capacity drop once through l.
func runDrop(l adaptiveLimiter, noLoadMean, noLoadP99 time.Duration) dropResult {
	phase := dropPhase()
	s := newDropServer(1)
	arrivals := rand.New(rand.NewPCG(2, 2))
	ratePerSec := dropOverload * float64(dropWorkers/2) / noLoadMean.Seconds()

	dropStart := time.AfterFunc(phase, func() { s.setWorkers(dropWorkers / 2) })
	dropEnd := time.AfterFunc(2*phase, func() { s.setWorkers(dropWorkers) })
	defer dropStart.Stop()
	defer dropEnd.Stop()

	// Sample the limit every 10 ms.
	var limits []limitSample
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				limits = append(limits, limitSample{s.now(), l.Limit()})
			}
		}
	}()

	var wg sync.WaitGroup
	done := func(r *dropRequest) {
		r.permit.Record()
		wg.Done()
	}
	var reqs []*dropRequest
	var offered, shed [3]int
	next := time.Duration(0)
	for {
		now := s.now()
		if now >= 3*phase {
			break
		}
		for ; next <= now; next += time.Duration(arrivals.ExpFloat64() / ratePerSec * float64(time.Second)) {
			at := s.now()
			ph := min(int(at/phase), 2)
			offered[ph]++
			p, ok := l.TryAcquire()
			if !ok {
				shed[ph]++
				continue
			}
			r := &dropRequest{admitted: at, permit: p, done: done}
			reqs = append(reqs, r)
			wg.Add(1)
			s.submit(r)
		}
		time.Sleep(next - now)
	}
	wg.Wait()
	close(stop)
	<-sampled

	var completed int
	var service, latency []time.Duration
	for _, r := range reqs {
		if r.finished >= phase && r.finished < 2*phase {
			completed++
		}
		if r.started >= phase && r.started < 2*phase {
			service = append(service, r.finished-r.started)
		}
		if r.admitted >= phase && r.admitted < 2*phase {
			latency = append(latency, r.finished-r.admitted)
		}
	}
	var res dropResult
	if len(service) > 0 {
		reduced := float64(dropWorkers/2) / meanDuration(service).Seconds()
		res.goodput = 100 * float64(completed) / (reduced * phase.Seconds())
	}
	res.p99x = float64(durationPercentile(latency, 0.99)) / float64(noLoadP99)
	res.limit = meanLimit(limits, 2*phase)
	if ref := meanLimit(limits, phase+dropDriftAfter); ref > 0 {
		res.drift = res.limit / ref
	}
	if offered[1] > 0 {
		res.shed = 100 * float64(shed[1]) / float64(offered[1])
	}
	return res
}

// meanLimit is the mean of the limits sampled in the dropLimitAverage up to
// at.
func meanLimit(ls []limitSample, at time.Duration) float64 {
	var sum, n float64
	for _, s := range ls {
		if s.at > at-dropLimitAverage && s.at <= at {
			sum += float64(s.limit)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

func benchOutage(b *testing.B, mk func(time.Duration) throttler) {
	var reach, recovery float64
	for range b.N {
		r, rec := runOutage(mk(outageWindow))
		reach += r
		recovery += rec
	}
	n := float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(reach/n, "reach%")
	b.ReportMetric(recovery/n, "recovery-ms")
}

// runOutage runs the outage once through t. It returns the share of the
// requests offered during the outage that reached the backend, in percent,
// and the recovery time in milliseconds.
func runOutage(t throttler) (reach, recoveryMs float64) {
	phase := outagePhase()
	backend := rand.New(rand.NewPCG(3, 3))
	buckets := int(2 * phase / outageBucket)
	offeredAfter, sentAfter := make([]int, buckets), make([]int, buckets)
	var offeredDuring, sentDuring int
	epoch := time.Now()
	spacing := time.Second / outageRate
	next := time.Duration(0)
	for {
		now := time.Since(epoch)
		if now >= 4*phase {
			break
		}
		for ; next <= now; next += spacing {
			ph := min(int(now/phase), 2)
			sent := t.Allow()
			if sent {
				t.Record(ph != 1 || backend.Float64() < outageAccept)
			}
			switch ph {
			case 1:
				offeredDuring++
				if sent {
					sentDuring++
				}
			case 2:
				i := min(int((now-2*phase)/outageBucket), buckets-1)
				offeredAfter[i]++
				if sent {
					sentAfter[i]++
				}
			}
		}
		time.Sleep(next - now)
	}
	if offeredDuring > 0 {
		reach = 100 * float64(sentDuring) / float64(offeredDuring)
	}
	recovered := buckets
	for i := buckets - 1; i >= 0; i-- {
		if offeredAfter[i] > 0 && float64(sentAfter[i]) < 0.95*float64(offeredAfter[i]) {
			break
		}
		recovered = i
	}
	return reach, float64(time.Duration(recovered)*outageBucket) / float64(time.Millisecond)
}

func benchQuota(b *testing.B, mk func(pacerConfig) adaptivePacer) {
	var throttled, doneS, completed float64
	for range b.N {
		t, d, c := runQuota(mk)
		throttled += float64(t)
		doneS += d.Seconds()
		completed += c
	}
	n := float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(throttled/n, "429s")
	b.ReportMetric(doneS/n, "done-s")
	b.ReportMetric(completed/n, "completed%")
}

// runQuota runs the shared quota once, each client with a pacer of mk (in
// its waiting form). It returns the number of 429 answers, the time until
// every request completed (or the deadline), and the share completed, in
// percent.
func runQuota(mk func(pacerConfig) adaptivePacer) (throttled int64, elapsed time.Duration, completedPct float64) {
	perClient := quotaRequests()
	quota := rate.NewLimiter(quotaRate, quotaBurst)
	ctx, cancel := context.WithTimeout(context.Background(), quotaDeadline)
	defer cancel()
	var answered429, completed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range quotaClients {
		p := mk(pacerConfig{})
		var claimed atomic.Int64
		for range quotaGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for claimed.Add(1) <= int64(perClient) {
					for {
						a, err := p.Wait(ctx)
						if err != nil {
							return
						}
						ok := quota.Allow()
						time.Sleep(quotaRTT)
						if ok {
							a.Succeeded()
							completed.Add(1)
							break
						}
						a.Throttled()
						answered429.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	elapsed = time.Since(start)
	return answered429.Load(), elapsed, 100 * float64(completed.Load()) / float64(quotaClients*perClient)
}

func meanDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// durationPercentile returns the p-th percentile (0 < p < 1) of ds, which
// it sorts.
func durationPercentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(math.Ceil(p*float64(len(ds))))-1, len(ds)-1)]
}
