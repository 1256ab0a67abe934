package redis

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrykit/backoff"
	"k8s.io/utils/clock"
)

// gcraSource decides for each key of keys (KEYS, for gcraScript) whether n
// events may happen, by
// the generic cell rate algorithm (GCRA): a key holds its theoretical arrival
// time (TAT), the instant at which its bucket would be full again, in
// microseconds since 2017-01-01 UTC on the server's clock (µs since 1970 would
// not fit a Lua double with room to spare). One TIME call serves every key,
// so the clocks of the callers never matter.
//
// args (ARGV, for gcraScript): the emission interval in µs (a float, 0 for an infinite rate), the
// burst, n, and the longest wait in µs the caller accepts (0: admit only now,
// as Allow; -1: any wait, as Reserve); then, only when the keys of the call
// do not all ask the same (a key with its own limit, or decisions of several
// callers sent together), these four for each key, in KEYS' order, which
// replace the first four. A decision that admits moves the TAT by n
// intervals; one that refuses leaves the key untouched. The key expires when
// its TAT passes, at which point it is equivalent to an absent key: memory is
// bounded by the keys used within the last burst·interval.
//
// Every key is read before any is written: a Cluster node refuses a key it
// does not serve (a slot that moved) at the script's first access to it,
// and the script must then have changed nothing, so that the call can go
// again elsewhere. A key that appears twice is decided twice, in order.
//
// Returns {now, then for each key: admitted (1/0), delay µs (-1: never),
// remaining events admissible now, µs until the bucket is full}.
const gcraSource = `
local interval = tonumber(args[1])
local burst = tonumber(args[2])
local n = tonumber(args[3])
local max_wait = tonumber(args[4])
local own = #args > 4
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1483228800) * 1000000 + tonumber(t[2])
local tats = {}
for _, key in ipairs(keys) do
  if tats[key] == nil then tats[key] = tonumber(redis.call('GET', key)) or false end
end
local out = {now}
for i, key in ipairs(keys) do
  if own then
    interval = tonumber(args[1 + 4 * i])
    burst = tonumber(args[2 + 4 * i])
    n = tonumber(args[3 + 4 * i])
    max_wait = tonumber(args[4 + 4 * i])
  end
  if interval == 0 then
    -- an infinite rate: the bucket is always full, nothing is stored
    out[#out+1] = 1
    out[#out+1] = 0
    out[#out+1] = burst
    out[#out+1] = 0
  else
    local offset = interval * burst
    local tat = tats[key]
    if not tat or tat < now then tat = now end
    local new_tat = tat + interval * n
    local delay = new_tat - offset - now
    if delay < 0 then delay = 0 end
    if n > burst then
      out[#out+1] = 0
      out[#out+1] = -1
      out[#out+1] = math.max(0, math.floor((now + offset - tat) / interval))
      out[#out+1] = math.ceil(tat - now)
    elseif max_wait < 0 or delay <= max_wait then
      new_tat = math.ceil(new_tat)
      if new_tat > now then
        redis.call('SET', key, new_tat, 'PX', math.ceil((new_tat - now) / 1000))
        tats[key] = new_tat
      end
      out[#out+1] = 1
      out[#out+1] = math.ceil(delay)
      out[#out+1] = math.max(0, math.floor((now + offset - new_tat) / interval))
      out[#out+1] = new_tat - now
    else
      out[#out+1] = 0
      out[#out+1] = math.ceil(delay)
      out[#out+1] = math.max(0, math.floor((now + offset - tat) / interval))
      out[#out+1] = math.ceil(tat - now)
    end
  end
end
return out
`

// gcraScript runs gcraSource on any Redis: its keys must share a slot on a
// Cluster. Before Redis 5, scripts replicate as scripts, which TIME forbids
// unless they replicate their effects instead.
var gcraScript = goredis.NewScript("if redis.replicate_commands then redis.replicate_commands() end\n" +
	"local keys, args = KEYS, ARGV" + gcraSource)

// tokensScript returns, as a string (a Lua number would be truncated to an
// integer), the tokens of KEYS[1] now: the events admissible now, at most the
// burst, negative while reservations wait. ARGV: interval and burst, as for
// gcraScript. It writes nothing.
var tokensScript = goredis.NewScript(`
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
if interval == 0 then return tostring(burst) end
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1483228800) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
return tostring((now + interval * burst - tat) / interval)
`)

