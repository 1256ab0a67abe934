package redis

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// sharedEpoch is the origin of the instants in a SharedRate's record:
// microseconds since 2017-01-01 UTC stay far below 2⁵³, which a Lua double
// holds exactly.
var sharedEpoch = time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)

// sharedRateSource keeps the record of one shared quota: a hash with the
// curve of the estimate (gen, slow, t0, base: see curve) and one field per
// replica, m:<id> = "<lease end µs> <demand> <successes per second>".
//
// ARGV: now (µs since sharedEpoch, on the caller's clock), the replica's id,
// its demand ("+Inf" for more than it is given), its successes per second,
// its lease (µs), the call (sync, cut or leave), the generation the caller's
// cut answers, the estimate the caller sees now, the rate a new record starts
// its slow start at, the estimate a new record starts past a cut at instead
// (0: none; a replica that knew the record before Redis lost it), the curve's
// climb (µs), and the channel that hears of cuts.
//
// A replica that takes a lease (it joins, or comes back after its lease
// ended) is published as "j <id> <demand>", one that leaves as
// "l <id> <demand>", so that the others count it at once rather than at
// their next round trip: replicas that start together would otherwise each
// take the share of a smaller group for up to a sync interval.
//
// A cut is made only if the caller's generation is the record's: a
// throttling answer met at an estimate that another replica's cut has
// already answered cuts nothing. The cut finds the quota at the lower of the
// caller's estimate and the successes per second the live replicas report
// together (what the quota granted them over the last interval or so), and
// publishes the new curve. The first cut, which ends the slow start, finds
// it at no less than half the estimate: the estimate doubles faster than
// the replicas report, so that what they report is out of date by a few
// doublings (a slow start ends as TCP's does, at half the rate that met the
// quota, unless more was granted).
// Leases that have ended are dropped; the record expires when no replica
// has renewed one for ten leases.
//
// A sync that finds the estimate held down by what the replicas want (see
// capped) moves the curve's start to now, at the estimate it was held at
// (ARGV 13; ARGV 14 is the plateau's factor), so that the curve does not
// run ahead of any request while demand is low, to leap when it rises.
//
// Returns {gen, slow (1/0), t0, base, then each live replica's id and demand}.
const sharedRateSource = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local id = 'm:' .. ARGV[2]
local lease = tonumber(ARGV[5])
local call = ARGV[6]
local gen = tonumber(redis.call('HGET', key, 'gen'))
if not gen then
  if call == 'leave' then return {0} end
  gen = 1
  if tonumber(ARGV[10]) > 0 then
    redis.call('HSET', key, 'gen', 1, 'slow', 0, 't0', now - tonumber(ARGV[11]), 'base', ARGV[10])
  else
    redis.call('HSET', key, 'gen', 1, 'slow', 1, 't0', now, 'base', ARGV[9])
  end
end
local held = redis.call('HGET', key, id)
if call == 'leave' then
  if held then
    redis.call('HDEL', key, id)
    redis.call('PUBLISH', ARGV[12], 'l ' .. ARGV[2] .. ' ' .. (string.match(held, '^%S+ (%S+)') or 'inf'))
  end
else
  redis.call('HSET', key, id, string.format('%d %s %s', now + lease, ARGV[3], ARGV[4]))
  if not held then
    redis.call('PUBLISH', ARGV[12], 'j ' .. ARGV[2] .. ' ' .. ARGV[3])
  end
