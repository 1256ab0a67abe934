package redis

import (
	"context"
	"errors"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// The decisions of a Redis Cluster: where the keys of one call live in
// several slots (WithSpreadKeys), or in a slot that moves.

// gcraNodeScript runs gcraSource for keys of any slots that one Cluster node
// serves (Redis 7 or later): one call decides all of a master's keys of a
// spread batch. A Cluster routes a call by its declared keys, which must
// share a slot even with the flag allow-cross-slot-keys, so only the first
// key is declared (KEYS[1], which routes the call); ARGV[1] is the number of
// keys, ARGV[2..n] the others, and gcraSource's arguments follow. The node
// refuses the call, before it changes anything, when a key's slot is not its
// own (see roundTripSpread).
var gcraNodeScript = goredis.NewScript("#!lua flags=allow-cross-slot-keys\n" + `
local nk = tonumber(ARGV[1])
local keys, args = {KEYS[1]}, {}
for i = 2, nk do keys[i] = ARGV[i] end
for i = nk + 1, #ARGV do args[#args+1] = ARGV[i] end` + gcraSource)

func isCluster(client goredis.UniversalClient) bool {
	_, ok := client.(*goredis.ClusterClient)
	return ok
}

// roundTripSpread decides for keys of several slots of a Cluster in one
// round trip per master, to the masters at once: it groups the keys by the
// master that the client's map of the slots gives, and sends each master one
// gcraNodeScript call for its keys, in one pipeline. A master that refuses
// its call (a slot moved since the client's map was made, a slot that moves,
// a Redis older than 7) has changed nothing; its keys then go again one
// script call per key, which go-redis routes and redirects key by key (see
// roundTripPerKey).
func (l *gcra) roundTripSpread(ctx context.Context, keys []string, asks []ask, out []decision) error {
	cl := l.client.(*goredis.ClusterClient)
	var masters []*goredis.Client
	var groups [][]int // indices of keys, per master
	for i, k := range keys {
		m, err := cl.MasterForKey(ctx, k)
		if err != nil {
			return err
		}
		g := slices.Index(masters, m)
		if g < 0 {
			g = len(masters)
			masters = append(masters, m)
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	gkeys := make([][]string, len(groups))
	gasks := make([][]ask, len(groups))
	for g, idx := range groups {
		for _, i := range idx {
			gkeys[g] = append(gkeys[g], keys[i])
			gasks[g] = append(gasks[g], asks[i])
		}
	}
	cmds, err := runPipelined(ctx, l.client, gcraNodeScript, len(groups), func(g int) ([]string, []any) {
		args := make([]any, 0, len(gkeys[g])+4+4*len(gasks[g]))
		args = append(args, strconv.Itoa(len(gkeys[g])))
		for _, k := range gkeys[g][1:] {
			args = append(args, k)
		}
		return gkeys[g][:1], append(args, scriptArgs(gasks[g])...)
	})
	if err != nil {
		return err
	}
	for g, idx := range groups {
		gout := make([]decision, len(idx))
		err := parseDecisions(cmds[g], gasks[g], gout)
		if isRedisError(err) {
			err = l.roundTripPerKey(ctx, gkeys[g], gasks[g], gout)
		}
		if err != nil {
			return err
		}
		for j, i := range idx {
			out[i] = gout[j]
		}
	}
	return nil
}

// roundTripPerKey decides for keys with one gcraScript call per key, in one
// pipeline: a Cluster client sends each master its keys' calls in one round
// trip, to every master at once, and follows MOVED and ASK replies call by
// call. The decisions of one key keep their order: its calls go to one
// master, on one connection, in order.
func (l *gcra) roundTripPerKey(ctx context.Context, keys []string, asks []ask, out []decision) error {
	cmds, err := runPipelined(ctx, l.client, gcraScript, len(keys), func(i int) ([]string, []any) {
		return keys[i : i+1], scriptArgs(asks[i : i+1])
	})
	if err != nil {
		return err
	}
	for i, c := range cmds {
		if err := parseDecisions(c, asks[i:i+1], out[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}

// runPipelined makes calls calls of script in one pipeline, by EVALSHA,
// call(i) giving the i-th's keys and arguments; the calls that find the
// script missing on their node (the node's first call, or after a failover
// or SCRIPT FLUSH) go again with its source, in a second pipeline. A node
// answers NOSCRIPT for a script it does not have, or CROSSSLOT for
// gcraNodeScript, whose flags it cannot know before it has the script. The
// error is the pipeline's when it failed as a whole (the network); the
// replies of Redis, errors included, are in the commands.
func runPipelined(ctx context.Context, client goredis.UniversalClient, script *goredis.Script, calls int, call func(i int) ([]string, []any)) ([]*goredis.Cmd, error) {
	cmds := make([]*goredis.Cmd, calls)
	send := func(eval bool, which []int) error {
		pipe := client.Pipeline()
		for _, i := range which {
			keys, args := call(i)
			if eval {
				cmds[i] = script.Eval(ctx, pipe, keys, args...)
			} else {
				cmds[i] = script.EvalSha(ctx, pipe, keys, args...)
			}
		}
		_, err := pipe.Exec(ctx)
		if err != nil && !isRedisError(err) {
			return err
		}
		return nil
	}
	all := make([]int, calls)
	for i := range all {
		all[i] = i
	}
	if err := send(false, all); err != nil {
		return nil, err
	}
	var missing []int
	for i, c := range cmds {
		if err := c.Err(); errors.Is(err, goredis.ErrNoScript) || goredis.HasErrorPrefix(err, "NOSCRIPT") || goredis.HasErrorPrefix(err, "CROSSSLOT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		if err := send(true, missing); err != nil {
			return nil, err
		}
	}
	return cmds, nil
}

// isRedisError reports whether err is a reply of Redis (a refusal), rather
// than a failure to reach it.
func isRedisError(err error) bool {
	var re goredis.Error
	return errors.As(err, &re)
}

// slotMoving reports whether err is a Cluster's refusal of a call for
// several keys of one slot while that slot moves to another master: TRYAGAIN
// when some of the keys have moved and others not, or ASK (MOVED after the
// move) that go-redis stopped following after its MaxRedirects. The script
// did not run. One call per key goes through, each key being on one master
// or the other, where go-redis follows the redirection; the decisions are
// the same, each key's being independent. CROSSSLOT, keys of several slots
// in one call, is not expected from our layouts; one call per key is the
// answer to it too.
func slotMoving(err error) bool {
	return err != nil && (goredis.IsTryAgainError(err) ||
		goredis.HasErrorPrefix(err, "ASK") || goredis.HasErrorPrefix(err, "MOVED") ||
		goredis.HasErrorPrefix(err, "CROSSSLOT"))
}