// cancelScript gives back the n·interval µs (ARGV[1]) of a reservation that
// was due at ARGV[2] (server µs since 2017), if that time is still to come:
// the key's TAT moves back, never before now.
var cancelScript = goredis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1483228800) * 1000000 + tonumber(t[2])
if tonumber(ARGV[2]) <= now then return 0 end
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil then return 0 end
local new_tat = math.max(now, tat - tonumber(ARGV[1]))
if new_tat <= now then
  redis.call('DEL', KEYS[1])
else
  new_tat = math.ceil(new_tat)
  redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil((new_tat - now) / 1000))
end
return 1
`)

// ErrExceedsBurst is returned when a call asks for more events than the
// limiter's burst: such a request can never be admitted.
var ErrExceedsBurst = errors.New(msgPrefix + "n exceeds the limiter's burst")

// ErrWouldExceedDeadline is returned by Wait and WaitN when the wait needed
// would outlast the context's deadline; nothing is reserved then.
var ErrWouldExceedDeadline = errors.New(msgPrefix + "wait would exceed the context deadline")

// Result is the detail of one decision.
type Result struct {
	// Allowed says whether the n events were admitted.
	Allowed bool
	// Remaining is how many more events could be admitted now.
	Remaining int
	// RetryAfter is, when Allowed is false, how long until n events could
	// be admitted; it is -1 when they never can (n above the burst).
	RetryAfter time.Duration
	// ResetAfter is how long until the bucket is full again.
	ResetAfter time.Duration
	// Shared says whether Redis made the decision (true) or the local
	// fallback did (false). The fallback of a KeyedLimiter, the library's
	// backoff.KeyedLimiter, does not tell a key's tokens: its decisions
	// have Remaining and ResetAfter 0.
	Shared bool
}

// gcra is the engine of Limiter and KeyedLimiter: the shared decision in
// Redis, and the local fallback while Redis is unavailable.
type gcra struct {
	client goredis.UniversalClient
	guard  *guard
	clock  clock.WithDelayedExecution
	local  *fallback

	params   atomic.Pointer[params] // the limiter's rate and burst
	paramsMu sync.Mutex             // serialises SetLimit and SetBurst
	// own holds the keys given their own rate and burst (KeyedLimiter's
	// SetKeyLimit): nil while there are none, so that a decision costs one
	// load; replaced, never changed, under ownMu.
	own   atomic.Pointer[map[string]*params]
	ownMu sync.Mutex

	co coalescer

	// cluster says that client is a Cluster client; spread, that the keys
	// of one call may live in different slots of it (WithSpreadKeys), where
	// one script call may not touch them all: a call for several keys is
	// then one script call per key, pipelined (see roundTripSpread).
	cluster, spread bool
}

// params is a rate and a burst, with the script's arguments for them, boxed
// once so that a decision boxes none. A params is never changed: setters
// replace it.
type params struct {
	rate        float64
	burst       int
	interval    float64 // µs per event; 0 for an infinite rate
	intervalArg any
	burstArg    any
}

func newParams(r float64, burst int) *params {
	interval := 0.0
	if !math.IsInf(r, 1) {
		interval = 1e6 / r
	}
	return &params{
		rate:        r,
		burst:       burst,
		interval:    interval,
		intervalArg: strconv.FormatFloat(interval, 'g', -1, 64),
		burstArg:    strconv.Itoa(burst),
	}
}

// minRate is the rate that SetLimit and SetKeyLimit use for a rate that is
// not positive: a bucket with no rate at all would never refill, so its
// Redis key could never expire.
const minRate = 1e-6

// sanitizeParams reads a rate and a burst that arrive at call time, by the
// library's rule for such values: clamped, never rejected. A rate that is
// NaN or not positive counts as minRate, a negative burst as 0.
func sanitizeParams(r float64, burst int) *params {
	if math.IsNaN(r) || r < minRate {
		r = minRate
	}
	return newParams(r, max(burst, 0))
}

func newGCRA(where string, client goredis.UniversalClient, what string, r float64, burst int, c config, keyed bool) *gcra {
	mustBeClient(where, client)
	if math.IsNaN(r) || r <= 0 {
		badArgument(where, "r must be positive", r)
	}
	if burst < 1 {
		badArgument(where, "burst must be at least 1", burst)
	}
	checkClient(client, c, what)
	l := &gcra{
		client:  client,
		guard:   newGuard(what, client, c),
		cluster: isCluster(client),
		spread:  c.spreadKeys && isCluster(client),
		clock:   c.clock,
		local:   newFallback(keyed, r, burst, c),
	}
	l.params.Store(newParams(r, burst))
	return l
}

// paramsOf returns the rate and burst of key (a Redis key).
func (l *gcra) paramsOf(key string) *params {
	if own := l.own.Load(); own != nil {
		if p, ok := (*own)[key]; ok {
			return p
		}
	}
	return l.params.Load()
}

// setParams replaces the limiter's rate and burst with f's answer, here and
// in the fallback.
func (l *gcra) setParams(f func(old *params) *params) {
	l.paramsMu.Lock()
	defer l.paramsMu.Unlock()
	p := f(l.params.Load())
	l.params.Store(p)
	l.local.setLimit(p.rate, p.burst)
}

// setOwn gives key (a Redis key) its own rate and burst (p), or takes them
// away (p nil), here and in the fallback.
func (l *gcra) setOwn(key string, p *params) {
	l.ownMu.Lock()
	defer l.ownMu.Unlock()
	next := map[string]*params{}
	if own := l.own.Load(); own != nil {
		for k, v := range *own {
			next[k] = v
		}
	}
	if p == nil {
		delete(next, key)
	} else {
		next[key] = p
	}
	if len(next) == 0 {
		l.own.Store(nil)
	} else {
		l.own.Store(&next)
	}
	l.local.setKeyLimit(key, p)
}

// decision is one key's answer.
type decision struct {
	Result
	delay    time.Duration         // wait before the events may happen (admitted ones)
	due      int64                 // server µs at which admitted events may happen; 0 for local
	interval float64               // the key's µs per event when decided, for Cancel
	local    []backoff.Reservation // the fallback's reservations, to cancel
}

// Boxed arguments of the most common calls, so that a decision boxes none.
var (
	argOne     any = "1"
	argNoWait  any = "0"
	argAnyWait any = "-1"
)

// ask is what one key of a round trip asks: n events, waiting at most
// maxWait (any wait if negative), under the key's rate and burst.
type ask struct {
	p       *params
	n       int
	maxWait time.Duration
}

func (a ask) nArg() any {
	if a.n == 1 {
		return argOne
	}
	return strconv.Itoa(a.n)
}

func (a ask) waitArg() any {
	switch {
	case a.maxWait < 0:
		return argAnyWait
	case a.maxWait == 0:
		return argNoWait
	}
	return strconv.FormatInt(a.maxWait.Microseconds(), 10)
}

// redisDecide asks Redis about keys and fills out (one per key), with the
// guard's deadline and accounting. maxWait < 0 means any wait. A decision
// for one key may travel with other goroutines' (see coalescer).
func (l *gcra) redisDecide(ctx context.Context, keys []string, n int, maxWait time.Duration, out []decision) error {
	callCtx, cancel := l.guard.begin(ctx)
	var err error
	if len(keys) == 1 {
		out[0], err = l.co.decide(l, callCtx, keys[0], ask{p: l.paramsOf(keys[0]), n: n, maxWait: maxWait})
	} else {
		asks := make([]ask, len(keys))
		for i, k := range keys {
			asks[i] = ask{p: l.paramsOf(k), n: n, maxWait: maxWait}
		}
		err = l.roundTrip(callCtx, keys, asks, out)
	}
	return l.guard.end(ctx, cancel, err)
}

// roundTrip runs gcraScript once for keys, asks[i] being keys[i]'s, and
// fills out. A Cluster's spread keys go by master (see roundTripSpread).
func (l *gcra) roundTrip(ctx context.Context, keys []string, asks []ask, out []decision) error {
	if l.spread && len(keys) > 1 {
		return l.roundTripSpread(ctx, keys, asks, out)
	}
	cmd := gcraScript.Run(ctx, l.client, keys, scriptArgs(asks)...)
	if l.cluster && len(keys) > 1 && slotMoving(cmd.Err()) {
		return l.roundTripPerKey(ctx, keys, asks, out)
	}
	return parseDecisions(cmd, asks, out)
}

// scriptArgs returns gcraSource's ARGV for asks: the short form when every
// key asks the same.
func scriptArgs(asks []ask) []any {
	a0 := asks[0]
	uniform := true
	for _, a := range asks[1:] {
		if a != a0 {
			uniform = false
			break
		}
	}
	if uniform {
		return []any{a0.p.intervalArg, a0.p.burstArg, a0.nArg(), a0.waitArg()}
	}
	args := make([]any, 0, 4+4*len(asks))
	args = append(args, a0.p.intervalArg, a0.p.burstArg, a0.nArg(), a0.waitArg())
	for _, a := range asks {
		args = append(args, a.p.intervalArg, a.p.burstArg, a.nArg(), a.waitArg())
	}
	return args
}

// parseDecisions reads gcraScript's reply for asks into out.
func parseDecisions(cmd *goredis.Cmd, asks []ask, out []decision) error {
	vals, err := cmd.Int64Slice()
	if err == nil && len(vals) != 1+4*len(asks) {
		err = errors.New(msgPrefix + "unexpected reply from the limiter script")
	}
	if err != nil {
		return err
	}
	now := vals[0]
	for i := range asks {
		v := vals[1+4*i : 5+4*i]
		d := decision{Result: Result{
			Allowed:    v[0] == 1,
			Remaining:  int(v[2]),
			ResetAfter: time.Duration(v[3]) * time.Microsecond,
			Shared:     true,
		}, interval: asks[i].p.interval}
		switch {
		case d.Allowed:
			d.delay = time.Duration(v[1]) * time.Microsecond
			d.due = now + v[1]
		case v[1] < 0:
			d.RetryAfter = -1
		default:
			d.RetryAfter = time.Duration(v[1]) * time.Microsecond
		}
		out[i] = d
	}
	return nil
}

// decide decides for keys, in Redis when it can and locally otherwise, into
// out (one per key). The error is the caller's context's, or ErrUnavailable's
// for a limiter that fails closed.
func (l *gcra) decide(ctx context.Context, fullKeys []string, n int, maxWait time.Duration, out []decision) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	var cause error
	if l.guard.tryRedis() {
		err := l.redisDecide(ctx, fullKeys, n, maxWait, out)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		cause = err
	}
	if err := l.guard.unavailable(cause); err != nil {
		return err
	}
	for i, k := range fullKeys {
		out[i] = l.local.reserve(k, n, l.paramsOf(k), maxWait)
	}
	return nil
}

// tokens reads key's tokens in Redis. Without Redis there is no shared value
// to read, so it fails then, with an error that wraps ErrUnavailable.
func (l *gcra) tokens(ctx context.Context, key string) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, context.Cause(ctx)
	}
	if !l.guard.tryRedis() {
		return 0, ErrUnavailable
	}
	p := l.paramsOf(key)
	var tokens float64
	err := l.guard.run(ctx, func(callCtx context.Context) error {
		s, err := tokensScript.Run(callCtx, l.client, []string{key}, p.intervalArg, p.burstArg).Text()
		if err == nil {
			tokens, err = strconv.ParseFloat(s, 64)
		}
		return err
	})
	switch {
	case err == nil:
		return min(tokens, float64(p.burst)), nil
	case ctx.Err() != nil:
		return 0, err
	default:
		return 0, &unavailableError{cause: err}
	}
}

// cancel gives back an admitted decision's events, best effort: Redis
// errors are counted, not returned.
func (l *gcra) cancel(key string, n int, d *decision) {
	if !d.Shared {
		// Latest first: each then gives back all of its tokens.
		for i := len(d.local) - 1; i >= 0; i-- {
			d.local[i].Cancel()
		}
		return
	}
	if d.interval == 0 || !l.guard.tryRedis() {
		return
	}
	cost := strconv.FormatFloat(d.interval*float64(n), 'f', 0, 64)
	_ = l.guard.run(context.Background(), func(ctx context.Context) error {
		return cancelScript.Run(ctx, l.client, []string{key}, cost, d.due).Err()
	})
}

// checkN returns ErrExceedsBurst if n events of key can never be admitted.
func (l *gcra) checkN(key string, n int) error {
	if p := l.paramsOf(key); n > p.burst && p.interval != 0 {
		return ErrExceedsBurst
	}
	return nil
}