end
redis.call('PEXPIRE', key, math.ceil(lease / 100))
local all = redis.call('HGETALL', key)
local rec, demands, ok = {}, {}, 0
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if string.sub(f, 1, 2) == 'm:' then
    local ends, d, o = string.match(v, '^(%S+) (%S+) (%S+)$')
    if ends == nil or tonumber(ends) < now then
      redis.call('HDEL', key, f)
    else
      demands[#demands + 1] = string.sub(f, 3)
      demands[#demands + 1] = d
      ok = ok + tonumber(o)
    end
  else
    rec[f] = v
  end
end
local rebase = tonumber(ARGV[13])
if call == 'sync' and rebase > 0 and tonumber(ARGV[7]) == gen then
  if rec.slow == '1' then
    rec.t0, rec.base = tostring(now), string.format('%.17g', rebase)
  else
    rec.t0, rec.base = tostring(now - tonumber(ARGV[11])), string.format('%.17g', rebase / tonumber(ARGV[14]))
  end
  redis.call('HSET', key, 't0', rec.t0, 'base', rec.base)
end
if call == 'cut' and tonumber(ARGV[7]) == gen then
  local met = tonumber(ARGV[8])
  if rec.slow == '1' then
    met = math.min(met, math.max(met / 2, ok))
  elseif ok > 0 and ok < met then
    met = ok
  end
  gen = gen + 1
  rec.slow, rec.t0, rec.base = '0', tostring(now), string.format('%.17g', met)
  redis.call('HSET', key, 'gen', gen, 'slow', 0, 't0', now, 'base', rec.base)
  redis.call('PUBLISH', ARGV[12], string.format('%d 0 %d %s', gen, now, rec.base))
end
local out = {gen, tonumber(rec.slow), tonumber(rec.t0), rec.base}
for _, d in ipairs(demands) do out[#out + 1] = d end
return out
`

var sharedRateScript = goredis.NewScript(sharedRateSource)

// sharedReport is what a replica tells the record in a round trip.
type sharedReport struct {
	call    string // sync, cut or leave
	now     int64  // µs since sharedEpoch
	demand  float64
	ok      float64 // successes per second
	gen     int64   // the cut's generation
	est     float64 // the cut's estimate
	initial float64 // a new record's slow-start rate
	seed    float64 // a new record's estimate past a cut, or 0
	rebase  float64 // the estimate demand holds the curve at, or 0
}

// errSharedReply is the error of a reply the script cannot have given.
var errSharedReply = errors.New(msgPrefix + "unexpected reply from the shared rate script")

// runScript runs the script for one report and returns the record's curve
// and the live replicas' demands by id (none after a leave).
func (s *SharedRate) runScript(ctx context.Context, r sharedReport) (curve, map[string]float64, error) {
	args := []any{
		r.now, s.id, formatRate(r.demand), formatRate(r.ok), s.lease.Microseconds(), r.call,
		r.gen, formatRate(r.est), formatRate(r.initial), formatRate(r.seed),
		int64(sharedClimb * 1e6), s.channel, formatRate(r.rebase), formatRate(sharedPlateau),
	}
	res, err := sharedRateScript.Run(ctx, s.client, []string{s.key}, args...).Slice()
	if err != nil {
		return curve{}, nil, err
	}
	if len(res) == 1 {
		return curve{}, nil, nil // a leave from a record that is gone
	}
	if len(res) < 4 {
		return curve{}, nil, errSharedReply
	}
	gen, ok1 := res[0].(int64)
	slow, ok2 := res[1].(int64)
	t0, ok3 := res[2].(int64)
	base, err4 := parseRate(res[3])
	if !ok1 || !ok2 || !ok3 || err4 != nil {
		return curve{}, nil, errSharedReply
	}
	if len(res)%2 != 0 {
		return curve{}, nil, errSharedReply
	}
	members := make(map[string]float64, (len(res)-4)/2)
	for i := 4; i < len(res); i += 2 {
		id, ok := res[i].(string)
		d, err := parseRate(res[i+1])
		if !ok || err != nil {
			return curve{}, nil, errSharedReply
		}
		members[id] = d
	}
	return curve{gen: gen, slow: slow == 1, t0: t0, base: base}, members, nil
}

// parseMember reads a join's or a leave's message: "j <id> <demand>" or
// "l <id> <demand>".
func parseMember(msg string) (join bool, id string, demand float64, ok bool) {
	f := strings.Fields(msg)
	if len(f) != 3 || (f[0] != "j" && f[0] != "l") {
		return false, "", 0, false
	}
	d, err := parseRate(f[2])
	if err != nil {
		return false, "", 0, false
	}
	return f[0] == "j", f[1], d, true
}

// parseCut reads a cut's message: "<gen> <slow> <t0> <base>".
func parseCut(msg string) (curve, bool) {
	f := strings.Fields(msg)
	if len(f) != 4 {
		return curve{}, false
	}
	gen, err1 := strconv.ParseInt(f[0], 10, 64)
	slow, err2 := strconv.ParseInt(f[1], 10, 64)
	t0, err3 := strconv.ParseInt(f[2], 10, 64)
	base, err4 := strconv.ParseFloat(f[3], 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !(base > 0) || math.IsInf(base, 1) {
		return curve{}, false
	}
	return curve{gen: gen, slow: slow == 1, t0: t0, base: base}, true
}

// formatRate writes a rate for the script: +Inf as "inf", which Lua's
// tonumber reads.
func formatRate(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func parseRate(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, errSharedReply
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0, errSharedReply
	}
	return f, nil
}
